"""The finished jobs a scale set keeps after their runners are gone: ``status.recentJobs`` on its
EphemeralRunnerSet, bounded by count and age (docs/observability.md, "Where a job's wait went").

A runner is deleted once its job is done, and the job's timeline (:mod:`.job_timeline`) would go with it. Two
writes the controllers make anyway carry it on, with no new component and no write of its own:

- the runner controller, when it writes a runner's ``Succeeded`` phase, adds the pod's milestones to the runner's
  ``status.jobTimeline`` in that same merge patch (:func:`timeline_completion`): the runner's record then holds
  the whole timeline, the listener's half and the cluster's, before the pod goes. *runnerOnline* is written
  earlier, with the runner's ``ready`` (:func:`runner_online`): a finished pod is no longer Ready, and its
  condition then says when it stopped being so;
- the EphemeralRunnerSet controller, in the status write that the runner's finish causes anyway (its runner
  counts change), moves the runner's record (:func:`finished_job`) into ``status.recentJobs``
  (:func:`merge_window`).

A record is ``{"runner", "jobId", "repository", "job", "timeline"}``: the runner's name, the job's identity as
the listener learned it, and the timeline's milestones as ``status.jobTimeline`` has them. The window is newest
first, one record per runner, at most :attr:`WindowBounds.max_jobs` records, none that finished more than
:attr:`WindowBounds.max_age` seconds ago. Everything here is pure.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

from arc_scaleset.api.job_timeline import JobTimeline, Milestone, pod_milestones, recorded_milestones
from arc_scaleset.api.keys import EphemeralRunnerPhase
from arc_scaleset.kube.conditions import format_time
from arc_scaleset.kube.views import ObjectView

__all__ = [
    "RECENT_JOBS",
    "WindowBounds",
    "finished_job",
    "merge_window",
    "runner_online",
    "timeline_completion",
    "window_timelines",
]

RECENT_JOBS: Final = "recentJobs"
"""The EphemeralRunnerSet status field that holds the window."""
DEFAULT_MAX_JOBS: Final = 50
DEFAULT_MAX_AGE: Final = 3600.0
_LISTENER_SIDE: Final = frozenset(
    m.value for m in (Milestone.QUEUED, Milestone.OFFERED, Milestone.ACQUIRED, Milestone.ASSIGNED, Milestone.STARTED)
)


@dataclass(frozen=True)
class WindowBounds:
    """How much of the past the window keeps: ``max_jobs`` records, none older than ``max_age`` seconds (counted
    from the job's end). A record is about 530 bytes of JSON: 50 add about 26 KB to the set."""

    max_jobs: int = DEFAULT_MAX_JOBS
    max_age: float = DEFAULT_MAX_AGE


def runner_online(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The status change recording when ``pod`` became Ready (the runner online), for the runner controller's
    write of ``ready``; ``{}`` while the pod is not Ready."""
    moment = pod_milestones(pod).get(Milestone.RUNNER_ONLINE)
    return {} if moment is None else {"jobTimeline": {Milestone.RUNNER_ONLINE.value: format_time(moment)}}


def timeline_completion(er: Mapping[str, Any], pod: Mapping[str, Any]) -> dict[str, Any]:
    """The status change that completes the job timeline of runner ``er`` with its ``pod``'s milestones, for the
    runner controller's ``Succeeded`` write (a merge patch: the keys written before stay); ``{}`` when the
    listener recorded no job on the runner (or is an older one): a pod's times alone are no job's."""
    if not _recorded_by_listener(ObjectView(er).status.get("jobTimeline")):
        return {}
    milestones = pod_milestones(pod)
    return {"jobTimeline": {milestone.value: format_time(moment) for milestone, moment in milestones.items()}}


def finished_job(er: Mapping[str, Any]) -> dict[str, Any] | None:
    """The record of the job runner ``er`` finished; ``None`` unless the runner is ``Succeeded`` and the listener
    recorded its job's timeline (a runner that never took a job, or an older listener's, has none to keep)."""
    view = ObjectView(er)
    status = view.status
    timeline = status.get("jobTimeline")
    if status.get("phase") != EphemeralRunnerPhase.SUCCEEDED or not _recorded_by_listener(timeline):
        return None
    return {
        "runner": view.name,
        "jobId": str(status.get("jobId") or ""),
        "repository": str(status.get("jobRepositoryName") or ""),
        "job": str(status.get("jobDisplayName") or ""),
        "timeline": {str(key): str(value) for key, value in timeline.items()},
    }


def merge_window(
    window: Iterable[Mapping[str, Any]],
    finished: Iterable[Mapping[str, Any]],
    *,
    now: dt.datetime,
    bounds: WindowBounds,
) -> list[dict[str, Any]]:
    """``window`` (newest first) with the ``finished`` records (oldest first) added: one record per runner (the
    last one given wins), none whose job ended more than ``bounds.max_age`` seconds before ``now`` or that has no
    readable time, newest first by when the job ended (jobs that ended in the same second: the one added later
    first), at most ``bounds.max_jobs``. Malformed entries of ``window`` (written by hand) are dropped."""
    by_runner: dict[str, dict[str, Any]] = {}
    for record in (*reversed(list(window)), *finished):
        if isinstance(record, Mapping) and isinstance(record.get("runner"), str) and record["runner"]:
            by_runner.pop(record["runner"], None)  # re-added at the end: a later record is the newer one
            by_runner[record["runner"]] = dict(record)
    oldest = now - dt.timedelta(seconds=bounds.max_age)
    dated = [(ended, record) for record in by_runner.values() if (ended := _ended(record)) is not None]
    kept = sorted((item for item in dated if item[0] >= oldest), key=lambda item: item[0])  # stable
    return [record for _, record in reversed(kept)][: max(bounds.max_jobs, 0)]


def window_timelines(window: object, *, now: dt.datetime, bounds: WindowBounds | None = None) -> list[JobTimeline]:
    """The timelines of a ``status.recentJobs`` value as read (anything else: none), without the records older
    than the window (a window is trimmed only when a job is added to it)."""
    if not isinstance(window, Sequence) or isinstance(window, str):
        return []
    records = merge_window(window, (), now=now, bounds=bounds or WindowBounds())
    return [
        JobTimeline(
            runner=record["runner"],
            job_id=str(record.get("jobId") or ""),
            repository=str(record.get("repository") or ""),
            job=str(record.get("job") or ""),
            milestones=recorded_milestones(record.get("timeline")),
        )
        for record in records
    ]


def _recorded_by_listener(timeline: object) -> TypeGuard[Mapping[str, Any]]:
    """Whether a ``status.jobTimeline`` value holds a listener's record of a job (not only the pod's times)."""
    return isinstance(timeline, Mapping) and not _LISTENER_SIDE.isdisjoint(timeline)


def _ended(record: Mapping[str, Any]) -> dt.datetime | None:
    """When the record's job ended: finished, else started, else queued (the latest time the record knows)."""
    milestones = recorded_milestones(record.get("timeline"))
    for milestone in (Milestone.FINISHED, Milestone.STARTED, Milestone.QUEUED):
        if milestone in milestones:
            return milestones[milestone]
    return None
