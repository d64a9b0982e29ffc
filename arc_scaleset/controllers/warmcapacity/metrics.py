"""The warm pools' metrics: ``gha_warm_placeholders``, ``gha_warm_pool_size``, ``gha_warm_placeholder_preemptions``.

Labelled by ``pool`` (the pool's ID, as on its placeholder pods' ``arc-scaleset.dev/warm-pool`` label). These are
the only series placeholders appear in: no ``gha_controller_*`` runner series counts them (they are no runners).
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge

PLACEHOLDERS: Final = "gha_warm_placeholders"
POOL_SIZE: Final = "gha_warm_pool_size"
PREEMPTIONS: Final = "gha_warm_placeholder_preemptions"
STATES: Final = ("ready", "waiting")


class WarmPoolMetrics:
    """The families, registered in ``registry``; with ``enabled=False`` nothing is recorded."""

    def __init__(self, registry: CollectorRegistry, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.placeholders = Gauge(
            PLACEHOLDERS,
            "Placeholder pods of a warm pool: ready (holding a node's room for a runner) or waiting (for a node)",
            ("pool", "state"),
            registry=registry,
        )
        self.pool_size = Gauge(
            POOL_SIZE,
            "Placeholders a warm pool keeps now; reason: Runners, Schedule, Forecast, PoolCapped or Idle",
            ("pool", "reason"),
            registry=registry,
        )
        self.preemptions = Counter(
            PREEMPTIONS,
            "Placeholder pods whose room runner pods took (preempted by the scheduler, or released for new runners)",
            ("pool",),
            registry=registry,
        )
        self._reasons: dict[str, str] = {}

    def observe(self, pool: str, *, size: int, reason: str, ready: int, waiting: int) -> None:
        if not self.enabled:
            return
        previous = self._reasons.get(pool)
        if previous is not None and previous != reason:
            self.pool_size.remove(pool, previous)
        self._reasons[pool] = reason
        self.pool_size.labels(pool=pool, reason=reason).set(size)
        self.placeholders.labels(pool=pool, state="ready").set(ready)
        self.placeholders.labels(pool=pool, state="waiting").set(waiting)

    def preempted(self, pool: str) -> None:
        if self.enabled:
            self.preemptions.labels(pool=pool).inc()

    def forget(self, pool: str) -> None:
        """A pool with no member and no placeholder has no series any more."""
        reason = self._reasons.pop(pool, None)
        if reason is not None:
            self.pool_size.remove(pool, reason)
            for state in STATES:
                self.placeholders.remove(pool, state)
