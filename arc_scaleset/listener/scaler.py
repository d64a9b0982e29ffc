"""The scaler's Kubernetes side (docs/listener.md): publish decisions to the EphemeralRunnerSet, job facts to runners.

:class:`Scaler` owns a :class:`~arc_scaleset.listener.desired_state.DesiredState` and writes two things:

- ``publish(assigned_jobs)``: the next decision as a JSON merge patch of the ERS,
  ``{"spec": {"patchID": <id>, "replicas": <target>}}``, where a target of 0 is sent as ``null`` (the
  field is removed and reads back as 0, exactly as ARC's ``omitempty`` serialisation does); a decision that
  would change nothing is not sent (:func:`~arc_scaleset.listener.publish_plan.plan_publish`: with a watch of
  the set, :mod:`.set_watch`, never; without one, until a refresh is due). The capacity the controller published
  (:mod:`.capacity`) comes from the watch, else from the set the API server answers a patch with;
- ``record_job_started(job)``: a merge patch of the ``status`` subresource of the EphemeralRunner that
  took the job, with only the non-empty job facts and the job's side of its timeline (``jobTimeline``). A
  runner that is already gone is not an error.

Errors other than a runner's NotFound propagate: the listener loop decides whether to retry.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from arc_scaleset.api.constants import EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS
from arc_scaleset.api.job_timeline import listener_milestones
from arc_scaleset.api.keys import ANNOTATION_LISTENER_CURSOR
from arc_scaleset.api.listener_cursor import ListenerCursor
from arc_scaleset.api.windows import Window
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.client import PatchType
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.resources import Resource
from arc_scaleset.listener.capacity import cluster_capacity
from arc_scaleset.listener.desired_state import DesiredState, ScaleDecision
from arc_scaleset.listener.publish_plan import SetContent, content_of, plan_publish, refresh_due
from arc_scaleset.listener.set_watch import set_content

log = logging.getLogger(__name__)


class ResourcePatcher(Protocol):
    """The one Kubernetes verb the scaler needs (satisfied by :class:`arc_scaleset.kube.client.KubeClient`)."""

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | list[Any],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
    ) -> dict[str, Any]: ...


class StartedJob(Protocol):
    """The JobStarted fields written to the runner's status."""

    @property
    def runner_name(self) -> str: ...
    @property
    def runner_request_id(self) -> int: ...
    @property
    def owner_name(self) -> str: ...
    @property
    def repository_name(self) -> str: ...
    @property
    def job_id(self) -> str: ...
    @property
    def workflow_run_id(self) -> int: ...
    @property
    def job_workflow_ref(self) -> str: ...
    @property
    def job_display_name(self) -> str: ...
    @property
    def queue_time(self) -> dt.datetime | None: ...
    @property
    def scale_set_assign_time(self) -> dt.datetime | None: ...
    @property
    def runner_assign_time(self) -> dt.datetime | None: ...


class SetObserver(Protocol):
    """What the scaler reads from a watch of its set (:class:`~arc_scaleset.listener.set_watch.SetWatch`)."""

    @property
    def live(self) -> bool: ...
    def content(self) -> SetContent | None: ...
    def capacity(self) -> int | None: ...


def ers_patch(decision: ScaleDecision) -> dict[str, Any]:
    """The ERS merge patch for ``decision``; ``replicas`` is ``None`` (removed) when the target is 0."""
    return {"spec": {"patchID": decision.patch_id, "replicas": decision.target or None}}


def runner_status_patch(
    job: StartedJob, *, started_at: dt.datetime, offered_at: dt.datetime | None = None
) -> dict[str, Any]:
    """The EphemeralRunner status merge patch for a started job: only the fields that carry a value, and the
    job's side of its timeline (``jobTimeline``: GitHub's times, ``offered_at`` and ``started_at``;
    :mod:`~arc_scaleset.api.job_timeline`)."""
    repository = f"{job.owner_name}/{job.repository_name}" if job.owner_name or job.repository_name else ""
    fields: dict[str, Any] = {
        "jobRequestId": job.runner_request_id,
        "jobRepositoryName": repository,
        "jobId": job.job_id,
        "workflowRunId": job.workflow_run_id,
        "jobWorkflowRef": job.job_workflow_ref,
        "jobDisplayName": job.job_display_name,
        "jobTimeline": listener_milestones(
            queued=job.queue_time,
            offered=offered_at,
            acquired=job.scale_set_assign_time,
            assigned=job.runner_assign_time,
            started=started_at,
        ),
    }
    return {"status": {key: value for key, value in fields.items() if value}}


class Scaler:
    """Publishes desired-state decisions for one EphemeralRunnerSet and records started jobs on its runners."""

    def __init__(
        self,
        kube: ResourcePatcher,
        *,
        namespace: str,
        ephemeral_runner_set: str,
        min_runners: int,
        max_runners: int,
        schedule: Sequence[Window] = (),
        clock: Clock = REAL_CLOCK,
        watch: SetObserver | None = None,
    ) -> None:
        self._kube = kube
        self._clock = clock
        self._watch = watch
        self._landed: SetContent | None = None  # what the set carried after the last patch that landed
        self._landed_at = 0.0  # when it landed, on the clock's monotonic time
        self._patched_capacity: int | None = None
        self.skipped = 0
        """Decisions not sent because they would have changed nothing (docs/listener.md, "Only what changed")."""
        self.namespace = namespace
        self.ephemeral_runner_set = ephemeral_runner_set
        self.state = DesiredState(min_runners=min_runners, max_runners=max_runners, schedule=schedule)
        # The minimum of the last decision: minRunners, or more while a minRunnersSchedule window is open.
        self.min_runners = min_runners

    @property
    def cluster_capacity(self) -> int | None:
        """The set's ``status.advertisedCapacity`` (:mod:`.capacity`): as watched while the watch is live, else as
        the last patch returned it."""
        if self._watch is not None and self._watch.live:
            return self._watch.capacity()
        return self._patched_capacity

    def note_job_event(self) -> None:
        """A job started or completed: the next decision is not a "force state" one."""
        self.state.mark_dirty()

    async def publish(self, assigned_jobs: int, *, cursor: ListenerCursor | None = None) -> ScaleDecision:
        """Decide for ``assigned_jobs`` and patch the ERS; returns the decision, which is on the set when this
        returns (patched now, or already carried: a decision that would change nothing is not sent,
        :func:`~arc_scaleset.listener.publish_plan.plan_publish`). ``cursor``, when given, is recorded in the same
        patch (api/listener_cursor.py): the record names the last message whose decision reached the set.

        If the patch fails, the dirty flag the decision consumed is put back, so that a retry cannot turn
        into a "force state" patch the failed one would not have been.
        """
        was_dirty = self.state.dirty
        now = self._clock.now()
        decision = self.state.decide(assigned_jobs, now=now)
        self.min_runners = self.state.min_runners_at(now)
        annotation = cursor.to_annotation() if cursor is not None else None
        watched = self._watch.content() if self._watch is not None else None
        plan = plan_publish(
            content_of(decision, annotation), landed=self._landed, watched=watched, refresh_due=self._refresh_due()
        )
        if not plan.send:
            self.skipped += 1
            return decision
        patch = ers_patch(decision)
        if annotation is not None:
            patch["metadata"] = {"annotations": {ANNOTATION_LISTENER_CURSOR: annotation}}
        try:
            patched = await self._kube.patch(
                EPHEMERAL_RUNNER_SETS,
                self.ephemeral_runner_set,
                patch,
                namespace=self.namespace,
                patch_type=PatchType.MERGE,
            )
        except BaseException:
            if was_dirty:
                self.state.mark_dirty()
            raise
        self._landed, self._landed_at = set_content(patched), self._clock.monotonic()
        self._patched_capacity = cluster_capacity(patched)
        log.debug(
            "published desired runners",
            extra={
                "replicas": decision.target,
                "patch_id": decision.patch_id,
                "reason": plan.reason.value,
                "assigned_jobs": assigned_jobs,
                "min_runners": self.min_runners,
            },
        )
        return decision

    def _refresh_due(self) -> bool:
        """:func:`~arc_scaleset.listener.publish_plan.refresh_due` for the last patch that landed."""
        since_landed = self._clock.monotonic() - self._landed_at
        return refresh_due(
            since_landed=since_landed, capacity=self._patched_capacity, max_runners=self.state.max_runners
        )

    async def record_job_started(
        self, job: StartedJob, *, started_at: dt.datetime | None = None, offered_at: dt.datetime | None = None
    ) -> bool:
        """Write the job's facts to its runner's status; False when the runner no longer exists.
        ``started_at``: when the listener learned the job started (default: now); ``offered_at``: when it was
        first offered the job, if it remembers."""
        if not job.runner_name:
            return False
        try:
            await self._kube.patch(
                EPHEMERAL_RUNNERS,
                job.runner_name,
                runner_status_patch(job, started_at=started_at or self._clock.now(), offered_at=offered_at),
                namespace=self.namespace,
                patch_type=PatchType.MERGE,
                subresource="status",
            )
        except NotFound:
            log.info("runner of a started job is gone; nothing to record", extra={"runner": job.runner_name})
            return False
        return True
