"""``arc-scaleset jobs``: a scale set's recent jobs and where their wait went (docs/observability.md).

A pure function of a :class:`~.snapshot.Snapshot`: each runner with a job gives one :class:`JobRow` (its
timeline joins the listener's record on the runner and the runner's pod, :mod:`arc_scaleset.api.job_timeline`),
and so does each finished job its runner set keeps after its runner was deleted (``status.recentJobs``, bounded by
count and age: :mod:`arc_scaleset.api.job_window`); :func:`slowest_phase` says which phase the jobs of the window
waited in most, at p95.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.api.job_timeline import JobTimeline, Milestone, Phase, describe, percentile, slowest
from arc_scaleset.api.job_window import RECENT_JOBS, window_timelines
from arc_scaleset.diagnose.printable import printable
from arc_scaleset.diagnose.snapshot import Snapshot

__all__ = ["JobRow", "SlowestPhase", "job_rows", "jobs_document", "render_jobs", "slowest_phase"]

P95: Final = 0.95
NOUNS: Final[Mapping[Phase, str]] = {
    Phase.OFFER: "GitHub to offer them to the scale set",
    Phase.ACQUISITION: "the scale set to acquire them",
    Phase.RUNNER_CREATION: "runners to be created",
    Phase.NODE: "nodes",
    Phase.POD_START: "pods to start",
    Phase.RUNNER_REGISTRATION: "runners to register",
    Phase.ASSIGNMENT: "GitHub to assign a runner",
    Phase.JOB_START: "jobs to start on their runners",
}
"""What jobs wait for, in "jobs wait mostly for ..."."""


@dataclass(frozen=True)
class JobRow:
    """One job of the window: its timeline and its wait by phase (so far, for a job still waiting)."""

    timeline: JobTimeline
    phases: Mapping[Phase, float]
    started: bool

    @property
    def wait(self) -> float:
        return sum(self.phases.values())

    @property
    def finished(self) -> bool:
        return Milestone.FINISHED in self.timeline.milestones

    def to_json(self) -> dict[str, Any]:
        top = slowest(self.phases)
        return {
            "runner": self.timeline.runner,
            "jobId": self.timeline.job_id,
            "repository": self.timeline.repository,
            "job": self.timeline.job,
            "started": self.started,
            "finished": self.finished,
            "waitSeconds": round(self.wait, 3),
            "runSeconds": None if self.timeline.run_seconds is None else round(self.timeline.run_seconds, 3),
            "phases": {phase.value: round(seconds, 3) for phase, seconds in self.phases.items()},
            "slowestPhase": top[0].value if top else None,
            "summary": describe(*top) if top else "",
        }


@dataclass(frozen=True)
class SlowestPhase:
    """The phase with the largest p95 over the window's jobs, against the p95 of their whole wait."""

    phase: Phase
    p95_seconds: float
    wait_p95_seconds: float
    jobs: int

    @property
    def line(self) -> str:
        return (f"jobs wait mostly for {NOUNS[self.phase]}: {self.p95_seconds:.0f} s of {self.wait_p95_seconds:.0f} s"
                f" at p95 ({self.jobs} {'job' if self.jobs == 1 else 'jobs'})")  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase.value, "p95Seconds": round(self.p95_seconds, 3),
                "waitP95Seconds": round(self.wait_p95_seconds, 3), "jobs": self.jobs, "line": self.line}  # fmt: skip


def job_rows(snapshot: Snapshot) -> list[JobRow]:
    """The jobs whose wait is known (the listener recorded when they were queued): those of the snapshot's
    runners, and the finished ones its runner sets keep whose runner is gone; longest wait first."""
    rows = []
    for timeline in _timelines(snapshot):
        phases = timeline.wait_phases(now=snapshot.taken_at)
        if phases:
            rows.append(JobRow(timeline, phases, started=Milestone.STARTED in timeline.milestones))
    return sorted(rows, key=lambda row: (-row.wait, row.timeline.runner))


def _timelines(snapshot: Snapshot) -> list[JobTimeline]:
    """The runners' timelines, then the runner sets' windows without the runners still held (a runner whose
    record was just kept is shown once, from the runner)."""
    live = [JobTimeline.of_runner(runner, snapshot.pod_of(runner)) for runner in snapshot.runners]
    timelines = [timeline for timeline in live if timeline is not None]
    held = {str((runner.get("metadata") or {}).get("name") or "") for runner in snapshot.runners}
    for runner_set in snapshot.runner_sets:
        window = (runner_set.get("status") or {}).get(RECENT_JOBS)
        timelines += [t for t in window_timelines(window, now=snapshot.taken_at) if t.runner not in held]
    return timelines


def slowest_phase(rows: Sequence[JobRow]) -> SlowestPhase | None:
    """Which phase the jobs of ``rows`` waited in most at p95; ``None`` without jobs or without any wait."""
    if not rows:
        return None
    by_phase = {phase: percentile((row.phases.get(phase, 0.0) for row in rows), P95) for phase in Phase}
    phase, seconds = max(by_phase.items(), key=lambda item: item[1])
    if seconds <= 0:
        return None
    return SlowestPhase(phase, seconds, percentile((row.wait for row in rows), P95), len(rows))


def jobs_document(snapshot: Snapshot) -> dict[str, Any]:
    """The ``-o json|yaml`` document of one scale set."""
    rows = job_rows(snapshot)
    top = slowest_phase(rows)
    return {
        "namespace": snapshot.namespace,
        "name": snapshot.name,
        "jobs": [row.to_json() for row in rows],
        "slowestPhase": top.to_json() if top else None,
    }


def render_jobs(snapshot: Snapshot) -> str:
    """The plain-text screen: one line per job (longest wait first), then the slowest phase of the window."""
    rows = job_rows(snapshot)
    lines = [f"{snapshot.namespace}/{snapshot.name}: {len(rows)} {'job' if len(rows) == 1 else 'jobs'}"]
    for row in rows:
        top = slowest(row.phases)
        state = ("done, started after" if row.finished else "started after") if row.started else "waiting for"
        what = f"{row.timeline.repository} {row.timeline.job}".strip() or row.timeline.job_id
        lines.append(printable(f"  {row.timeline.runner}  {what}: {state} {row.wait:.0f} s"
                               + (f", {describe(*top)}" if top else "")))  # fmt: skip
    top_phase = slowest_phase(rows)
    if top_phase is not None:
        lines.append(f"  {top_phase.line}")
    return "\n".join(lines)
