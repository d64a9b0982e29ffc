"""The controller's own metrics: ``gha_controller_*``, ARC's names and labels, plus transitions and revisions.

One :class:`ControllerMetrics` per registry (a registry refuses duplicate names). Every family carries the
labels ``name``, ``namespace``, ``repository``, ``organization``, ``enterprise``; :func:`scale_set_labels`
builds them from an object's labels (the URL labels the controller writes) so dashboards written for ARC
work unchanged. With ``enabled=False`` (``--metrics-addr=0``) the families exist but nothing is recorded.

Two kinds of series (docs/observability.md):

- *State* gauges (runners by phase, desired and applied revision) are computed at scrape time from the
  controller's caches (:func:`scale_set_states`, through :meth:`ControllerMetrics.observe_scale_sets`): they
  are what the cluster holds now, exact after a restart or a missed event, summed over every
  EphemeralRunnerSet of a scale set, and a scale set whose sets are gone has no series any more.
- *Transition* counters (runners created, succeeded, failed, deleted by reason) are counted where the
  controller makes the transition: ``succeeded`` is the number of jobs runners finished, which a gauge of
  Succeeded runners (deleted within a pass) can never show. A counter restarts at 0 with the process, as
  every Prometheus counter; ``increase()``/``rate()`` handle that.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from arc_scaleset.api.job_timeline import Phase
from arc_scaleset.api.keys import (
    LABEL_GITHUB_ENTERPRISE,
    LABEL_GITHUB_ORGANIZATION,
    LABEL_GITHUB_REPOSITORY,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
    EphemeralRunnerPhase,
)
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.controllers.runner_classification import RunnerView, classify

METRIC_LABELS = ("name", "namespace", "repository", "organization", "enterprise")
DELETED_REASON_LABEL: Final = "reason"

DESIRED_REVISION: Final = "gha_controller_desired_revision"
APPLIED_REVISION: Final = "gha_controller_applied_revision"
RUNNERS_CREATED: Final = "gha_controller_ephemeral_runners_created"
RUNNERS_SUCCEEDED: Final = "gha_controller_ephemeral_runners_succeeded"
RUNNERS_FAILED: Final = "gha_controller_ephemeral_runners_failed"
RUNNERS_DELETED: Final = "gha_controller_ephemeral_runners_deleted"
RUNNING_LISTENERS: Final = "gha_controller_running_listeners"
LISTENER_RESTARTS: Final = "gha_controller_listener_restarts"
JOB_WAIT_PHASE: Final = "gha_controller_job_wait_phase_seconds"
PHASE_LABEL: Final = "phase"
JOB_WAIT_BUCKETS: Final = (0.5, 1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 900, 1800, 3600)
"""Family names as declared; prometheus_client exposes a counter ``X`` as ``X_total`` (and ``X_created``)."""


class DeletedReason:
    """The ``reason`` of ``gha_controller_ephemeral_runners_deleted_total``: why the controller deleted a runner."""

    SUCCEEDED: Final = "succeeded"
    """Its job done (the runner's own controller, or the set reaping a Succeeded one)."""
    FAILED: Final = "failed"
    """Failed (pod could not start, too many pod failures) and reaped by its set."""
    OUTDATED: Final = "outdated"
    """GitHub refused its runner version."""
    SCALE_DOWN: Final = "scale_down"
    """Idle or pending, removed because the listener asked for fewer runners (or a newer set superseded it)."""
    REVISION: Final = "revision"
    """Idle or pending, removed because a new revision of the runner template was applied (docs/revisions.md)."""
    SET_DELETED: Final = "set_deleted"
    """Its EphemeralRunnerSet is being deleted."""
    POD_FAILED: Final = "pod_failed"
    """Its pod failed while running a job (the job is lost; it is not retried on another pod)."""
    LOST: Final = "lost"
    """Its pod vanished (a lost node)."""
    QUOTA: Final = "quota"
    """Its pod was refused by a ResourceQuota for 10 minutes."""
    NAME_TAKEN: Final = "name_taken"
    """A runner of the same name is registered in another scale set."""


DELETED_REASONS: Final = tuple(
    value for key, value in vars(DeletedReason).items() if key.isupper() and isinstance(value, str)
)


_COUNTED_DELETIONS_KEPT = 10_000


def deleted_reason_of_done(runner: RunnerView) -> str:
    """The deletion reason of a done runner the set deletes outright, from its phase."""
    if runner.phase == EphemeralRunnerPhase.SUCCEEDED:
        return DeletedReason.SUCCEEDED
    if runner.phase == EphemeralRunnerPhase.OUTDATED:
        return DeletedReason.OUTDATED
    return DeletedReason.FAILED


# Runner gauges by phase: the three ARC published from the ERS, plus the per-phase ones of ARC #4557.
_RUNNER_PHASE_HELP: Mapping[EphemeralRunnerPhase, str] = {
    EphemeralRunnerPhase.PENDING: "Number of ephemeral runners in a pending state.",
    EphemeralRunnerPhase.RUNNING: "Number of ephemeral runners in a running state.",
    EphemeralRunnerPhase.FAILED: "Number of ephemeral runners in a failed state.",
    EphemeralRunnerPhase.SUCCEEDED: "Number of ephemeral runners in a succeeded state.",
    EphemeralRunnerPhase.OUTDATED: "Number of ephemeral runners in an outdated state.",
}


def scale_set_labels(name: str, namespace: str, object_labels: Mapping[str, str] | None) -> dict[str, str]:
    """The metric labels of a scale set's object: its name/namespace and the URL labels it carries."""
    labels = object_labels or {}
    return {
        "name": name,
        "namespace": namespace,
        "repository": labels.get(LABEL_GITHUB_REPOSITORY, ""),
        "organization": labels.get(LABEL_GITHUB_ORGANIZATION, ""),
        "enterprise": labels.get(LABEL_GITHUB_ENTERPRISE, ""),
    }


def runner_set_labels(runner_set: Mapping[str, Any]) -> dict[str, str]:
    """The metric labels of the scale set an EphemeralRunnerSet (or one of its runners, which carry the same
    labels) belongs to: the ``scale-set-name``/``-namespace`` labels, else the object's own name/namespace."""
    view = EphemeralRunnerSetView(runner_set)
    labels = view.labels
    return scale_set_labels(
        labels.get(LABEL_SCALE_SET_NAME) or view.name,
        labels.get(LABEL_SCALE_SET_NAMESPACE) or view.namespace,
        labels,
    )


@dataclass
class ScaleSetState:
    """What the state gauges of one scale set show: its runners by phase (deleting ones in none) over all its
    sets, and the revision its current set wants (``desired``) and has applied."""

    labels: dict[str, str]
    runners: dict[EphemeralRunnerPhase, int] = field(default_factory=lambda: dict.fromkeys(_RUNNER_PHASE_HELP, 0))
    desired_revision: int = 0
    applied_revision: int = 0


def scale_set_states(
    runner_sets: Iterable[Mapping[str, Any]], runners_of: Callable[[Mapping[str, Any]], Iterable[RunnerView]]
) -> list[ScaleSetState]:
    """One :class:`ScaleSetState` per scale set among ``runner_sets`` (grouped by :func:`runner_set_labels`).

    Each set's runners (``runners_of``) are classified against its own applied revision: ``outdated`` counts
    the Outdated ones of any revision, ``succeeded`` the Succeeded ones not yet deleted. The revisions are the
    highest over the scale set's sets that are not being deleted (a draining, superseded set is behind).
    """
    states: dict[tuple[str, ...], ScaleSetState] = {}
    for runner_set in runner_sets:
        labels = runner_set_labels(runner_set)
        state = states.setdefault(tuple(labels[key] for key in METRIC_LABELS), ScaleSetState(labels=labels))
        view = EphemeralRunnerSetView(runner_set)
        runners = classify(runners_of(runner_set), applied_revision=view.applied_actionable_revision)
        for phase, members in (
            (EphemeralRunnerPhase.PENDING, runners.pending),
            (EphemeralRunnerPhase.RUNNING, runners.running),
            (EphemeralRunnerPhase.FAILED, runners.failed),
            (EphemeralRunnerPhase.SUCCEEDED, runners.finished),
            (EphemeralRunnerPhase.OUTDATED, [*runners.outdated, *runners.stale_outdated]),
        ):
            state.runners[phase] += len(members)
        if not view.is_deleting:
            state.desired_revision = max(state.desired_revision, view.actionable_revision)
            state.applied_revision = max(state.applied_revision, view.applied_actionable_revision)
    return list(states.values())


class _ScaleSetCollector(Collector):
    """The state gauges, computed from ``source`` on every scrape (the metrics server runs on the event loop
    that updates the caches, so a scrape sees one consistent cache)."""

    def __init__(self, source: Callable[[], Iterable[ScaleSetState]]) -> None:
        self._source = source

    def describe(self) -> Iterable[Any]:
        return list(self._families())

    def collect(self) -> Iterable[Any]:
        return list(self._families(self._source()))

    @staticmethod
    def _families(states: Iterable[ScaleSetState] = ()) -> Iterator[GaugeMetricFamily]:
        phases = {
            phase: GaugeMetricFamily(runner_gauge_name(phase), help_text, labels=METRIC_LABELS)
            for phase, help_text in _RUNNER_PHASE_HELP.items()
        }
        desired = GaugeMetricFamily(
            DESIRED_REVISION,
            "The runner template revision the scale set's EphemeralRunnerSet wants (spec.actionableRevision).",
            labels=METRIC_LABELS,
        )
        applied = GaugeMetricFamily(
            APPLIED_REVISION,
            "The revision the EphemeralRunnerSet has applied (status.appliedActionableRevision): behind desired "
            "while an update rolls out.",
            labels=METRIC_LABELS,
        )
        for state in states:
            values = [state.labels[key] for key in METRIC_LABELS]
            for phase, family in phases.items():
                family.add_metric(values, state.runners[phase])
            desired.add_metric(values, state.desired_revision)
            applied.add_metric(values, state.applied_revision)
        yield from phases.values()
        yield desired
        yield applied


def runner_gauge_name(phase: EphemeralRunnerPhase) -> str:
    """``gha_controller_<phase>_ephemeral_runners`` (ARC's names)."""
    return f"gha_controller_{phase.value.lower()}_ephemeral_runners"


class ControllerMetrics:
    """The ``gha_controller_*`` families in ``registry``.

    - runner gauges ``gha_controller_<phase>_ephemeral_runners`` (pending, running, failed, succeeded, outdated)
      and ``gha_controller_desired_revision`` / ``gha_controller_applied_revision``: state, per scale set,
      computed at scrape time once :meth:`observe_scale_sets` was given the source (the EphemeralRunnerSet
      controller gives it); name/namespace are the scale set's (ERS ``scale-set-name``/``-namespace`` labels).
    - counters ``gha_controller_ephemeral_runners_{created,succeeded,failed}_total`` and
      ``gha_controller_ephemeral_runners_deleted_total`` (with ``reason``, :class:`DeletedReason`): transitions
      the controller made, per scale set.
    - ``running_listeners``: ``gha_controller_running_listeners``, 1 while a listener container runs, 0
      otherwise; name/namespace are the AutoscalingListener's.
    - ``listener_restarts``: ``gha_controller_listener_restarts_total`` (beyond ARC): listener pods the
      controller recreated after a failure, eviction or node loss.
    - ``job_wait``: ``gha_controller_job_wait_phase_seconds{phase}`` (beyond ARC): where each started job's wait
      went, one observation per phase of :class:`~arc_scaleset.api.job_timeline.Phase` (0 for a phase it did not
      wait in), so every phase's quantiles are over the same jobs.
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, enabled: bool = True) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.enabled = enabled
        self._observing = False
        # Runners whose deletion was counted, oldest first (bounded: a runner is deleted within seconds).
        self._counted_deletions: OrderedDict[str, None] = OrderedDict()
        self.runners_created = Counter(
            RUNNERS_CREATED, "EphemeralRunners the controller created.", METRIC_LABELS, registry=self.registry
        )
        self.runners_succeeded = Counter(
            RUNNERS_SUCCEEDED,
            "EphemeralRunners that finished their job (runner exited 0): jobs completed.",
            METRIC_LABELS,
            registry=self.registry,
        )
        self.runners_failed = Counter(
            RUNNERS_FAILED,
            "EphemeralRunners marked Failed (pod could not start, or failed too often).",
            METRIC_LABELS,
            registry=self.registry,
        )
        self.runners_deleted = Counter(
            RUNNERS_DELETED,
            "EphemeralRunners the controller deleted, by reason.",
            (*METRIC_LABELS, DELETED_REASON_LABEL),
            registry=self.registry,
        )
        self.running_listeners = Gauge(
            RUNNING_LISTENERS, "Number of listeners in a running state.", METRIC_LABELS, registry=self.registry
        )
        self.listener_restarts = Counter(
            LISTENER_RESTARTS,
            "Listener pods recreated by the controller after a failure, an eviction or a lost node.",
            METRIC_LABELS,
            registry=self.registry,
        )
        self.job_wait = Histogram(
            JOB_WAIT_PHASE,
            "Seconds started jobs waited in each phase between queued and started (docs/observability.md).",
            (*METRIC_LABELS, PHASE_LABEL),
            buckets=JOB_WAIT_BUCKETS,
            registry=self.registry,
        )

    def observe_scale_sets(self, source: Callable[[], Iterable[ScaleSetState]]) -> None:
        """Publish the state gauges from ``source`` at every scrape (once per registry; a second call is
        ignored). Nothing is published when metrics are disabled."""
        if self.enabled and not self._observing:
            self._observing = True
            self.registry.register(_ScaleSetCollector(source))

    def start_scale_set(self, labels: Mapping[str, str]) -> None:
        """Make one scale set's transition counters exist at 0 (every deletion reason too), as controller-runtime
        starts its own: ``increase()`` then counts the scale set's first failure (a series' first sample is no
        increase), and a healthy scale set's failure rate is 0 rather than no series. Idempotent; called on
        every pass over a set that is not being deleted."""
        if not self.enabled:
            return
        for family in (self.runners_created, self.runners_succeeded, self.runners_failed):
            family.labels(**labels)
        for reason in DELETED_REASONS:
            self.runners_deleted.labels(**labels, **{DELETED_REASON_LABEL: reason})

    def count_created(self, labels: Mapping[str, str], count: int = 1) -> None:
        if self.enabled and count > 0:
            self.runners_created.labels(**labels).inc(count)

    def count_done(self, phase: str, labels: Mapping[str, str]) -> None:
        """A runner's phase was written as ``phase``: counted when that is Succeeded or Failed."""
        if not self.enabled:
            return
        if phase == EphemeralRunnerPhase.SUCCEEDED:
            self.runners_succeeded.labels(**labels).inc()
        elif phase == EphemeralRunnerPhase.FAILED:
            self.runners_failed.labels(**labels).inc()

    def count_deleted(self, labels: Mapping[str, str], reason: str, *, runner: str = "") -> None:
        """Count one deletion. ``runner`` (``namespace/name``) is counted once: the set and the runner's own
        controller may both delete a finished runner, and the first one to do so names the reason."""
        if not self.enabled:
            return
        if runner:
            if runner in self._counted_deletions:
                return
            self._counted_deletions[runner] = None
            if len(self._counted_deletions) > _COUNTED_DELETIONS_KEPT:
                self._counted_deletions.popitem(last=False)
        self.runners_deleted.labels(**labels, **{DELETED_REASON_LABEL: reason}).inc()

    def observe_job_wait(self, labels: Mapping[str, str], phases: Mapping[Phase, float]) -> None:
        """Observe one started job's wait, divided into ``phases`` (the caller observes each job once:
        ``controllers/ephemeralrunner/timeline.py``)."""
        if not self.enabled:
            return
        for phase in Phase:
            self.job_wait.labels(**labels, **{PHASE_LABEL: phase.value}).observe(phases.get(phase, 0.0))

    def set_listener_running(self, labels: Mapping[str, str], running: bool) -> None:
        """Set the listener's running gauge; its restart counter exists from then on (at 0 before a restart)."""
        if self.enabled:
            self.running_listeners.labels(**labels).set(1 if running else 0)
            self.listener_restarts.labels(**labels)

    def count_listener_restart(self, labels: Mapping[str, str]) -> None:
        if self.enabled:
            self.listener_restarts.labels(**labels).inc()

    def forget(self, labels: Mapping[str, str]) -> None:
        """Drop every pushed series of one scale set / listener (it was deleted); the state gauges need no
        forgetting: they show only the sets that exist."""
        values = tuple(labels[key] for key in METRIC_LABELS)
        for family in (
            self.runners_created,
            self.runners_succeeded,
            self.runners_failed,
            self.running_listeners,
            self.listener_restarts,
        ):
            with contextlib.suppress(KeyError):
                family.remove(*values)
        for reason in DELETED_REASONS:
            with contextlib.suppress(KeyError):
                self.runners_deleted.remove(*values, reason)
        for phase in Phase:
            with contextlib.suppress(KeyError):
                self.job_wait.remove(*values, phase.value)
