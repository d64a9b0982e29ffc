"""When a listener pod must be replaced because it stopped, and how long to wait before the next one.

ARC recreates a failed listener pod at once (ARC #4656: a revoked token or a deleted scale set becomes a
tight crash loop), and misses pods that were evicted or lost their node (ARC #4331, #4469). Here:

- :func:`listener_pod_failure` reads the live pod: Failed, evicted, the listener container terminated,
  a disruption (``DisruptionTarget``, e.g. taint eviction of a lost node), or a deletion that cannot finish
  because the kubelet is gone (still terminating well past its grace period). Each has a reason.
- :class:`RestartBackoff` spaces one listener's recreations: ``base * 2**(n-1)`` seconds up to ``cap`` after
  the n-th consecutive failure. A listener that ran :data:`HEALTHY_RUN` seconds or more before it ended (killed,
  OOM-killed after a while) is not crash-looping: it is replaced at once and the count starts over, since every
  second without a listener is a second nobody takes the scale set's jobs (issue 30).
  :meth:`RestartBackoff.state` is what the listener's ``Degraded`` condition is derived from.

Pure: time comes in as arguments.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.api.keys import LISTENER_CONTAINER_NAME
from arc_scaleset.kube.views import PodView, parse_timestamp

STUCK_TERMINATING_GRACE: Final = 60.0
"""Seconds past a pod's deletion deadline after which its node is presumed gone."""

HEALTHY_RUN: Final = 30.0
"""Seconds a listener must have run for its end not to count as a crash loop. What ends a listener it cannot fix
ends it within seconds of its start (a refused credential on the second try, a scale set the service does not
know, a config it cannot read; docs/listener.md), and a hung one is ended by its liveness probe after minutes."""


@dataclass(frozen=True)
class PodFailure:
    reason: str
    """CamelCase: ``ListenerFailed``, ``ListenerEvicted``, ``ListenerDisrupted``, ``ListenerNodeLost``."""
    message: str
    ran_for: float | None = None
    """Seconds the listener container ran before it ended, when known."""
    force_delete: bool = False
    """Delete with grace period 0: the kubelet is gone and will never confirm a graceful deletion."""


def listener_pod_failure(pod: Mapping[str, Any], *, now: dt.datetime) -> PodFailure | None:
    """Why the listener pod is finished and must be replaced, or ``None`` while it runs or starts."""
    view = PodView(pod)
    deletion = view.deletion_timestamp
    if deletion is not None:
        overdue = (now - deletion).total_seconds() - float(view.deletion_grace_period_seconds)
        if overdue > STUCK_TERMINATING_GRACE:
            node = view.node_name or "its node"
            return PodFailure(
                "ListenerNodeLost",
                f"the listener pod has been terminating for {overdue:.0f}s past its grace period; {node} is"
                " presumed lost",
                force_delete=True,
            )
        return None
    if view.reason == "Evicted":
        return PodFailure("ListenerEvicted", f"the listener pod was evicted: {view.message or 'no message'}")
    for condition in view.conditions:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            return PodFailure(
                "ListenerDisrupted",
                f"the listener pod is being disrupted ({condition.get('reason') or 'unknown reason'}):"
                f" {condition.get('message') or ''}".rstrip(": "),
            )
    container = view.container_status(LISTENER_CONTAINER_NAME)
    terminated = ((container or {}).get("state") or {}).get("terminated")
    if terminated is not None:
        started = parse_timestamp(terminated.get("startedAt"))
        finished = parse_timestamp(terminated.get("finishedAt"))
        ran_for = (finished - started).total_seconds() if started and finished else None
        detail = terminated.get("reason") or "Error"
        return PodFailure(
            "ListenerFailed",
            f"the listener container exited with code {terminated.get('exitCode')} ({detail})",
            ran_for=ran_for,
        )
    if view.phase == "Failed":
        return PodFailure("ListenerFailed", f"the listener pod failed: {view.reason or 'unknown reason'}")
    if view.phase == "Succeeded":
        return PodFailure("ListenerFailed", "the listener pod exited")
    return None


def recreation_note(failure: PodFailure, *, delay: float, failures: int) -> str:
    """What the Warning Event of a replaced listener pod says: when the next pod comes, and why then.
    ``delay`` and ``failures``: what :class:`RestartBackoff` made of the failure (``failures`` 0: a healthy run)."""
    if failures == 0:
        return f"{failure.message}; recreating it now (it ran {failure.ran_for or 0.0:.0f}s: not a crash loop)"
    return f"{failure.message}; recreating it in {delay:.0f}s (failure {failures} in a row)"


def listener_running(pod: Mapping[str, Any]) -> bool:
    """Whether the listener container is running (for ``gha_controller_running_listeners``)."""
    container = PodView(pod).container_status(LISTENER_CONTAINER_NAME)
    return ((container or {}).get("state") or {}).get("running") is not None


@dataclass(frozen=True)
class BackoffState:
    """One listener's restart backoff at a moment (for its status)."""

    failures: int
    """Consecutive failures counted (a listener that ran longer than ``cap`` before failing starts at 1)."""
    delay: float
    """Seconds the latest failure made the recreation wait."""
    remaining: float
    """Seconds still to wait before the listener may be recreated (0 once it may)."""
    cap: float
    """The longest delay the backoff grows to."""
    last_failure: str = ""
    """What the latest failure was (a :attr:`PodFailure.message`), when known."""


class RestartBackoff:
    """One listener's spacing of recreations after failures (monotonic seconds in, seconds out).

    Held in the listener's memory slot (:class:`.scope.ListenerMemory`), so it is forgotten with the listener
    and a listener made again under the same name starts with no failure on record.
    """

    def __init__(self, *, base: float, cap: float) -> None:
        if not 0 < base <= cap:
            raise ValueError("restart backoff needs 0 < base <= cap")
        self.base = base
        self.cap = cap
        self._failures = 0
        self._not_before = 0.0
        self._last_pod_uid = ""
        self._delay = 0.0
        self._last_failure = ""

    def record_failure(self, *, pod_uid: str, now: float, ran_for: float | None = None, message: str = "") -> float:
        """Count the failure of pod ``pod_uid``; returns the delay before the listener may be recreated (0 after a
        run of :data:`HEALTHY_RUN` seconds or more, which starts the count over).

        The same pod is counted once, however many reconciles see it before it is gone. ``message`` says
        what the failure was (kept for :meth:`state`).
        """
        if self.is_recorded(pod_uid=pod_uid):
            return self.remaining(now=now)
        self._last_pod_uid = pod_uid
        self._last_failure = message
        if ran_for is not None and ran_for >= HEALTHY_RUN:
            # It ran long enough to have worked: not a crash loop. Replaced at once; failing fast after that
            # backs off from ``base`` again.
            self._failures = 0
            self._delay = 0.0
            return 0.0
        self._failures += 1
        # The exponent stops growing long past the cap: 2.0 ** n overflows a float past n = 1023.
        self._delay = float(min(self.cap, self.base * 2.0 ** min(self._failures - 1, 64)))
        self._not_before = now + self._delay
        return self._delay

    def is_recorded(self, *, pod_uid: str) -> bool:
        """Whether the failure of pod ``pod_uid`` was already counted (or, after a healthy run, seen)."""
        return bool(pod_uid) and self._last_pod_uid == pod_uid

    def remaining(self, *, now: float) -> float:
        """Seconds until the listener may be recreated (0 when it may now)."""
        return 0.0 if self._failures == 0 else max(0.0, self._not_before - now)

    def state(self, *, now: float) -> BackoffState | None:
        """The listener's backoff at ``now``, or ``None`` when it has no failure on record."""
        if self._failures == 0:
            return None
        return BackoffState(
            failures=self._failures,
            delay=self._delay,
            remaining=self.remaining(now=now),
            cap=self.cap,
            last_failure=self._last_failure,
        )

    @property
    def failures(self) -> int:
        """Consecutive failures on record (0: none)."""
        return self._failures
