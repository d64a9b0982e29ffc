"""The demo's closing numbers, computed from plain data (the sim's job records, counts), so they are tested
without running anything."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from arc_scaleset_lab.demo.network import ProxyTraffic


def parse_time(text: str | None) -> dt.datetime | None:
    if not text or text.startswith("0001-"):
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` in [0, 1]) of ``values``; NaN when there are none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def queue_latencies(jobs: Sequence[Mapping[str, Any]]) -> list[float]:
    """Seconds from enqueue to start, for every job that started."""
    latencies = []
    for job in jobs:
        enqueued, started = parse_time(job.get("enqueuedAt")), parse_time(job.get("startedAt"))
        if enqueued is not None and started is not None:
            latencies.append((started - enqueued).total_seconds())
    return latencies


@dataclass(frozen=True)
class JobAudit:
    """Whether every job ran exactly once, and to success."""

    total: int
    completed: int
    succeeded: int
    never_ran: tuple[str, ...] = ()
    ran_more_than_once: tuple[str, ...] = ()
    not_completed: tuple[str, ...] = ()

    @property
    def exactly_once(self) -> bool:
        return self.total > 0 and not (self.never_ran or self.ran_more_than_once or self.not_completed)


def audit_jobs(jobs: Sequence[Mapping[str, Any]]) -> JobAudit:
    def name(job: Mapping[str, Any]) -> str:
        return str(job.get("displayName") or job.get("runnerRequestId"))

    return JobAudit(
        total=len(jobs),
        completed=sum(1 for j in jobs if j.get("state") == "completed"),
        succeeded=sum(1 for j in jobs if j.get("result") == "succeeded"),
        never_ran=tuple(name(j) for j in jobs if int(j.get("runCount") or 0) == 0),
        ran_more_than_once=tuple(name(j) for j in jobs if int(j.get("runCount") or 0) > 1),
        not_completed=tuple(name(j) for j in jobs if j.get("state") != "completed"),
    )


@dataclass(frozen=True)
class Summary:
    """The run's closing numbers. ``burst``: jobs of the workload that arrived at one instant; ``traffic``: what
    went through the proxy (``--proxy`` only); ``notes``: further lines (how the scale set reached GitHub)."""

    audit: JobAudit
    latencies: tuple[float, ...]
    runners_created: int
    runners_by_revision: Mapping[int, int]
    operator_writes: int
    writes_by_resource: Mapping[str, int]
    controller_writes: int | None
    elapsed: float
    settled: bool
    burst: int = 0
    traffic: ProxyTraffic | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """The demo's verdict: every job ran once, the set settled, and nothing bypassed a configured proxy."""
        return self.audit.exactly_once and self.settled and (self.traffic is None or self.traffic.all_through_proxy)

    @property
    def writes_per_runner(self) -> float:
        return self.operator_writes / self.runners_created if self.runners_created else math.nan

    def lines(self) -> list[str]:
        """The summary as text lines (what both the live and the plain output print at the end)."""
        audit = self.audit
        p50, p95 = percentile(self.latencies, 0.50), percentile(self.latencies, 0.95)
        worst = max(self.latencies, default=math.nan)
        revisions = ", ".join(f"revision {rev}: {count}" for rev, count in sorted(self.runners_by_revision.items()))
        lines = [
            f"jobs run:              {audit.completed}/{audit.total} completed, {audit.succeeded} succeeded",
            f"every job ran once:    {'yes' if audit.exactly_once else 'NO'}" + _problems(audit),
            f"queue-to-start:        p50 {p50:.1f}s  p95 {p95:.1f}s  max {worst:.1f}s"
            + (f"  (with a burst of {self.burst} jobs at once)" if self.burst else ""),
            f"runners created:       {self.runners_created}" + (f" ({revisions})" if revisions else ""),
            f"API writes per runner: {self.writes_per_runner:.1f} "
            f"({self.operator_writes} writes by the controller and listener: "
            + ", ".join(f"{k} {v}" for k, v in list(self.writes_by_resource.items())[:5])
            + ")",
        ]
        if self.controller_writes is not None and self.runners_created:
            lines.append(
                f"  controller alone:    {self.controller_writes / self.runners_created:.1f} per runner "
                f"({self.controller_writes} writes in its rest_client_requests_total, lease renewals included)"
            )
        lines.append(f"settled at minimum:    {'yes' if self.settled else 'NO'}  (run took {self.elapsed:.0f}s)")
        lines += list(self.notes)
        if self.traffic is not None:
            lines += self.traffic.lines()
        return lines


def _problems(audit: JobAudit) -> str:
    parts = []
    for label, names in (
        ("never ran", audit.never_ran),
        ("ran twice or more", audit.ran_more_than_once),
        ("not completed", audit.not_completed),
    ):
        if names:
            parts.append(f"{label}: {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}")
    return f"  ({'; '.join(parts)})" if parts else ""
