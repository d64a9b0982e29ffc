"""The AutoscalingListener's status, derived at the end of every reconcile pass and written once.

Two conditions (ARC writes no listener status; the restart backoff of ARC #4656 would otherwise show only in
Events):

- ``Ready``: ``True`` while the listener container runs and the listener reports that it holds its message
  session and polls it (:mod:`.listener_health`: the state it writes on its EphemeralRunnerSet). ``False``
  says why not: ``PodPending`` (created, scheduling or starting), ``WaitingForBackoff`` (it failed and is
  recreated when its backoff ends), ``Recreating`` (replaced because its spec or config changed), the
  listener's own account while its container runs (``ListenerStarting``, ``WaitingForSession``, ``Failing``,
  ``Stopped``), or the reason of a configuration error (``InvalidListenerTemplate``, a missing Secret...). A
  configuration error found while the pod still runs leaves ``Ready`` ``True`` and is named in its message:
  the listener serves, on its previous config.
- ``Degraded``: ``True`` while the listener keeps failing and no replacement runs yet (``ListenerFailing``; the
  message says how many failures in a row, when the next restart is due and how far the backoff grows), and
  during an outage: from the moment a ``Ready`` listener stops being ready until it is ready again
  (``ListenerOffline``, whatever the cause; its ``lastTransitionTime`` is when the outage began). ``False``
  otherwise. An outage's start and end are Events (:func:`outage_event`).
- An error that is not bad input (an API server that refuses a write...) makes ``Degraded`` ``True`` with its reason
  and masked text once it persists (:mod:`arc_scaleset.kube.failures`: 3 passes or 60 s); before that a failed
  pass leaves ``Degraded`` as it was, so it never reads "the listener has not failed" while reconciling fails.
- A refusal (a listener outside the controller namespace or not made by its scale set, an object in the way
  of a child, a ``listenerTemplate`` the policy refuses: :mod:`.ownership`, :mod:`.template_policy`) makes
  both ``Ready`` ``False`` and ``Degraded`` ``True`` with the refusal's reason and message: no listener runs.

Messages are stable across the passes of one state (no countdowns), so a status that did not change is
never written again; ``lastTransitionTime`` moves only when a condition's status flips
(:func:`~arc_scaleset.kube.conditions.set_condition`). Pure: the pass's findings and the time come in.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from arc_scaleset.api.keys import LISTENER_CONTAINER_NAME
from arc_scaleset.controllers.autoscalinglistener.restart import BackoffState
from arc_scaleset.kube.conditions import (
    ConditionStatus,
    format_time,
    get_condition,
    is_condition_true,
    set_condition,
)
from arc_scaleset.kube.failures import Failure
from arc_scaleset.kube.views import PodView, parse_timestamp

CONDITION_READY: Final = "Ready"
CONDITION_DEGRADED: Final = "Degraded"

REASON_RUNNING: Final = "ListenerRunning"
REASON_POD_PENDING: Final = "PodPending"
REASON_WAITING_FOR_BACKOFF: Final = "WaitingForBackoff"
REASON_RECREATING: Final = "Recreating"
REASON_FAILING: Final = "ListenerFailing"
REASON_HEALTHY: Final = "ListenerHealthy"
REASON_OFFLINE: Final = "ListenerOffline"
OUTAGE_REASONS: Final = frozenset({REASON_FAILING, REASON_OFFLINE})
"""``Degraded`` reasons that mean "the listener is not serving": the span of an outage."""


@dataclass(frozen=True)
class PodReadiness:
    """What the pod step of a pass found: the ``Ready`` condition's status, reason and message; ``runs``: the
    listener container runs (it may still not be ready: no session, failing polls)."""

    ready: bool
    reason: str
    message: str
    runs: bool = False


@dataclass
class ListenerReport:
    """What one reconcile pass found; the shell fills it in as its steps run."""

    generation: int
    pod_running: bool = False
    """Whether the listener container runs (as last seen); decides ``Ready`` when the pass ended early."""
    pod: PodReadiness | None = None
    """The pod step's finding; ``None`` when the pass ended before it (an error, a write conflict)."""
    problem: tuple[str, str] | None = None
    """(reason, message) of the configuration error that ended the pass."""
    refused: bool = False
    """The problem is a refusal: no listener pod runs for this listener (``Degraded`` says why)."""
    restarts: BackoffState | None = None
    """The listener's restart backoff (``None``: no failure on record)."""
    cancelled: bool = False
    """The pass was cancelled: no status is written."""
    failed: bool = False
    """Another error ended the pass (not a configuration error): retried by the controller with backoff."""
    failure: Failure | None = None
    """That error, once it is persistent (:func:`arc_scaleset.kube.failures.pass_failure`)."""


def running_readiness(pod_name: str) -> PodReadiness:
    return PodReadiness(True, REASON_RUNNING, f"listener pod {pod_name} is running", runs=True)


def pending_readiness(pod: Mapping[str, Any]) -> PodReadiness:
    """``PodPending`` with what the pod waits for (phase, and the listener container's waiting reason)."""
    view = PodView(pod)
    detail = view.phase or "Pending"
    for container in view.container_statuses:
        if container.get("name") == LISTENER_CONTAINER_NAME:
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason"):
                detail += f", {waiting['reason']}"
    return PodReadiness(False, REASON_POD_PENDING, f"listener pod {view.name} is not running yet ({detail})")


def created_readiness(pod_name: str) -> PodReadiness:
    return PodReadiness(False, REASON_POD_PENDING, f"created listener pod {pod_name}; waiting for it to run")


def backoff_readiness(state: BackoffState | None) -> PodReadiness:
    """The listener stopped and waits out its restart backoff (the same message on every pass of that wait)."""
    last = state.last_failure if state is not None and state.last_failure else "the listener pod stopped"
    return PodReadiness(
        False,
        REASON_WAITING_FOR_BACKOFF,
        f"{last}; a new listener pod is created when the restart backoff ends (see the Degraded condition)",
    )


def recreating_readiness(pod_name: str, why: str) -> PodReadiness:
    return PodReadiness(False, REASON_RECREATING, f"listener pod {pod_name} is being replaced: {why}")


def _seconds(value: float) -> str:
    return f"{value:.0f}s" if value >= 1 or value == 0 else f"{value:.1f}s"


def _failed(count: int) -> str:
    return "failed once" if count == 1 else f"failed {count} times in a row"


def degraded_message(state: BackoffState, *, now: dt.datetime) -> str:
    """``listener failed 3 times in a row; next restart in 4s at <time> (backoff up to 300s); last failure: ...``.

    "in Ns" is the delay the latest failure earned (fixed for that failure); the due time is absolute, so
    the message does not change between the passes of one wait.
    """
    head = f"listener {_failed(state.failures)}"
    cap = f"backoff up to {_seconds(state.cap)}"
    if state.remaining > 0:
        due = format_time(now + dt.timedelta(seconds=state.remaining))
        body = f"next restart in {_seconds(state.delay)} at {due} ({cap})"
    else:
        body = f"restarted after {_seconds(state.delay)}; waiting for the new pod to run ({cap})"
    tail = f"; last failure: {state.last_failure}" if state.last_failure else ""
    return f"{head}; {body}{tail}"


def derive_conditions(
    conditions: Sequence[Mapping[str, Any]] | None, report: ListenerReport, *, now: dt.datetime
) -> list[dict[str, Any]]:
    """The conditions to store for this pass (``conditions`` is not modified)."""
    generation = report.generation
    result = [dict(condition) for condition in conditions or []]
    ready = _ready(report)
    if ready is not None:
        result = set_condition(
            result,
            type=CONDITION_READY,
            status="True" if ready.ready else "False",
            reason=ready.reason,
            message=ready.message,
            observed_generation=generation,
            now=now,
        )
    running = report.pod.runs if report.pod is not None else report.pod_running
    restarts = report.restarts
    outage = _outage(conditions, ready)
    status: ConditionStatus = "False"
    if report.refused and report.problem is not None:
        status, (reason, message) = "True", report.problem
    elif report.failure is not None:
        status, reason, message = "True", report.failure.reason, report.failure.message
    elif report.failed:
        return result  # not persistent yet: what is stored stands
    elif restarts is not None and restarts.failures > 0 and not running:
        status, reason, message = "True", REASON_FAILING, degraded_message(restarts, now=now)
    elif outage is not None:
        status, reason, message = "True", REASON_OFFLINE, outage
    elif restarts is not None and restarts.failures > 0:
        reason, message = REASON_HEALTHY, f"the listener runs again; it had {_failed(restarts.failures)}"
    else:
        reason, message = REASON_HEALTHY, "the listener has not failed"
    return set_condition(
        result,
        type=CONDITION_DEGRADED,
        status=status,
        reason=reason,
        message=message,
        observed_generation=generation,
        now=now,
    )


def _in_outage(conditions: Sequence[Mapping[str, Any]] | None) -> bool:
    degraded = get_condition(conditions, CONDITION_DEGRADED)
    return degraded is not None and degraded.get("status") == "True" and degraded.get("reason") in OUTAGE_REASONS


def _outage(conditions: Sequence[Mapping[str, Any]] | None, ready: PodReadiness | None) -> str | None:
    """The ``Degraded`` message of an outage this pass finds (``None``: no outage).

    An outage begins when a ``Ready`` listener is found not ready, and lasts while it is not; a listener that has
    not been ready yet (starting) is not in one. A pass that learned nothing (``ready`` is ``None``) keeps it.
    """
    if ready is None:
        stored = get_condition(conditions, CONDITION_DEGRADED)
        if _in_outage(conditions) and stored is not None and stored.get("reason") == REASON_OFFLINE:
            return str(stored.get("message") or "")
        return None
    if ready.ready or not (is_condition_true(conditions, CONDITION_READY) or _in_outage(conditions)):
        return None
    return f"the listener is offline ({ready.reason}): {ready.message}"


def outage_event(
    before: Sequence[Mapping[str, Any]] | None, after: Sequence[Mapping[str, Any]], *, now: dt.datetime
) -> tuple[Literal["Normal", "Warning"], str, str] | None:
    """The Event (type, reason, note) that marks the start or the end of an outage between the stored
    conditions and the new ones, or ``None``.

    Start: ``Degraded`` turns ``True`` with an outage reason (``ListenerOffline``, with what ``Ready`` says).
    End: it turns back while ``Ready`` is ``True`` (``ListenerOnline``, with how long the outage lasted, measured
    from ``Degraded``'s ``lastTransitionTime``, so a controller restart in between loses nothing).
    """
    was, now_out = _in_outage(before), _in_outage(after)
    ready = get_condition(after, CONDITION_READY) or {}
    if now_out and not was:
        return (
            "Warning",
            REASON_OFFLINE,
            f"the listener is offline ({ready.get('reason', 'NotReady')}): {ready.get('message', '')}",
        )
    if was and not now_out and ready.get("status") == "True":
        degraded = get_condition(before, CONDITION_DEGRADED) or {}
        began = parse_timestamp(degraded.get("lastTransitionTime"))
        lasted = f" after {_seconds(max(0.0, (now - began).total_seconds()))}" if began is not None else ""
        since = f" (offline since {format_time(began)})" if began is not None else ""
        return "Normal", "ListenerOnline", f"the listener is online again{lasted}{since}"
    return None


def _ready(report: ListenerReport) -> PodReadiness | None:
    if report.pod is not None:
        return report.pod
    if report.problem is not None:
        reason, message = report.problem
        if report.pod_running and not report.refused:
            # The pod runs on its previous config: the listener serves, but the problem must be visible.
            return PodReadiness(True, REASON_RUNNING, f"the listener pod runs on its previous config; {message}")
        return PodReadiness(False, reason, message)
    return None  # the pass learned nothing new (a write conflict): keep what is stored


def status_patch(current: Mapping[str, Any] | None, conditions: list[dict[str, Any]]) -> dict[str, Any]:
    """The status merge patch for ``conditions`` (``{}`` when they are what is stored)."""
    return {} if (current or {}).get("conditions") == conditions else {"conditions": conditions}
