"""What an EphemeralRunner's pod says, as a pure function (docs/controllers.md).

:func:`pod_outcome` reads a runner pod (and two facts about its EphemeralRunner) and returns one
:class:`Outcome`; the reconciler acts on it. Checked in this order:

1. the ``runner`` container terminated: exit 0 -> ``SUCCEEDED``; exit 7 -> ``OUTDATED`` (runner version
   deprecated); reason ``OOMKilled`` -> ``LOST``; any other code -> a pod failure (below);
2. the pod ended although the ``runner`` container's exit is not reported. Phase ``Failed``: evicted, node
   lost or shut down (``status.reason``), or a ``DisruptionTarget`` condition -> ``LOST``; the EphemeralRunner
   had seen its runner run -> ``LOST`` too (the pod ended under a running runner); otherwise a pod failure.
   Phase ``Succeeded`` -> ``SUCCEEDED``: Kubernetes marks a pod Succeeded only when every container exited 0,
   the runner's included;
3. an init container terminated non-zero -> a pod failure;
4. the pod is being deleted although the runner never finished, and the EphemeralRunner had seen it run
   -> ``LOST`` (drained, evicted through the API, or its node vanished and the pod was garbage-collected);
5. a container waiting for a reason that never resolves by waiting (``InvalidImageName``,
   ``ErrImageNeverPull``) -> ``CANNOT_START``: fail fast with a reason that says so;
6. the ``runner`` container has not started within ``pending_timeout`` of the pod's creation (unschedulable,
   an image that keeps failing to pull, a volume that never attaches) -> a pod failure with reason
   ``PendingTimeout``. A slow start (a node being provisioned) is only a wait: the timeout is long (15
   minutes by default, as Buildkite's agent stack), and until it passes the outcome says when to look again;
7. no status for the ``runner`` container yet -> ``WAIT``; otherwise ``MIRROR`` the pod phase and readiness.

A pod never moves its runner's phase backwards: a pod that has ended (``Succeeded``, ``Failed``) is judged by
rules 1 and 2 and never mirrored, and a pod phase that says nothing (``Unknown``: its node stopped reporting)
leaves a ``Running`` runner ``Running``. Mirroring such pods as ``Pending`` patched a runner from ``Running``
back to ``Pending`` (issue 15), after which a missing pod reads as "not started yet" instead of "lost". Only a
retry sets ``Pending`` again, for the new pod it makes.

A pod failure is ``DELETE_RUNNER`` when the runner has a job (the job is lost with the pod; ARC's rule)
and ``RETRY`` otherwise (delete the pod, record the failure, recreate it after the backoff).

The reason and message of every outcome are masked of secrets (:func:`arc_scaleset.observability.logging.redact`)
and then cut to :data:`REASON_LIMIT` / :data:`MESSAGE_LIMIT` characters: they quote the pod's status and its
containers' waiting and termination messages, which the runner container itself may write, and they reach the
EphemeralRunner's status, its Events and the logs, which anyone who can read the runner may read. Masked
before cut, so a secret across the cut cannot leave its first half behind.

Beyond ARC, ``LOST`` is terminal whether or not a job was assigned: the EphemeralRunner is deleted, which
removes its registration through its finalizer, and the set replaces it. Restarting the same registration
on a new pod after an OOM kill or a lost node is what leaves zombie runners in ARC (ARC #4155, #3319, #4197, #3014).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.api.keys import RUNNER_CONTAINER_NAME, EphemeralRunnerPhase
from arc_scaleset.api.views import EphemeralRunnerView
from arc_scaleset.kube.views import PodView, parse_timestamp
from arc_scaleset.observability.logging import redact

EXIT_SUCCESS: Final = 0
EXIT_RUNNER_OUTDATED: Final = 7

MAX_FAILURES: Final = 5
FAILURE_BACKOFF: Final = (0.0, 5.0, 10.0, 20.0, 40.0, 80.0)
"""Seconds to wait before recreating a pod, by the number of failures recorded so far."""

NEVER_STARTS: Final = frozenset({"InvalidImageName", "ErrImageNeverPull"})
"""Container waiting reasons the kubelet never recovers from on its own: the spec must change."""
LOST_POD_REASONS: Final = frozenset({"Evicted", "NodeLost", "Shutdown", "NodeShutdown", "Terminated"})
"""Pod ``status.reason`` values of a pod the node took away (evicted, lost, shut down). Admission
rejections (``OutOfcpu``, ``OutOfmemory``...) are not among them: the pod never ran, a retry may fit."""
OOM_KILLED: Final = "OOMKilled"
PENDING_TIMEOUT_REASON: Final = "PendingTimeout"
MESSAGE_LIMIT: Final = 32768
"""Characters of an outcome's message: a condition message's limit (the status field has none of its own)."""
REASON_LIMIT: Final = 1024
"""Characters of an outcome's reason: a condition reason's limit."""


class Verdict(enum.StrEnum):
    WAIT = "Wait"
    MIRROR = "Mirror"
    SUCCEEDED = "Succeeded"
    OUTDATED = "Outdated"
    RETRY = "Retry"
    DELETE_RUNNER = "DeleteRunner"
    LOST = "Lost"
    CANNOT_START = "CannotStart"


@dataclass(frozen=True)
class Outcome:
    """A verdict with the reason and message to record (status, Event); ``phase``/``ready`` for MIRROR;
    ``recheck_after``: seconds until the verdict changes by itself (the pending timeout), if it will."""

    verdict: Verdict
    reason: str = ""
    message: str = ""
    phase: str = ""
    ready: bool = False
    recheck_after: float | None = None


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """The ``Ready`` condition's status; with several (should not happen), the latest transition wins."""
    ready = [c for c in PodView(pod).conditions if c.get("type") == "Ready"]
    if not ready:
        return False
    latest = max(
        ready, key=lambda c: parse_timestamp(c.get("lastTransitionTime")) or dt.datetime.min.replace(tzinfo=dt.UTC)
    )
    return bool(latest.get("status") == "True")


def _failure(has_job: bool, reason: str, message: str) -> Outcome:
    return Outcome(Verdict.DELETE_RUNNER if has_job else Verdict.RETRY, reason=reason, message=message)


def pod_outcome(
    pod: Mapping[str, Any],
    *,
    has_job: bool,
    runner_phase: str,
    now: dt.datetime | None = None,
    pending_timeout: float | None = None,
) -> Outcome:
    """See the module docstring. ``runner_phase`` is the EphemeralRunner's ``status.phase``; the pending
    timeout applies when both ``now`` and ``pending_timeout`` (seconds) are given."""
    return masked(_judge(pod, has_job=has_job, runner_phase=runner_phase, now=now, pending_timeout=pending_timeout))


def masked(outcome: Outcome) -> Outcome:
    """``outcome`` with its reason and message masked of secrets, then cut to their limits (module docstring)."""
    return dataclasses.replace(
        outcome, reason=redact(outcome.reason)[:REASON_LIMIT], message=redact(outcome.message)[:MESSAGE_LIMIT]
    )


def _judge(
    pod: Mapping[str, Any],
    *,
    has_job: bool,
    runner_phase: str,
    now: dt.datetime | None,
    pending_timeout: float | None,
) -> Outcome:
    view = PodView(pod)
    runner = view.container_status(RUNNER_CONTAINER_NAME)
    decided = (
        _runner_exited(runner, has_job)  # rule 1
        or _pod_ended(view, has_job=has_job, runner_phase=runner_phase)  # rule 2
        or _init_failed(view, has_job)  # rule 3
        or _deleted_under_running_runner(view, runner_phase)  # rule 4
        or _never_starts(view)  # rule 5
    )
    if decided is not None:
        return decided
    recheck_after: float | None = None
    if now is not None and pending_timeout is not None and not _started(runner):  # rule 6
        created = view.creation_timestamp
        if created is not None:
            remaining = (created + dt.timedelta(seconds=pending_timeout) - now).total_seconds()
            if remaining <= 0:
                return _failure(
                    has_job,
                    PENDING_TIMEOUT_REASON,
                    f"the runner did not start within {pending_timeout:g}s of its pod's creation ({_why_pending(pod)})",
                )
            recheck_after = remaining
    return _wait_or_mirror(view, runner, runner_phase=runner_phase, recheck_after=recheck_after)  # rule 7


def _runner_exited(runner: Mapping[str, Any] | None, has_job: bool) -> Outcome | None:
    terminated = (runner or {}).get("state", {}).get("terminated") if runner else None
    if terminated is None:
        return None
    code = terminated.get("exitCode")
    reason = str(terminated.get("reason") or "")
    if code == EXIT_SUCCESS:
        return Outcome(Verdict.SUCCEEDED, reason="Succeeded", message="the runner finished its job")
    if code == EXIT_RUNNER_OUTDATED:
        return Outcome(Verdict.OUTDATED, reason="Outdated", message="Runner is deprecated")
    if reason == OOM_KILLED:
        return Outcome(Verdict.LOST, reason=OOM_KILLED, message="the runner container was OOM-killed")
    return _failure(has_job, reason or "Error", f"the runner container exited with code {code}")


def _pod_ended(view: PodView, *, has_job: bool, runner_phase: str) -> Outcome | None:
    if view.phase == "Succeeded":
        return Outcome(
            Verdict.SUCCEEDED,
            reason="Succeeded",
            message="the runner pod succeeded (every container exited 0; the runner's exit was not reported)",
        )
    if view.phase != "Failed":
        return None
    pod_reason = view.reason
    message = view.message
    if pod_reason in LOST_POD_REASONS or view.has_condition("DisruptionTarget"):
        return Outcome(
            Verdict.LOST, reason=pod_reason or "DisruptionTarget", message=message or "the pod was taken away"
        )
    if runner_phase == EphemeralRunnerPhase.RUNNING:
        # The runner ran and its pod ended without its exit being reported: whatever it was doing is
        # lost with the pod, and its one-shot registration must not be started again on a new pod.
        return Outcome(
            Verdict.LOST,
            reason=pod_reason or "PodFailed",
            message="the runner pod failed while the runner ran, and the runner's exit was never reported"
            + (f": {message}" if message else ""),
        )
    return _failure(has_job, pod_reason or "PodFailed", message or "the runner pod failed")


def _init_failed(view: PodView, has_job: bool) -> Outcome | None:
    for init in view.init_container_statuses:
        init_terminated = (init.get("state") or {}).get("terminated")
        if init_terminated is not None and init_terminated.get("exitCode") not in (None, 0):
            return _failure(
                has_job,
                "InitContainerFailed",
                f"init container {init.get('name')} exited with code {init_terminated.get('exitCode')}",
            )
    return None


def _deleted_under_running_runner(view: PodView, runner_phase: str) -> Outcome | None:
    if view.is_deleting and runner_phase == EphemeralRunnerPhase.RUNNING:
        return Outcome(Verdict.LOST, reason="PodDeleted", message="the runner pod was deleted while the runner ran")
    return None


def _never_starts(view: PodView) -> Outcome | None:
    for waiting_status in (*view.init_container_statuses, *view.container_statuses):
        waiting = (waiting_status.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in NEVER_STARTS:
            detail = str(waiting.get("message") or "")
            return Outcome(
                Verdict.CANNOT_START,
                reason=str(waiting["reason"]),
                message=(
                    f"container {waiting_status.get('name')} can never start ({waiting['reason']}"
                    f"{': ' + detail if detail else ''}); fix the runner template"
                ),
            )
    return None


def _wait_or_mirror(
    view: PodView, runner: Mapping[str, Any] | None, *, runner_phase: str, recheck_after: float | None
) -> Outcome:
    if runner is None:
        return Outcome(Verdict.WAIT, recheck_after=recheck_after)
    phase = view.phase
    if phase in (EphemeralRunnerPhase.PENDING, EphemeralRunnerPhase.RUNNING):
        mirrored = phase
    elif runner_phase == EphemeralRunnerPhase.RUNNING:
        mirrored = EphemeralRunnerPhase.RUNNING  # Unknown or no phase says nothing new: never back to Pending
    else:
        mirrored = EphemeralRunnerPhase.PENDING
    return Outcome(
        Verdict.MIRROR,
        phase=mirrored,
        ready=pod_ready(view.raw),
        reason=view.reason,
        message=view.message,
        recheck_after=recheck_after,
    )


def _started(runner: Mapping[str, Any] | None) -> bool:
    """Whether the runner container has run at all (running now, or terminated)."""
    if runner is None:
        return False
    state = runner.get("state") or {}
    return "running" in state or "terminated" in state or "terminated" in (runner.get("lastState") or {})


def _why_pending(pod: Mapping[str, Any]) -> str:
    """What holds the pod back, in the kubelet's or scheduler's words: the first waiting container's reason,
    else a false pod condition (Unschedulable...), else its phase."""
    view = PodView(pod)
    for container in (*view.init_container_statuses, *view.container_statuses):
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            detail = f": {waiting['message']}" if waiting.get("message") else ""
            return f"container {container.get('name')} {waiting['reason']}{detail}"
    for condition in view.conditions:
        if condition.get("status") == "False" and condition.get("reason"):
            detail = f": {condition['message']}" if condition.get("message") else ""
            return f"{condition.get('type')} {condition['reason']}{detail}"
    return f"pod phase {view.phase or 'Pending'}"


def failure_count(er: Mapping[str, Any]) -> int:
    return len(EphemeralRunnerView(er).failures)


def backoff_remaining(er: Mapping[str, Any], *, now: dt.datetime) -> float:
    """Seconds to wait before recreating the pod (0: now), from the recorded failures."""
    failures = EphemeralRunnerView(er).failures
    if not failures:
        return 0.0
    times = [t for t in (parse_timestamp(v) for v in failures.values()) if t is not None]
    if not times:
        return 0.0
    delay = FAILURE_BACKOFF[min(len(failures), len(FAILURE_BACKOFF) - 1)]
    return max(0.0, (max(times) + dt.timedelta(seconds=delay) - now).total_seconds())
