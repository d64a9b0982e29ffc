"""The listener's Prometheus metrics: ARC's names and labels on a private registry (docs/listener.md).

Scale-set gauges carry ``enterprise``, ``organization``, ``repository`` (from the config URL), ``name`` and
``namespace`` (the EphemeralRunnerSet's). Job metrics carry ``enterprise`` (from the URL) and the job's
own ``organization`` (owner), ``repository``, ``job_name``, ``job_workflow_ref``, ``job_workflow_name``,
``job_workflow_target``, ``event_name`` and, once completed, ``job_result``.

When the config has a ``metrics`` section (ARC's ``MetricsConfig``), exactly the metrics it lists are
registered, each with exactly the labels it lists; an unknown metric name is logged and skipped. Without
it, the default set below is registered.

Beyond ARC, the default set has what ARC's users asked for (ARC #3154, #4429):

- ``gha_available_jobs`` and ``gha_acquired_jobs``: the two queue statistics ARC does not export, so queue
  depth can be alerted on;
- ``gha_job_queue_duration_seconds``: how long a job waited from being queued (``queueTime``) until a
  runner was assigned to it (``runnerAssignTime``), observed on JobStarted: the queue-to-start latency.

Always registered, whatever the ``metrics`` section says (they are the listener's own health, not ARC's
metrics): ``gha_listener_skipped_messages_total{reason}``, the queue messages acknowledged and skipped
because they could not be read (docs/listener.md, "Poison messages"); ``gha_listener_active``, 1 when this
process is the scale set's active listener, 0 while a standby listener waits (docs/listener.md, "Standby
listener"): per scale set, the sum over its listener pods is 1.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from arc_scaleset.api.listener_metrics import CounterSpec, GaugeSpec, HistogramSpec, ListenerMetricsConfig
from arc_scaleset.listener.compact_metrics import LabelledCounter, LabelledHistogram

log = logging.getLogger(__name__)

DEFAULT_BUCKETS: tuple[float, ...] = (
    0.01, 0.05, 0.1, 0.5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 18, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100,
    110, 120, 150, 180, 210, 240, 300, 360, 420, 480, 540, 600, 900, 1200, 1800, 2400, 3000, 3600,
)  # fmt: skip

SCALE_SET_LABELS = ("enterprise", "organization", "repository", "name", "namespace")
STARTED_JOB_LABELS = ("enterprise", "organization", "repository", "job_name", "event_name")
COMPLETED_JOB_LABELS = (*STARTED_JOB_LABELS, "job_result")
KNOWN_LABELS = frozenset(
    {*SCALE_SET_LABELS, *COMPLETED_JOB_LABELS, "job_workflow_ref", "job_workflow_name", "job_workflow_target"}
)

ASSIGNED_JOBS = "gha_assigned_jobs"
RUNNING_JOBS = "gha_running_jobs"
REGISTERED_RUNNERS = "gha_registered_runners"
BUSY_RUNNERS = "gha_busy_runners"
IDLE_RUNNERS = "gha_idle_runners"
AVAILABLE_JOBS = "gha_available_jobs"
ACQUIRED_JOBS = "gha_acquired_jobs"
MIN_RUNNERS = "gha_min_runners"
MAX_RUNNERS = "gha_max_runners"
DESIRED_RUNNERS = "gha_desired_runners"
ADVERTISED_CAPACITY = "gha_advertised_capacity"
STARTED_JOBS = "gha_started_jobs_total"
COMPLETED_JOBS = "gha_completed_jobs_total"
JOB_STARTUP_DURATION = "gha_job_startup_duration_seconds"
JOB_EXECUTION_DURATION = "gha_job_execution_duration_seconds"
JOB_QUEUE_DURATION = "gha_job_queue_duration_seconds"
SKIPPED_MESSAGES = "gha_listener_skipped_messages_total"
LISTENER_ACTIVE = "gha_listener_active"

_HELP: dict[str, str] = {
    ASSIGNED_JOBS: "Number of jobs assigned to this scale set.",
    RUNNING_JOBS: "Number of jobs running (or about to be run).",
    REGISTERED_RUNNERS: "Number of runners registered by the scale set.",
    BUSY_RUNNERS: "Number of registered runners running a job.",
    IDLE_RUNNERS: "Number of registered runners not running a job.",
    AVAILABLE_JOBS: "Number of jobs available to this scale set and not yet acquired.",
    ACQUIRED_JOBS: "Number of jobs acquired by this scale set and not yet assigned to a runner.",
    MIN_RUNNERS: "Minimum number of runners.",
    MAX_RUNNERS: "Maximum number of runners.",
    DESIRED_RUNNERS: "Number of runners desired by the scale set.",
    ADVERTISED_CAPACITY: "Runners the scale set tells the Actions service it can take now (maxRunners, or less "
    "when the cluster cannot give more; docs/capacity.md).",
    STARTED_JOBS: "Total number of jobs started.",
    COMPLETED_JOBS: "Total number of jobs completed.",
    JOB_STARTUP_DURATION: "Time from the scale set being assigned a job to a runner being assigned it, in seconds.",
    JOB_EXECUTION_DURATION: "Time from a runner being assigned a job to the job finishing, in seconds.",
    JOB_QUEUE_DURATION: "Time from a job being queued to a runner being assigned it, in seconds.",
    SKIPPED_MESSAGES: "Queue messages acknowledged and skipped because they could not be read, by reason.",
    LISTENER_ACTIVE: "1 when this process is the scale set's active listener, 0 while it stands by.",
}

_DEFAULT_GAUGES = (
    ASSIGNED_JOBS,
    RUNNING_JOBS,
    REGISTERED_RUNNERS,
    BUSY_RUNNERS,
    IDLE_RUNNERS,
    AVAILABLE_JOBS,
    ACQUIRED_JOBS,
    MIN_RUNNERS,
    MAX_RUNNERS,
    DESIRED_RUNNERS,
    ADVERTISED_CAPACITY,
)
_KNOWN_COUNTERS = (STARTED_JOBS, COMPLETED_JOBS)
_KNOWN_HISTOGRAMS = (JOB_STARTUP_DURATION, JOB_EXECUTION_DURATION, JOB_QUEUE_DURATION)


def default_metrics_config() -> ListenerMetricsConfig:
    """The metric set registered when the config has no ``metrics`` section."""
    return ListenerMetricsConfig(
        gauges={name: GaugeSpec(labels=SCALE_SET_LABELS) for name in _DEFAULT_GAUGES},
        counters={
            STARTED_JOBS: CounterSpec(labels=STARTED_JOB_LABELS),
            COMPLETED_JOBS: CounterSpec(labels=COMPLETED_JOB_LABELS),
        },
        histograms={
            JOB_STARTUP_DURATION: HistogramSpec(labels=STARTED_JOB_LABELS),
            JOB_EXECUTION_DURATION: HistogramSpec(labels=COMPLETED_JOB_LABELS),
            JOB_QUEUE_DURATION: HistogramSpec(labels=STARTED_JOB_LABELS),
        },
    )


class Statistics(Protocol):
    """The service's scale-set statistics, as the GitHub client models them."""

    @property
    def total_available_jobs(self) -> int: ...
    @property
    def total_acquired_jobs(self) -> int: ...
    @property
    def total_assigned_jobs(self) -> int: ...
    @property
    def total_running_jobs(self) -> int: ...
    @property
    def total_registered_runners(self) -> int: ...
    @property
    def total_busy_runners(self) -> int: ...
    @property
    def total_idle_runners(self) -> int: ...


class JobFacts(Protocol):
    """The fields of a job message (JobStarted / JobCompleted) that metrics read."""

    @property
    def owner_name(self) -> str: ...
    @property
    def repository_name(self) -> str: ...
    @property
    def job_display_name(self) -> str: ...
    @property
    def job_workflow_ref(self) -> str: ...
    @property
    def event_name(self) -> str: ...
    @property
    def queue_time(self) -> dt.datetime | None: ...
    @property
    def scale_set_assign_time(self) -> dt.datetime | None: ...
    @property
    def runner_assign_time(self) -> dt.datetime | None: ...


class CompletedJobFacts(JobFacts, Protocol):
    @property
    def result(self) -> str: ...
    @property
    def finish_time(self) -> dt.datetime | None: ...


@dataclass(frozen=True)
class ScaleSetIdentity:
    """The label values that identify the scale set on every gauge."""

    enterprise: str
    organization: str
    repository: str
    name: str
    namespace: str

    def labels(self) -> dict[str, str]:
        return {
            "enterprise": self.enterprise,
            "organization": self.organization,
            "repository": self.repository,
            "name": self.name,
            "namespace": self.namespace,
        }


def _split_workflow_ref(workflow_ref: str) -> tuple[str, str] | None:
    """``(path, ref)`` of ``path@ref``; ``None`` unless there is exactly one ``@``, as in ARC's parser."""
    parts = workflow_ref.split("@")
    return (parts[0], parts[1]) if len(parts) == 2 else None


def workflow_name(workflow_ref: str) -> str:
    """``ci`` from ``owner/repo/.github/workflows/ci.yaml@refs/heads/main``: the file name without ``.yml``, then
    without ``.yaml`` (ARC's order); ``""`` when the ref is not ``path@ref``."""
    split = _split_workflow_ref(workflow_ref)
    if split is None:
        return ""
    file_name = _go_path_base(split[0])
    return file_name.removesuffix(".yml").removesuffix(".yaml")


def workflow_target(workflow_ref: str) -> str:
    """``heads/<branch>``, ``tags/<tag>`` or ``pull/<n>`` (from ``refs/pull/<n>/...``) from the ref after ``@``;
    ``""`` for anything else."""
    split = _split_workflow_ref(workflow_ref)
    if split is None:
        return ""
    ref = split[1]
    for prefix in ("refs/heads/", "refs/tags/"):
        if ref.startswith(prefix):
            return ref[len("refs/") :]
    if ref.startswith("refs/pull/"):
        number, slash, _ = ref[len("refs/pull/") :].partition("/")
        if slash and number:
            return f"pull/{number}"
    return ""


def _go_path_base(path: str) -> str:
    """Go's ``path.Base``: the last element after trailing slashes are removed; ``.`` for an empty path."""
    if not path:
        return "."
    trimmed = path.rstrip("/")
    return trimmed.rpartition("/")[2] if trimmed else "/"


def _whole_seconds_between(start: dt.datetime | None, end: dt.datetime | None) -> float | None:
    # ARC subtracts Unix seconds; a missing timestamp would make the difference meaningless, so skip it.
    if start is None or end is None:
        return None
    return float(int(end.timestamp()) - int(start.timestamp()))


class ListenerMetrics:
    """Every metric the listener exports, on its own registry (never the global one).

    The ``record_*`` methods are cheap and never raise: a metric that is not registered (because the
    config's ``metrics`` section leaves it out) is simply not recorded.
    """

    def __init__(
        self,
        *,
        scale_set: ScaleSetIdentity,
        config: ListenerMetricsConfig | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self._scale_set = scale_set
        self._gauges: dict[str, tuple[Gauge, tuple[str, ...]]] = {}
        # Job metrics are labelled per job name: compact series, since every distinct name stays for good.
        self._counters: dict[str, tuple[LabelledCounter, tuple[str, ...]]] = {}
        self._histograms: dict[str, tuple[LabelledHistogram, tuple[str, ...]]] = {}
        self._register(config if config is not None else default_metrics_config())
        self._skipped = Counter(SKIPPED_MESSAGES, _HELP[SKIPPED_MESSAGES], ("reason",), registry=self.registry)
        self._active = Gauge(LISTENER_ACTIVE, _HELP[LISTENER_ACTIVE], registry=self.registry)
        self._active.set(1)  # a listener without a standby is active from the start

    def _register(self, config: ListenerMetricsConfig) -> None:
        for name, gauge_spec in (config.gauges or {}).items():
            if name not in _DEFAULT_GAUGES:
                log.warning("skipping unknown gauge %r in the metrics config", name)
                continue
            labels = self._checked_labels(name, gauge_spec.labels)
            self._gauges[name] = (Gauge(name, _HELP[name], labels, registry=self.registry), labels)
        for name, counter_spec in (config.counters or {}).items():
            if name not in _KNOWN_COUNTERS:
                log.warning("skipping unknown counter %r in the metrics config", name)
                continue
            labels = self._checked_labels(name, counter_spec.labels)
            # The counter appends "_total" itself (as prometheus_client's does); ARC's names already carry it.
            self._counters[name] = (LabelledCounter(name, _HELP[name], labels, registry=self.registry), labels)
        for name, histogram_spec in (config.histograms or {}).items():
            if name not in _KNOWN_HISTOGRAMS:
                log.warning("skipping unknown histogram %r in the metrics config", name)
                continue
            labels = self._checked_labels(name, histogram_spec.labels)
            buckets = histogram_spec.buckets or DEFAULT_BUCKETS
            histogram = LabelledHistogram(name, _HELP[name], labels, buckets=buckets, registry=self.registry)
            self._histograms[name] = (histogram, labels)

    @staticmethod
    def _checked_labels(metric: str, labels: Sequence[str]) -> tuple[str, ...]:
        for label in labels:
            if label not in KNOWN_LABELS:
                # ARC fills a label it does not know with "", and so do we; say so once.
                log.warning("metric %r: unknown label %r will always be empty", metric, label)
        return tuple(dict.fromkeys(labels))

    @property
    def registered(self) -> set[str]:
        """The names of the metrics the config selected, as exported (ARC's names; the listener's own
        ``gha_listener_skipped_messages_total`` is always registered and not listed)."""
        return {*self._gauges, *self._counters, *self._histograms}

    def record_skipped_message(self, reason: str) -> None:
        """A queue message was acknowledged and skipped because it could not be read."""
        self._skipped.labels(reason).inc()

    def record_active(self, active: bool) -> None:
        """Whether this process is the active listener (a standby's is 0 until it takes over)."""
        self._active.set(1 if active else 0)

    # --- scale-set gauges -------------------------------------------------------------------------

    def _set_gauge(self, name: str, value: float) -> None:
        entry = self._gauges.get(name)
        if entry is None:
            return
        gauge, labels = entry
        values = self._scale_set.labels()
        gauge.labels(*(values.get(label, "") for label in labels)).set(value)

    def record_static(self, *, min_runners: int, max_runners: int) -> None:
        self._set_gauge(MIN_RUNNERS, min_runners)
        self._set_gauge(MAX_RUNNERS, max_runners)

    def record_statistics(self, statistics: Statistics) -> None:
        self._set_gauge(AVAILABLE_JOBS, statistics.total_available_jobs)
        self._set_gauge(ACQUIRED_JOBS, statistics.total_acquired_jobs)
        self._set_gauge(ASSIGNED_JOBS, statistics.total_assigned_jobs)
        self._set_gauge(RUNNING_JOBS, statistics.total_running_jobs)
        self._set_gauge(REGISTERED_RUNNERS, statistics.total_registered_runners)
        self._set_gauge(BUSY_RUNNERS, statistics.total_busy_runners)
        self._set_gauge(IDLE_RUNNERS, statistics.total_idle_runners)

    def record_desired_runners(self, count: int) -> None:
        self._set_gauge(DESIRED_RUNNERS, count)

    def record_advertised_capacity(self, capacity: int) -> None:
        """The ``X-ScaleSetMaxCapacity`` the listener sends with its polls (not an ARC metric)."""
        self._set_gauge(ADVERTISED_CAPACITY, capacity)

    # --- job metrics --------------------------------------------------------------------------------

    def _job_label_values(self, job: JobFacts, *, result: str = "") -> dict[str, str]:
        return {
            "enterprise": self._scale_set.enterprise,
            "organization": job.owner_name,
            "repository": job.repository_name,
            "job_name": job.job_display_name,
            "job_workflow_ref": job.job_workflow_ref,
            "job_workflow_name": workflow_name(job.job_workflow_ref),
            "job_workflow_target": workflow_target(job.job_workflow_ref),
            "event_name": job.event_name,
            "job_result": result,
            "name": self._scale_set.name,
            "namespace": self._scale_set.namespace,
        }

    def _inc(self, name: str, values: Mapping[str, str]) -> None:
        entry = self._counters.get(name)
        if entry is not None:
            counter, labels = entry
            counter.inc(tuple(values.get(label, "") for label in labels))

    def _observe(self, name: str, values: Mapping[str, str], seconds: float | None) -> None:
        entry = self._histograms.get(name)
        if entry is not None and seconds is not None:
            histogram, labels = entry
            histogram.observe(tuple(values.get(label, "") for label in labels), seconds)

    def record_job_started(self, job: JobFacts) -> None:
        values = self._job_label_values(job)
        self._inc(STARTED_JOBS, values)
        self._observe(
            JOB_STARTUP_DURATION, values, _whole_seconds_between(job.scale_set_assign_time, job.runner_assign_time)
        )
        self._observe(JOB_QUEUE_DURATION, values, _whole_seconds_between(job.queue_time, job.runner_assign_time))

    def record_job_completed(self, job: CompletedJobFacts) -> None:
        # ARC counts only jobs that reached a runner: a job cancelled while queued has no assign time.
        if job.runner_assign_time is None:
            return
        values = self._job_label_values(job, result=job.result)
        self._inc(COMPLETED_JOBS, values)
        self._observe(JOB_EXECUTION_DURATION, values, _whole_seconds_between(job.runner_assign_time, job.finish_time))
