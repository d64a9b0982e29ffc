"""What the demo's HTML report shows, as plain values, and how they are made from what the demo already reads.

- :class:`JobSpan`: one job's life from the simulated GitHub's record (enqueued, started, finished);
- :class:`JobWait`: one job's queue-to-start divided into phases, from its timeline (the listener's record on the
  runner joined with the runner's pod, :mod:`arc_scaleset.api.job_timeline`), kept after the runner is gone;
- :class:`Sample`: the scale set at one moment of the run (runners by phase and by revision, the listener);
- :class:`ReportData`: all of them, with times in seconds since the workload started.

Everything here is pure; :mod:`arc_scaleset_lab.demo.report_recorder` gathers the inputs while the demo runs and
:mod:`arc_scaleset_lab.demo.report_html` draws the result.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from arc_scaleset.api.job_timeline import JobTimeline, Milestone, Phase
from arc_scaleset.diagnose.jobs import JobRow
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.demo.summary import parse_time
from arc_scaleset_lab.harness.scale_sets import ScaleSetSnapshot


@dataclass(frozen=True)
class JobSpan:
    """A job's life in seconds since the workload started; ``None`` for what has not happened."""

    name: str
    enqueued: float | None
    started: float | None
    finished: float | None


@dataclass(frozen=True)
class JobWait:
    """A started job's wait: ``queued`` (seconds since the workload started) and its row as ``arc-scaleset jobs``
    shows it (its timeline and its seconds by phase)."""

    queued: float
    row: JobRow

    @property
    def name(self) -> str:
        return self.row.timeline.job or self.row.timeline.runner

    @property
    def phases(self) -> Mapping[Phase, float]:
        return self.row.phases

    @property
    def total(self) -> float:
        return self.row.wait


@dataclass(frozen=True)
class Sample:
    """The scale set at ``at`` seconds since the workload started (negative while it was getting ready)."""

    at: float
    runners_by_phase: Mapping[str, int]
    runners_by_revision: Mapping[int, int]
    session_owner: str | None
    listener_pod: str | None


@dataclass(frozen=True)
class ReportData:
    """Everything the report draws; ``started_at`` is the wall-clock moment the workload started (time 0)."""

    title: str
    started_at: dt.datetime
    jobs: tuple[JobSpan, ...] = ()
    waits: tuple[JobWait, ...] = ()
    samples: tuple[Sample, ...] = ()
    summary: tuple[str, ...] = ()
    events: tuple[tuple[float, str], ...] = field(default_factory=tuple)


def _since(moment: dt.datetime | None, start: dt.datetime) -> float | None:
    return None if moment is None else (moment - start).total_seconds()


def job_spans(jobs: Iterable[Mapping[str, Any]], start: dt.datetime) -> tuple[JobSpan, ...]:
    """The sim's job records (``GET /_sim/jobs``) as spans, in the order they were enqueued."""
    spans = [
        JobSpan(
            name=str(job.get("displayName") or job.get("runnerRequestId") or "?"),
            enqueued=_since(parse_time(job.get("enqueuedAt")), start),
            started=_since(parse_time(job.get("startedAt")), start),
            finished=_since(parse_time(job.get("finishedAt")), start),
        )
        for job in jobs
    ]
    return tuple(sorted(spans, key=lambda span: (span.enqueued is None, span.enqueued or 0.0, span.name)))


def job_waits(
    runners: Iterable[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], start: dt.datetime
) -> tuple[JobWait, ...]:
    """The wait of every job that started on one of ``runners`` (their last known state), joined with the runner's
    pod among ``pods`` (by owner), in the order the jobs were queued. A job without a recorded *queued* time has no
    wait to divide and is left out; one that started in the second it was queued (the milestones are whole
    seconds, as Kubernetes records times) is kept, with no phase."""
    waits = []
    for runner in runners:
        uid = ObjectView(runner).uid
        pod = next((p for p in pods if uid and ObjectView(p).is_owned_by(uid)), None)
        timeline = JobTimeline.of_runner(runner, pod)
        if timeline is None or Milestone.STARTED not in timeline.milestones:
            continue
        queued = _since(timeline.milestones.get(Milestone.QUEUED), start)
        if queued is None:
            continue
        waits.append(JobWait(queued, JobRow(timeline, timeline.wait_phases(), started=True)))
    return tuple(sorted(waits, key=lambda wait: (wait.queued, wait.name)))


def sample(at: float, snapshot: ScaleSetSnapshot) -> Sample:
    """The parts of a live-view snapshot the report draws."""
    return Sample(
        at=at,
        runners_by_phase=dict(snapshot.by_phase()),
        runners_by_revision=dict(snapshot.by_revision()),
        session_owner=snapshot.session_owner or None,
        listener_pod=snapshot.listener_pod_phase,
    )
