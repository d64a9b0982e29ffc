"""A reproducible workload: N jobs arriving at R per second with durations drawn from [min, max].

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

    def __post_init__(self) -> None:
        if self.jobs < 0 or self.rate <= 0 or not 0 <= self.duration_min <= self.duration_max:
            raise ValueError("need jobs >= 0, rate > 0 and 0 <= duration_min <= duration_max")


@dataclass(frozen=True)
class PlannedJob:
    at: float  # seconds after the workload starts
    duration: float
    repository: str
    display_name: str


def plan(spec: WorkloadSpec) -> list[PlannedJob]:
    """The arrival schedule: exponential inter-arrival gaps, uniform durations, all from ``spec.seed``."""
    rng = random.Random(spec.seed)
    at = 0.0
    planned = []
    for index in range(spec.jobs):
        if index:
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
