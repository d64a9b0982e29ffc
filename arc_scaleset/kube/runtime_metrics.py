"""Prometheus metrics of the controller runtime, under controller-runtime's names.

One :class:`RuntimeMetrics` owns the metric families in one (private, per-process) registry; the
workqueue, the controllers and leader election record into it. Dashboards written for
controller-runtime operators work unchanged: the names, label names and buckets are the same.

Everything that records metrics takes ``metrics: RuntimeMetrics | None``; ``None`` records nothing,
which is what unit tests use.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# controller-runtime's buckets: workqueue latencies span 10 ns .. 1000 s by powers of ten ...
_WORKQUEUE_BUCKETS = tuple(10e-9 * 10**i for i in range(12))
# ... and reconcile times are finer where most reconciles land (under a few seconds).
_RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0,
    40.0, 50.0, 60.0,
)  # fmt: skip
RECONCILE_RESULTS: Final = ("success", "error", "requeue_after")
"""The ``result`` label values of ``controller_runtime_reconcile_total`` this runtime produces (a reconcile asks
for a requeue only with a delay, so controller-runtime's ``requeue`` never occurs)."""


class RuntimeMetrics:
    """The runtime's metric families, registered once in ``registry``.

    A registry refuses duplicate names, so create exactly one of these per registry and share it.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        wq_labels = ("name", "controller")
        self.workqueue_depth = Gauge("workqueue_depth", "Current depth of workqueue", wq_labels, registry=r)
        self.workqueue_adds = Counter(
            "workqueue_adds_total", "Total number of adds handled by workqueue", wq_labels, registry=r
        )
        self.workqueue_queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            wq_labels,
            buckets=_WORKQUEUE_BUCKETS,
            registry=r,
        )
        self.workqueue_work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            wq_labels,
            buckets=_WORKQUEUE_BUCKETS,
            registry=r,
        )
        self.workqueue_retries = Counter(
            "workqueue_retries_total", "Total number of retries handled by workqueue", wq_labels, registry=r
        )

        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ("controller", "result"),
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ("controller",),
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ("controller",),
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ("controller",),
            registry=r,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ("controller",),
            registry=r,
        )
        self.leader_election_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.",
            ("name",),
            registry=r,
        )

    def start_controller(self, name: str, *, concurrency: int) -> None:
        """Make controller ``name``'s series exist from its start, as controller-runtime's ``initMetrics`` does:
        every reconcile result and the error count at 0, no active worker, its concurrency. ``rate()`` and
        ``increase()`` then count a controller's first error (a series' first sample is no increase), and a
        query for a healthy controller's errors returns 0 rather than nothing."""
        for result in RECONCILE_RESULTS:
            self.reconcile_total.labels(controller=name, result=result)
        self.reconcile_errors.labels(controller=name)
        self.active_workers.labels(controller=name).set(0)
        self.max_concurrent_reconciles.labels(controller=name).set(concurrency)
