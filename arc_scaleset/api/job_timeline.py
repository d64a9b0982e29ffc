"""Where a job's wait went: its timeline's milestones and the phases between them (docs/observability.md).

A job's timeline is put together from what two processes already hold, with no new component:

- the listener writes the job's side on the runner's status, ``status.jobTimeline``, in the status patch it
  makes anyway when the runner starts the job: when GitHub queued it, when the scale set acquired it, when
  GitHub assigned it a runner (the times GitHub's JobStarted message carries), when the listener was first
  offered it and when it learned it started (:func:`listener_milestones`);
- the runner's pod tells the cluster's side: created, scheduled, its runner container running, ready (the
  runner online), finished (:func:`pod_milestones`).

:func:`phase_spans` divides the wait, from *queued* to *started* (or to now, for a job still waiting), into
:class:`Phase` s: each milestone in :data:`ORDER` ends the phase named after it, and a milestone that came
before the point the wait had reached (a warm runner's pod, created long before the job was queued) ends an
empty phase. So the phases always add up to the whole wait, and each second of it is told once. A missing
milestone hands its time to the next phase (:func:`wait_phases` sums them by phase). Everything here is pure.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.api.keys import RUNNER_CONTAINER_NAME
from arc_scaleset.kube.conditions import format_time, get_condition
from arc_scaleset.kube.views import ObjectView, parse_timestamp

__all__ = [
    "ORDER",
    "JobTimeline",
    "Milestone",
    "Phase",
    "PhaseSpan",
    "describe",
    "listener_milestones",
    "percentile",
    "phase_spans",
    "pod_milestones",
    "recorded_milestones",
    "slowest",
    "wait_phases",
]


class Milestone(enum.StrEnum):
    """A moment in a job's life; the values are the keys of ``status.jobTimeline``."""

    QUEUED = "queued"
    """GitHub queued the job (its ``queueTime``)."""
    OFFERED = "offered"
    """The listener was first offered the job (its JobAvailable message)."""
    ACQUIRED = "acquired"
    """The scale set acquired the job (GitHub's ``scaleSetAssignTime``)."""
    POD_CREATED = "podCreated"
    POD_SCHEDULED = "podScheduled"
    """The pod was bound to a node (its ``PodScheduled`` condition)."""
    POD_RUNNING = "podRunning"
    """The pod's runner container started."""
    RUNNER_ONLINE = "runnerOnline"
    """The pod became ready: the runner is up and connects to GitHub."""
    ASSIGNED = "assigned"
    """GitHub gave the job to a runner (``runnerAssignTime``)."""
    STARTED = "started"
    """The listener learned the job started (its JobStarted message)."""
    FINISHED = "finished"
    """The runner container ended."""


class Phase(enum.StrEnum):
    """The time before a milestone, named for what the job waited for; the values are metric label values."""

    OFFER = "offer"
    ACQUISITION = "acquisition"
    RUNNER_CREATION = "runner_creation"
    NODE = "node"
    POD_START = "pod_start"
    RUNNER_REGISTRATION = "runner_registration"
    ASSIGNMENT = "assignment"
    JOB_START = "job_start"

    @property
    def description(self) -> str:
        """What the job waited for, to follow a duration ("41 s waiting for a node")."""
        return _DESCRIPTIONS[self]


_DESCRIPTIONS: Final = {
    Phase.OFFER: "for GitHub to offer it to the scale set",
    Phase.ACQUISITION: "for the scale set to acquire it",
    Phase.RUNNER_CREATION: "for the controller to create a runner",
    Phase.NODE: "waiting for a node",
    Phase.POD_START: "for the pod to start (image pull, volumes)",
    Phase.RUNNER_REGISTRATION: "for the runner to register",
    Phase.ASSIGNMENT: "for GitHub to assign it a runner",
    Phase.JOB_START: "for the job to start on its runner",
}

ORDER: Final[tuple[tuple[Milestone, Phase], ...]] = (
    (Milestone.OFFERED, Phase.OFFER),
    (Milestone.ACQUIRED, Phase.ACQUISITION),
    (Milestone.POD_CREATED, Phase.RUNNER_CREATION),
    (Milestone.POD_SCHEDULED, Phase.NODE),
    (Milestone.POD_RUNNING, Phase.POD_START),
    (Milestone.RUNNER_ONLINE, Phase.RUNNER_REGISTRATION),
    (Milestone.ASSIGNED, Phase.ASSIGNMENT),
    (Milestone.STARTED, Phase.JOB_START),
)
"""Each milestone after *queued*, in the order a job that waits for a new runner meets them, and the phase it
ends."""


@dataclass(frozen=True, slots=True)
class JobTimeline:
    """One job's milestones (UTC) and what it is: the runner that took it and the job's identity."""

    runner: str
    job_id: str
    repository: str
    job: str
    milestones: Mapping[Milestone, dt.datetime]

    def wait_phases(self, *, now: dt.datetime | None = None) -> dict[Phase, float]:
        """:func:`wait_phases` of this timeline."""
        return wait_phases(self.milestones, now=now)

    @property
    def run_seconds(self) -> float | None:
        """Seconds from *started* to *finished*; ``None`` until both are known."""
        started, finished = self.milestones.get(Milestone.STARTED), self.milestones.get(Milestone.FINISHED)
        return None if started is None or finished is None else max(0.0, (finished - started).total_seconds())

    @classmethod
    def of_runner(cls, er: Mapping[str, Any], pod: Mapping[str, Any] | None) -> JobTimeline | None:
        """The timeline of the job on runner ``er`` (and its ``pod``, when there is one); ``None`` while the
        runner has no job."""
        view = ObjectView(er)
        status = view.status
        recorded = status.get("jobTimeline")
        if not status.get("jobId") and not recorded:
            return None
        milestones = {**(pod_milestones(pod) if pod is not None else {}), **recorded_milestones(recorded)}
        return cls(
            runner=view.name,
            job_id=str(status.get("jobId") or ""),
            repository=str(status.get("jobRepositoryName") or ""),
            job=str(status.get("jobDisplayName") or ""),
            milestones=milestones,
        )


def recorded_milestones(recorded: object) -> dict[Milestone, dt.datetime]:
    """The milestones of a ``status.jobTimeline`` value; unknown keys and unreadable times are skipped."""
    if not isinstance(recorded, Mapping):
        return {}
    known = {m.value: m for m in Milestone}
    parsed = {known[key]: parse_timestamp(value) for key, value in recorded.items() if key in known}
    return {key: value for key, value in parsed.items() if value is not None}


def listener_milestones(
    *,
    queued: dt.datetime | None,
    offered: dt.datetime | None = None,
    acquired: dt.datetime | None,
    assigned: dt.datetime | None,
    started: dt.datetime,
) -> dict[str, str]:
    """The listener's part of ``status.jobTimeline``, as it writes it (times GitHub did not send are left out)."""
    times = {Milestone.QUEUED: queued, Milestone.OFFERED: offered, Milestone.ACQUIRED: acquired,
             Milestone.ASSIGNED: assigned, Milestone.STARTED: started}  # fmt: skip
    return {key.value: format_time(value) for key, value in times.items() if value is not None}


def pod_milestones(pod: Mapping[str, Any]) -> dict[Milestone, dt.datetime]:
    """The cluster's milestones of a runner pod, as far as it got."""
    view = ObjectView(pod)
    status = view.status
    conditions = status.get("conditions") or []
    found: dict[Milestone, dt.datetime | None] = {Milestone.POD_CREATED: view.creation_timestamp}
    for milestone, condition_type in ((Milestone.POD_SCHEDULED, "PodScheduled"), (Milestone.RUNNER_ONLINE, "Ready")):
        condition = get_condition(conditions, condition_type)
        if condition is not None and condition.get("status") == "True":
            found[milestone] = parse_timestamp(condition.get("lastTransitionTime"))
    state = _runner_container_state(status)
    found[Milestone.POD_RUNNING] = parse_timestamp((state.get("running") or state.get("terminated") or {}).get(
        "startedAt"))  # fmt: skip
    found[Milestone.FINISHED] = parse_timestamp((state.get("terminated") or {}).get("finishedAt"))
    return {key: value for key, value in found.items() if value is not None}


def _runner_container_state(status: Mapping[str, Any]) -> Mapping[str, Any]:
    for container in status.get("containerStatuses") or []:
        if isinstance(container, Mapping) and container.get("name") == RUNNER_CONTAINER_NAME:
            return container.get("state") or {}
    return {}


@dataclass(frozen=True, slots=True)
class PhaseSpan:
    """One stretch of a job's wait: ``phase``, from ``start`` to ``end`` (UTC)."""

    phase: Phase
    start: dt.datetime
    end: dt.datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


def phase_spans(milestones: Mapping[Milestone, dt.datetime], *, now: dt.datetime | None = None) -> list[PhaseSpan]:
    """The wait as consecutive stretches, in time order: the first starts at *queued*, each starts where the one
    before ended, the last ends at *started* (or at ``now`` for a job that has not started, in the phase it is in
    then). Phases that took no time are left out, and a phase appears at most once, except the phase of a job
    still waiting, whose time since its last milestone comes last. Without *queued*, or without *started* and
    ``now``, there is no wait: ``[]``.
    """
    queued = milestones.get(Milestone.QUEUED)
    end = milestones.get(Milestone.STARTED) or now
    if queued is None or end is None or end < queued:
        return []
    spans: list[PhaseSpan] = []
    reached = queued
    for milestone, phase in ORDER:
        moment = milestones.get(milestone)
        if moment is None:
            continue
        moment = min(max(moment, reached), end)
        if moment > reached:
            spans.append(PhaseSpan(phase, reached, moment))
            reached = moment
    if reached < end:
        # Not started yet: the time since the last milestone belongs to the phase after it.
        spans.append(PhaseSpan(_upcoming(milestones), reached, end))
    return spans


def wait_phases(milestones: Mapping[Milestone, dt.datetime], *, now: dt.datetime | None = None) -> dict[Phase, float]:
    """Seconds of the wait spent in each phase (phases that took no time are left out): :func:`phase_spans`
    summed by phase. The values add up to the whole wait; ``{}`` when there is none.
    """
    phases: dict[Phase, float] = {}
    for span in phase_spans(milestones, now=now):
        phases[span.phase] = phases.get(span.phase, 0.0) + span.seconds
    return phases


def _upcoming(milestones: Mapping[Milestone, dt.datetime]) -> Phase:
    """The phase a job that has not started is in: the one after the last milestone it reached."""
    reached = [index for index, (milestone, _) in enumerate(ORDER) if milestone in milestones]
    following = reached[-1] + 1 if reached else 0
    return ORDER[min(following, len(ORDER) - 1)][1]


def slowest(phases: Mapping[Phase, float]) -> tuple[Phase, float] | None:
    """The phase that took longest, ``None`` for an empty wait."""
    return max(phases.items(), key=lambda item: item[1], default=None)


def describe(phase: Phase, seconds: float) -> str:
    """``"41 s waiting for a node"``."""
    return f"{seconds:.0f} s {phase.description}"


def percentile(values: Iterable[float], fraction: float) -> float:
    """The nearest-rank percentile of ``values`` (0 for none); ``fraction`` in (0, 1]."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = math.ceil(round(fraction * len(ordered), 9))
    return ordered[min(max(rank, 1), len(ordered)) - 1]
