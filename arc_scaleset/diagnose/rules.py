"""The diagnosis rules of ``arc-scaleset explain``: pure functions of a :class:`~.snapshot.Snapshot`.

Each rule looks for one thing a senior operator would look for and returns :class:`Finding` s, each one line
that carries its evidence ("3 runners Pending for 6m: pod unschedulable (0/3 nodes are available: ...)").
A rule reads only the snapshot (``taken_at`` is "now"), so a recorded snapshot replays exactly
(tests/unit/diagnose/). :func:`explain` runs them all in :data:`RULES` order, most blocking first.

The texts quote condition messages, pod messages and Event notes, masked with the log redaction.
"""

from __future__ import annotations

import collections
import datetime as dt
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from arc_scaleset.api.keys import CONDITION_CAPACITY_LIMITED, EphemeralRunnerPhase
from arc_scaleset.api.listener_state import SCALE_SET_NOT_FOUND, ListenerPhase
from arc_scaleset.api.views import EphemeralRunnerSetView, EphemeralRunnerView
from arc_scaleset.api.warm_capacity import CONDITION_WARM_CAPACITY, EVENT_WARM_PLACEHOLDER_PREEMPTED
from arc_scaleset.diagnose.jobs import job_rows, slowest_phase
from arc_scaleset.diagnose.snapshot import Snapshot
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.views import ObjectView, PodView, mapping, sequence, string
from arc_scaleset.observability.logging import redact

__all__ = ["ADDENDA", "RULES", "Finding", "Severity", "explain", "format_age"]


class Severity(enum.StrEnum):
    ERROR = "error"
    """Nothing runs until someone acts (bad credentials, an unschedulable pod)."""
    WARNING = "warning"
    """Work waits or is degraded; it may resolve by itself."""
    INFO = "info"
    """Normal work in progress worth knowing (a revision rolling out)."""


@dataclass(frozen=True)
class Finding:
    """One line of the diagnosis; ``objects`` names the objects it is about (``Kind namespace/name``)."""

    rule: str
    severity: Severity
    line: str
    objects: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "severity": self.severity.value, "line": self.line, "objects": list(self.objects)}


Rule = Callable[[Snapshot], list[Finding]]

CREDENTIAL_REASONS: Final = frozenset({"InvalidSecret", "GitHubAuthenticationFailed"})
"""Conditions of the scale set that mean GitHub (or the Secret's shape) refused the credentials."""
LISTENER_OFFLINE: Final = "ListenerOffline"
"""The scale set's ``Degraded`` reason repeating its listener's outage (docs/controllers.md)."""
PULL_FAILURES: Final = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
START_FAILURES: Final = frozenset({"CreateContainerConfigError", "CreateContainerError", "RunContainerError"})
PENDING_GRACE: Final = dt.timedelta(minutes=2)
"""A runner Pending for no reason the pod states is only reported after this long (image pulls take time)."""
LISTENER_GRACE: Final = dt.timedelta(minutes=1)
"""A listener without a session or failing its polls for less than this is starting or retrying, not stuck."""
JOB_WAIT_WORTH_SAYING: Final = 10.0
"""Seconds of a phase's p95 below which where jobs wait is not worth a line (a warm runner takes a job in seconds)."""
MAX_LISTED: Final = 5
"""Job IDs and object names quoted in one line, at most."""
SESSION_ERRORS: Final[Mapping[str, str]] = {
    "SessionConflict": "GitHub answered 409 (session held by another listener; an old controller may still run)",
    "Unauthorized": "GitHub refused the credentials (401)",
    "MessageQueueTokenExpired": "GitHub refused the message queue token (401)",
    "RateLimited": "GitHub rate-limits the scale set (429)",
    "TransientError": "GitHub failed (5xx, timeout, or an answer that could not be used)",
    SCALE_SET_NOT_FOUND: "GitHub does not know the scale set (404; the controller registers it again)",
}


def format_age(delta: dt.timedelta) -> str:
    """``45s``, ``6m``, ``2h5m``, ``3d4h``: a duration the way ``kubectl get`` prints ages."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def _ref(obj: Mapping[str, Any]) -> str:
    view = ObjectView(obj)
    return f"{view.kind or 'object'} {view.namespace}/{view.name}"


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:MAX_LISTED])
    return shown + (f" and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else "")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _job_of(runner: EphemeralRunnerView) -> str:
    """The job's request ID (the number GitHub's UI and ARC's logs show), else its job ID."""
    return str(runner.job_request_id) if runner.job_request_id else runner.job_id or "?"


def _oldest(objects: Sequence[Mapping[str, Any]], now: dt.datetime) -> dt.timedelta:
    times = [t for o in objects if (t := ObjectView(o).creation_timestamp) is not None]
    return now - min(times) if times else dt.timedelta(0)


def _live_runners(snapshot: Snapshot) -> list[EphemeralRunnerView]:
    return [EphemeralRunnerView(r) for r in snapshot.runners if not ObjectView(r).is_deleting]


# -- the scale set's own conditions ----------------------------------------------------------------------


def scale_set_conditions(snapshot: Snapshot) -> list[Finding]:
    """The controller's verdict on the scale set: ``Degraded`` true (or, before any EphemeralRunnerSet exists,
    ``Ready`` false with a reason other than progress), credentials named with their Secret."""
    ars = ObjectView(snapshot.scale_set)
    conditions = ars.status.get("conditions")
    degraded = get_condition(conditions, "Degraded")
    ready = get_condition(conditions, "Ready")
    has_runner_set = snapshot.current_runner_set is not None
    prefix = "scale set Degraded" if has_runner_set else "no EphemeralRunnerSet"
    problem = degraded if degraded and degraded.get("status") == "True" else None
    if problem is None and not has_runner_set and ready and ready.get("status") == "False":
        problem = ready
    if problem is None:
        if not has_runner_set and not ars.status:
            return [
                Finding(
                    "scale-set-conditions",
                    Severity.ERROR,
                    f"{prefix}: the scale set has no status (is the controller running, and does it watch "
                    f"namespace {ars.namespace}?)",
                    (_ref(snapshot.scale_set),),
                )
            ]
        return []
    reason, message = string(problem.get("reason")), redact(string(problem.get("message")))
    if reason == LISTENER_OFFLINE and listener(snapshot):
        return []  # the controller repeating the listener's outage: the listener rule says it, with its cause
    secret = f"{ars.namespace}/{string(ars.spec.get('githubConfigSecret'))}"
    vault = ars.spec.get("vaultConfig")
    if isinstance(vault, dict) and vault.get("type"):
        # githubConfigSecret then names a secret in the vault, not a Secret of the namespace.
        secret = f"{string(ars.spec.get('githubConfigSecret'))} in the vault"
    if reason in CREDENTIAL_REASONS:
        line = f"{prefix}: credentials rejected (Secret {secret}: {message})"
    elif reason == "SecretNotFound":
        line = f"{prefix}: credentials Secret {secret} not found ({message})"
    else:
        line = f"{prefix}: {reason} ({message})" if message else f"{prefix}: {reason}"
    return [Finding("scale-set-conditions", Severity.ERROR, line, (_ref(snapshot.scale_set),))]


# -- runners ------------------------------------------------------------------------------------------


def _pending_cause(snapshot: Snapshot, runner: EphemeralRunnerView) -> tuple[str, bool] | None:
    """(why the runner's pod does not run, whether that is certain to need action); ``None`` when it runs."""
    pod_obj = snapshot.pod_of(runner.raw)
    if pod_obj is None:
        return ("no pod yet", False)
    pod = PodView(pod_obj)
    if pod.phase not in ("", "Pending"):
        return None
    for condition in pod.conditions:
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return (f"pod unschedulable ({redact(string(condition.get('message')))})", True)
    for status in [*pod.init_container_statuses, *pod.container_statuses]:
        waiting = mapping(mapping(status).get("state")).get("waiting") if isinstance(status, Mapping) else None
        reason = string(mapping(waiting).get("reason"))
        message = redact(string(mapping(waiting).get("message")))
        if reason in PULL_FAILURES:
            return (
                f"image cannot be pulled: {reason} ({message})" if message else f"image cannot be pulled: {reason}",
                True,
            )
        if reason in START_FAILURES:
            return (
                f"container cannot start: {reason} ({message})" if message else f"container cannot start: {reason}",
                True,
            )
    return ("pod Pending", False)


def pending_runners(snapshot: Snapshot) -> list[Finding]:
    """Runners not running, grouped by the reason their pod gives (unschedulable, image pull...)."""
    groups: dict[str, list[EphemeralRunnerView]] = collections.defaultdict(list)
    certain: dict[str, bool] = {}
    for runner in _live_runners(snapshot):
        if (runner.phase or EphemeralRunnerPhase.PENDING) != EphemeralRunnerPhase.PENDING:
            continue
        found = _pending_cause(snapshot, runner)
        if found is None:
            continue
        groups[found[0]].append(runner)
        certain[found[0]] = found[1]
    findings = []
    for why, runners in groups.items():
        age = _oldest([r.raw for r in runners], snapshot.taken_at)
        if not certain[why] and age < PENDING_GRACE:
            continue
        findings.append(
            Finding(
                "pending-runners",
                Severity.ERROR if certain[why] else Severity.WARNING,
                f"{_plural(len(runners), 'runner')} Pending for {format_age(age)}: {why}",
                tuple(_ref(r.raw) for r in runners),
            )
        )
    return findings


def failed_runners(snapshot: Snapshot) -> list[Finding]:
    """Runners the controller gave up on (``Failed``), grouped by reason."""
    groups: dict[tuple[str, str], list[EphemeralRunnerView]] = collections.defaultdict(list)
    for runner in _live_runners(snapshot):
        if runner.phase == EphemeralRunnerPhase.FAILED:
            groups[(runner.reason, redact(runner.message))].append(runner)
    return [
        Finding(
            "failed-runners",
            Severity.WARNING,
            f"{_plural(len(runners), 'runner')} Failed: {reason or 'no reason given'}"
            + (f" ({message})" if message else ""),
            tuple(_ref(r.raw) for r in runners),
        )
        for (reason, message), runners in groups.items()
    ]


# -- the listener -------------------------------------------------------------------------------------


def listener(snapshot: Snapshot) -> list[Finding]:
    """The listener: missing, its pod not running, no message session, failing polls, stopped; else its
    ``Ready`` condition when false."""
    state = snapshot.listener_state
    al = snapshot.listener
    now = snapshot.taken_at
    objects = tuple(_ref(o) for o in (al, snapshot.current_runner_set) if o is not None)
    if al is None:
        if snapshot.current_runner_set is None or any("AutoscalingListener" in note for note in snapshot.notes):
            return []  # the scale set's own condition says why; or listeners cannot be read by this user
        return [Finding("listener", Severity.ERROR, "no AutoscalingListener: nobody asks GitHub for jobs", objects)]
    if state is not None:
        age = format_age(now - state.since)
        error = SESSION_ERRORS.get(state.last_error_class, f"last error {state.last_error_class}")
        if state.state is ListenerPhase.WAITING_FOR_SESSION and (
            now - state.since >= LISTENER_GRACE or state.last_error_class
        ):
            detail = error if state.last_error_class else "creating one"
            return [Finding("listener", Severity.ERROR, f"listener has held no session for {age}: {detail}", objects)]
        if state.state is ListenerPhase.FAILING:
            return [Finding("listener", Severity.WARNING, f"listener's polls failing for {age}: {error}", objects)]
        if state.state is ListenerPhase.STOPPED and snapshot.listener_pod is None:
            detail = f": {error}" if state.last_error_class else ""
            return [Finding("listener", Severity.WARNING, f"listener stopped {age} ago{detail}", objects)]
    pod = snapshot.listener_pod
    if pod is not None and PodView(pod).phase != "Running":
        view = PodView(pod)
        pod_age = _oldest([pod], now)
        return [
            Finding(
                "listener",
                Severity.WARNING if pod_age < LISTENER_GRACE else Severity.ERROR,
                f"listener pod {view.phase or 'Pending'} for {format_age(pod_age)}"
                + (f": {view.reason} ({redact(view.message)})" if view.reason else ""),
                (*objects, _ref(pod)),
            )
        ]
    ready = get_condition(ObjectView(al).status.get("conditions"), "Ready")
    if ready is not None and ready.get("status") == "False":
        message = redact(string(ready.get("message")))
        return [
            Finding(
                "listener",
                Severity.WARNING,
                f"listener not Ready: {string(ready.get('reason'))}" + (f" ({message})" if message else ""),
                objects,
            )
        ]
    return []


# -- revisions and capacity ---------------------------------------------------------------------------


def revision_rollout(snapshot: Snapshot) -> list[Finding]:
    """A runner-spec revision on its way: not applied yet, or applied with busy runners of an older one."""
    current = snapshot.current_runner_set
    if current is None:
        return []
    ers = EphemeralRunnerSetView(current)
    desired = ers.actionable_revision
    older = [r for r in _live_runners(snapshot) if r.revision < desired and not r.is_done]
    busy = [r for r in older if r.has_job]
    by_revision = sorted({r.revision for r in busy})
    of_revision = "revision " + "/".join(str(r) for r in by_revision)
    jobs = _listed(sorted(_job_of(r) for r in busy))
    objects = (_ref(current), *(_ref(r.raw) for r in busy))
    if ers.revision_pending:
        # Busy runners do not hold ``applied`` back: the controller raises it once the old revision's idle runners
        # are removed (docs/revisions.md), so the line says both facts without making one the cause of the other.
        if busy:
            line = (
                f"revision {desired} not applied yet (applied: {ers.applied_actionable_revision}); "
                f"{_plural(len(busy), 'busy runner')} of {of_revision} "
                f"{'is' if len(busy) == 1 else 'are'} finishing jobs {jobs}"
            )
        else:
            line = (
                f"revision {desired} not applied yet (applied: {ers.applied_actionable_revision}): "
                f"{_plural(len(older), 'runner')} of older revisions being replaced"
            )
        return [Finding("revision-rollout", Severity.INFO, line, objects)]
    if busy:
        line = (
            f"revision {desired} applied; {_plural(len(busy), 'busy runner')} of {of_revision} "
            f"{'is' if len(busy) == 1 else 'are'} finishing jobs {jobs}"
        )
        return [Finding("revision-rollout", Severity.INFO, line, objects)]
    return []


def at_max_runners(snapshot: Snapshot) -> list[Finding]:
    """The scale set is at ``maxRunners`` and every runner is busy: further jobs wait in GitHub's queue."""
    current = snapshot.current_runner_set
    max_runners = ObjectView(snapshot.scale_set).spec.get("maxRunners")
    if current is None or not isinstance(max_runners, int) or isinstance(max_runners, bool):
        return []
    ers = EphemeralRunnerSetView(current)
    busy = [r for r in _live_runners(snapshot) if r.has_job and not r.is_done]
    if ers.replicas < max_runners or len(busy) < max_runners:
        return []
    jobs = _listed(sorted(_job_of(r) for r in busy))
    return [
        Finding(
            "at-max-runners",
            Severity.WARNING,
            f"scale set at maxRunners ({max_runners}) with all {len(busy)} runners busy (jobs {jobs}): further jobs"
            f" wait in GitHub's queue (listener asks for {ers.replicas})",
            (_ref(snapshot.scale_set), _ref(current)),
        )
    ]


def capacity_limited(snapshot: Snapshot) -> list[Finding]:
    """The cluster cannot give the scale set ``maxRunners`` runners now (``CapacityLimited`` on its runner set,
    docs/capacity.md): GitHub is told less, and offers further jobs to a sibling set or keeps them queued."""
    current = snapshot.current_runner_set
    if current is None:
        return []
    ers = EphemeralRunnerSetView(current)
    limited = get_condition(sequence(ers.status.get("conditions")), CONDITION_CAPACITY_LIMITED)
    advertised = ers.status.get("advertisedCapacity")
    if limited is None or limited.get("status") != "True" or not isinstance(advertised, int):
        return []
    max_runners = ObjectView(snapshot.scale_set).spec.get("maxRunners")
    below = f", not its maxRunners {max_runners}" if isinstance(max_runners, int) else ""
    why = f"{string(limited.get('reason'))}: {redact(string(limited.get('message')))}"
    return [
        Finding(
            "capacity-limited",
            Severity.WARNING,
            f"GitHub is told the scale set can run {advertised} runners now{below} ({why}): further jobs go to a"
            " sibling scale set with the same labels, or wait in GitHub's queue",
            (_ref(current),),
        )
    ]


def warm_capacity(snapshot: Snapshot) -> list[Finding]:
    """The warm pool the scale set belongs to, its size and why, and the placeholders runner pods took
    (docs/capacity.md, "Warm capacity"); a warning when it asks for warm capacity and gets none."""
    ars = ObjectView(snapshot.scale_set)
    condition = get_condition(ars.status.get("conditions"), CONDITION_WARM_CAPACITY)
    objects = (_ref(snapshot.scale_set),)
    if condition is None:
        if ars.spec.get("warmCapacity") is None:
            return []
        line = "warmCapacity asked for, but no warm pool reports on it: does the controller run with --warm-capacity?"
        return [Finding("warm-capacity", Severity.WARNING, line, objects)]
    reason, message = string(condition.get("reason")), redact(string(condition.get("message")))
    if condition.get("status") != "True":
        return [Finding("warm-capacity", Severity.WARNING, f"no warm placeholders ({reason}): {message}", objects)]
    preempted = [e for e in snapshot.events_newest_first() if e.reason == EVENT_WARM_PLACEHOLDER_PREEMPTED]
    took = ""
    if preempted and preempted[0].time is not None:
        times = sum(e.count for e in preempted)
        took = (
            f"; runner pods took placeholders' room ({_plural(times, 'Event')}, the last "
            f"{format_age(snapshot.taken_at - preempted[0].time)} ago), the placeholders wait for a node again"
        )
    return [Finding("warm-capacity", Severity.INFO, f"{message}{took}", objects)]


def outdated_runner_version(snapshot: Snapshot) -> list[Finding]:
    """GitHub refuses the runner version (exit code 7): the runner image must be updated."""
    current = snapshot.current_runner_set
    if current is None or EphemeralRunnerSetView(current).phase != "Outdated":
        return []
    return [
        Finding(
            "outdated-runner-version",
            Severity.ERROR,
            "runner version refused by GitHub: EphemeralRunnerSet Outdated (runners exit 7; update the runner image)",
            (_ref(current),),
        )
    ]


def job_wait(snapshot: Snapshot) -> list[Finding]:
    """Where the window's jobs waited most, at p95 ("jobs wait mostly for nodes: 38 s of 44 s at p95"), when
    that phase is at least :data:`JOB_WAIT_WORTH_SAYING`."""
    top = slowest_phase(job_rows(snapshot))
    if top is None or top.p95_seconds < JOB_WAIT_WORTH_SAYING:
        return []
    return [Finding("job_wait", Severity.INFO, top.line, (_ref(snapshot.scale_set),))]


RULES: Final[tuple[Rule, ...]] = (
    scale_set_conditions,
    listener,
    pending_runners,
    failed_runners,
    outdated_runner_version,
    capacity_limited,
    warm_capacity,
    at_max_runners,
    revision_rollout,
)
ADDENDA: Final[tuple[Rule, ...]] = (job_wait,)
"""Rules whose findings follow the others and never stand in for "no problem found": where jobs wait is worth
knowing on a healthy scale set too."""


def explain(snapshot: Snapshot, rules: Sequence[Rule] = RULES, addenda: Sequence[Rule] = ADDENDA) -> list[Finding]:
    """Every finding of every rule, in rule order (one ``healthy`` finding when none has anything to say), then
    those of the ``addenda``."""
    findings = [finding for rule in rules for finding in rule(snapshot)] or [_healthy(snapshot)]
    return findings + [finding for rule in addenda for finding in rule(snapshot)]


def _healthy(snapshot: Snapshot) -> Finding:
    runners = _live_runners(snapshot)
    busy = sum(1 for r in runners if r.has_job and not r.is_done)
    state = snapshot.listener_state
    session = f"listener {state.state.value} since {format_age(snapshot.taken_at - state.since)}" if state else ""
    current = snapshot.current_runner_set
    replicas = EphemeralRunnerSetView(current).replicas if current is not None else 0
    line = f"no problem found: {_plural(len(runners), 'runner')} ({busy} busy), {replicas} desired" + (
        f", {session}" if session else ""
    )
    return Finding("healthy", Severity.INFO, line, (_ref(snapshot.scale_set),))
