"""A reproducible workload: N jobs arriving at R per second with durations drawn from [min, max], optionally
with a burst: ``burst`` of those jobs arriving at the same instant (jobs that come faster than runners start).

:func:`plan` is pure (same seed, same plan); :func:`run_workload` feeds a plan to anything with an
``enqueue_job``-shaped coroutine, so it drives an in-process sim or a separate one through its admin API.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from arc_scaleset.clock import REAL_CLOCK, Clock


@dataclass(frozen=True)
class WorkloadSpec:
    jobs: int = 20
    rate: float = 1.0  # mean arrivals per second (Poisson process)
    duration_min: float = 5.0
    duration_max: float = 30.0
    seed: int = 0
    labels: tuple[str, ...] = ("arc-runners",)
    repositories: tuple[str, ...] = ("org/repo",)
    # ``burst`` of the ``jobs`` arrive together, right after the first ``burst_after`` jobs; 0 plans what a
    # spec without a burst always planned (same seed, same plan).
    burst: int = 0
    burst_after: int = 0

    def __post_init__(self) -> None:
        if self.jobs < 0 or self.rate <= 0 or not 0 <= self.duration_min <= self.duration_max:
            raise ValueError("need jobs >= 0, rate > 0 and 0 <= duration_min <= duration_max")
        if not 0 <= self.burst <= self.jobs or not 0 <= self.burst_after <= self.jobs - self.burst:
            raise ValueError("need 0 <= burst <= jobs and 0 <= burst_after <= jobs - burst")


@dataclass(frozen=True)
class PlannedJob:
    at: float  # seconds after the workload starts
    duration: float
    repository: str
    display_name: str


def plan(spec: WorkloadSpec) -> list[PlannedJob]:
    """The arrival schedule: exponential inter-arrival gaps, uniform durations, all from ``spec.seed``.

    The jobs of a burst share one arrival time (the gap before the burst is drawn as before any job), so
    exactly ``spec.burst`` jobs arrive at that instant.
    """
    rng = random.Random(spec.seed)
    at = 0.0
    planned = []
    burst = range(spec.burst_after + 1, spec.burst_after + spec.burst)  # burst jobs after the burst's first
    for index in range(spec.jobs):
        if index and index not in burst:
            at += rng.expovariate(spec.rate)
        duration = round(rng.uniform(spec.duration_min, spec.duration_max), 3)
        planned.append(PlannedJob(at, duration, rng.choice(spec.repositories), f"workload-job-{index + 1}"))
    return planned


Enqueue = Callable[[Sequence[str], str, float, str], Awaitable[int]]
"""(labels, repository, duration, display_name) -> job id."""


async def run_workload(
    spec: WorkloadSpec,
    enqueue: Enqueue,
    *,
    clock: Clock = REAL_CLOCK,
    on_enqueued: Callable[[int, PlannedJob], None] | None = None,
) -> list[int]:
    """Enqueue every planned job at its time; returns the job ids in order."""
    start = clock.monotonic()
    ids = []
    for job in plan(spec):
        await clock.sleep(job.at - (clock.monotonic() - start))
        job_id = await enqueue(spec.labels, job.repository, job.duration, job.display_name)
        ids.append(job_id)
        if on_enqueued is not None:
            on_enqueued(job_id, job)
    return ids
