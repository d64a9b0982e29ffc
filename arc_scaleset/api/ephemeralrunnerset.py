"""EphemeralRunnerSet: the pool of EphemeralRunners of one scale set, sized by the listener."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from arc_scaleset.api.common import (
    CONDITIONS_LIST_MARKERS,
    ApiModel,
    Condition,
    KubeObject,
    ResourceMeta,
    Timestamp,
)
from arc_scaleset.api.constants import EPHEMERAL_RUNNER_SETS as EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.ephemeralrunner import EphemeralRunnerSpec
from arc_scaleset.kube.resources import Resource


class EphemeralRunnerSetSpec(ApiModel):
    """How many runners, from which spec, at which revision."""

    replicas: int = 0
    """Desired number of runners, written by the listener."""
    patch_id: int
    """ID of the listener patch that set replicas; 0 means "idle at minRunners"."""
    ephemeral_runner_spec: EphemeralRunnerSpec
    """The spec every new EphemeralRunner gets."""
    ephemeral_runner_metadata: ResourceMeta | None = None
    """Extra labels and annotations for EphemeralRunners created after a change."""
    actionable_revision: int = 0
    """Revision of ephemeralRunnerSpec; bumped by the AutoscalingRunnerSet controller when it changes."""


class RecentJob(ApiModel):
    """A job a runner of the set finished, kept after the runner is gone (docs/observability.md). Not in ARC."""

    runner: str
    """The EphemeralRunner that ran it (deleted since)."""
    job_id: str = ""
    repository: str = ""
    """owner/repo, as the listener learned it."""
    job: str = ""
    """The job's display name."""
    timeline: dict[str, Timestamp] | None = None
    """The job's milestones, as the runner's ``status.jobTimeline`` held them when it finished."""


class EphemeralRunnerSetStatus(ApiModel):
    """Which revision the runner set has applied, its phase, and its runners by state.

    The runner counts are ARC's fields (``kubectl get`` shows them), derived from the runners on every pass;
    a change of the counts alone is written at most every two seconds.
    """

    phase: str = ""
    """Running, or Outdated when a runner of the current revision reported an outdated runner version."""
    applied_actionable_revision: int = 0
    """The spec.actionableRevision whose cleanup has been done: runners of older revisions are being replaced."""
    finished_runner_cleanup_patch_id: int = 0
    """The spec.patchID at which finished runners were last reaped; scale-up waits for the next patch."""
    conditions: list[Condition] | None = Field(default=None, json_schema_extra=CONDITIONS_LIST_MARKERS)
    """Ready / Progressing / Degraded, each with a reason and a message a person can act on."""
    current_replicas: int | None = None
    """Runners holding a slot: pending, running and failed ones (ARC's scaleTotal)."""
    pending_ephemeral_runners: int | None = None
    """Runners whose pod has not started its runner yet."""
    running_ephemeral_runners: int | None = None
    """Runners whose runner is running, idle or on a job."""
    failed_ephemeral_runners: int | None = None
    """Runners that failed (removed after a minute and replaced)."""
    finished_ephemeral_runners: int | None = None
    """Runners whose job finished, about to be removed."""
    deleting_ephemeral_runners: int | None = None
    """Runners being deleted (a busy one waits for its job to end)."""
    advertised_capacity: int | None = Field(default=None, ge=0)
    """Runners the cluster can give this set now (its quota's room, its runners' nodes; not beyond maxRunners):
    what its listener tells the Actions service (docs/capacity.md). Not an ARC field."""
    recent_jobs: list[RecentJob] | None = None
    """The last finished jobs, newest first, bounded by count and age, with where their wait went
    (``arc-scaleset jobs``; docs/observability.md). Not an ARC field."""


class EphemeralRunnerSet(KubeObject):
    """The runners of one scale set."""

    KIND: ClassVar[str] = "EphemeralRunnerSet"
    RESOURCE: ClassVar[Resource] = EPHEMERAL_RUNNER_SETS

    spec: EphemeralRunnerSetSpec
    status: EphemeralRunnerSetStatus = Field(default_factory=EphemeralRunnerSetStatus)
