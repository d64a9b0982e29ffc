"""Sorting a scale set's EphemeralRunners into the states the EphemeralRunnerSet decides on (docs/revisions.md).

Pure data in, pure data out: :class:`RunnerView` is the handful of facts about one EphemeralRunner that the
decisions read, parsed once through :class:`~arc_scaleset.api.views.EphemeralRunnerView` (so tolerant of
anything a user or an older controller may have written) into a frozen snapshot the decisions can sort and
keep, and :func:`classify` sorts views by state *against the applied revision*:

- ``deleting``: a deletionTimestamp is set (whatever the phase; such a runner still holds its registration
  until its finalizer has run, so it counts toward the scale-up total);
- otherwise by ``status.phase``: ``Running`` -> running, ``Succeeded`` -> finished, ``Failed`` -> failed,
  ``Outdated`` -> ``outdated`` when the runner's revision (annotation ``actions.github.com/actionable-revision``,
  missing or unparsable = 0) is at least the applied revision, else ``stale_outdated``; anything else
  (``Pending``, empty, unknown) -> pending.

``latest_patch_id`` is the highest ``actions.github.com/patch-id`` over *all* runners, deleting ones included
(0 when none parses): the scaling gate (docs/listener.md) compares the ERS's ``spec.patchID`` with it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from arc_scaleset.api.keys import LABEL_RUNNER_INSTANCE, EphemeralRunnerPhase
from arc_scaleset.api.views import EphemeralRunnerView

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class RunnerView:
    """What the EphemeralRunnerSet's decisions need to know about one EphemeralRunner."""

    name: str
    namespace: str = ""
    uid: str = ""
    created: dt.datetime = _EPOCH
    deleting: bool = False
    phase: str = ""
    runner_id: int = 0
    job_id: str = ""
    patch_id: int = 0
    revision: int = 0
    job_request_id: int = 0
    instance: str = ""
    """The runner's ``runner.arc-scaleset.dev/instance`` label (``""``: none, e.g. a runner ARC created)."""

    @property
    def has_job(self) -> bool:
        """A job was assigned (``status.jobId`` set, or ``jobRequestId`` above 0 as ARC's listeners up to 0.12
        wrote it): such a runner is never removed while it is not done."""
        return self.job_id != "" or self.job_request_id > 0

    @property
    def is_done(self) -> bool:
        return self.phase in (
            EphemeralRunnerPhase.SUCCEEDED,
            EphemeralRunnerPhase.FAILED,
            EphemeralRunnerPhase.OUTDATED,
        )

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> RunnerView:
        """Read the view from an EphemeralRunner as the API (or a cache) has it."""
        er = EphemeralRunnerView(obj)
        return cls(
            name=er.name,
            namespace=er.namespace,
            uid=er.uid,
            created=er.creation_timestamp or _EPOCH,
            deleting=er.is_deleting,
            phase=er.phase,
            runner_id=er.runner_id,
            job_id=er.job_id,
            patch_id=er.patch_id,
            revision=er.revision,
            job_request_id=er.job_request_id,
            instance=er.label(LABEL_RUNNER_INSTANCE),
        )


def oldest_first(runners: Iterable[RunnerView]) -> list[RunnerView]:
    """By creation time, then name (a stable order for runners created in the same second)."""
    return sorted(runners, key=lambda runner: (runner.created, runner.name))


@dataclass(frozen=True)
class RunnerStates:
    """The runners of one set, by state (see the module docstring); each list oldest first."""

    applied_revision: int = 0
    pending: list[RunnerView] = field(default_factory=list)
    running: list[RunnerView] = field(default_factory=list)
    finished: list[RunnerView] = field(default_factory=list)
    failed: list[RunnerView] = field(default_factory=list)
    outdated: list[RunnerView] = field(default_factory=list)
    stale_outdated: list[RunnerView] = field(default_factory=list)
    deleting: list[RunnerView] = field(default_factory=list)
    latest_patch_id: int = 0

    @property
    def total(self) -> int:
        """pending + running + failed: the runners that count against ``replicas`` for scale-down (ARC's scaleTotal)."""
        return len(self.pending) + len(self.running) + len(self.failed)

    @property
    def scale_up_total(self) -> int:
        """``total`` + deleting: runners being deleted still hold a registration and a slot (docs/revisions.md)."""
        return self.total + len(self.deleting)

    @property
    def terminated(self) -> list[RunnerView]:
        """finished + failed + outdated + stale outdated: done runners, deleted without asking GitHub."""
        return [*self.finished, *self.failed, *self.outdated, *self.stale_outdated]

    @property
    def idle_or_pending(self) -> list[RunnerView]:
        """Pending and running runners without a job: what a cleanup removes (busy ones are kept).

        A *pending* runner can have a job too (the listener recorded the job before the pod status turned
        Running); it is busy like a running one.
        """
        return [runner for runner in (*self.pending, *self.running) if not runner.has_job]

    @property
    def busy(self) -> list[RunnerView]:
        """Pending or running runners with a job: never removed, they finish their job on their own spec."""
        return [runner for runner in (*self.pending, *self.running) if runner.has_job]

    def all(self) -> list[RunnerView]:
        return [*self.pending, *self.running, *self.terminated, *self.deleting]


def bucket_of(runner: RunnerView) -> str:
    """The :class:`RunnerStates` field ``runner`` belongs in, with every Outdated runner in ``outdated``:
    which of those are stale depends on the applied revision (:func:`classify` splits them)."""
    if runner.deleting:
        return "deleting"
    phase = runner.phase
    if phase == EphemeralRunnerPhase.RUNNING:
        return "running"
    if phase == EphemeralRunnerPhase.SUCCEEDED:
        return "finished"
    if phase == EphemeralRunnerPhase.FAILED:
        return "failed"
    if phase == EphemeralRunnerPhase.OUTDATED:
        return "outdated"
    return "pending"


def classify(runners: Iterable[RunnerView], *, applied_revision: int) -> RunnerStates:
    """Sort ``runners`` by state against ``applied_revision`` (see the module docstring)."""
    buckets: dict[str, list[RunnerView]] = {
        "pending": [],
        "running": [],
        "finished": [],
        "failed": [],
        "outdated": [],
        "stale_outdated": [],
        "deleting": [],
    }
    latest_patch_id = 0
    for runner in runners:
        latest_patch_id = max(latest_patch_id, runner.patch_id)
        bucket = bucket_of(runner)
        if bucket == "outdated" and runner.revision < applied_revision:
            bucket = "stale_outdated"
        buckets[bucket].append(runner)
    return RunnerStates(
        applied_revision=applied_revision,
        latest_patch_id=latest_patch_id,
        **{name: oldest_first(members) for name, members in buckets.items()},
    )
