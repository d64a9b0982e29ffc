"""The EphemeralRunnerSet's decisions as pure functions: which runners to delete, how many to create.

Given the set's spec and status, its runners sorted by :func:`~arc_scaleset.controllers.runner_classification.classify`
and the time, :func:`plan_scaling` returns one :class:`ScalingPlan`; the reconciler
(:mod:`arc_scaleset.controllers.ephemeralrunnerset.reconciler`) only carries it out. The rules, in the order they are
checked (docs/revisions.md, docs/listener.md):

1. **Outdated hold.** A runner of the current revision exited with "runner version deprecated" (phase
   ``Outdated``, revision >= applied): the set is ``Outdated``. Nothing is created; every other done runner is
   deleted and every idle or pending runner is removed from GitHub and deleted (busy ones finish their job).
   The current-revision Outdated runners are *kept*: they are the evidence the phase is derived from, so the
   phase needs no latch and is recomputed from the runners on every pass (both directions). They go when
   the spec changes (revision cleanup deletes every done runner) or when someone deletes them.
2. **Stale Outdated runners** (revision < applied): left over from an older spec; deleted, and replaced by
   normal scaling on a later pass. They never make the set Outdated.
3. **Failed runners never hold capacity forever** (beyond ARC: ARC #3685, #3700). A runner marked
   ``Failed`` (its pod can never start, or the API rejected its pod) has no job and its registration is
   already removed; it is deleted once it is ``failed_runner_min_age`` old (counted from its creation) and
   replaced by normal scaling. The age floor bounds the cost of a broken template to one new registration
   per slot per ``failed_runner_min_age``, instead of a hot loop of JIT configs against GitHub.
4. **The patch gate** (docs/listener.md): scaling is evaluated only when ``spec.patchID == 0`` or no runner carries
   ``spec.patchID`` yet (``patchID != latest_patch_id``).
5. **Finished runners** (Succeeded, not deleting) are reaped once per patch ID: record
   ``status.finishedRunnerCleanupPatchID = spec.patchID`` first, then delete them; no scaling this pass.
6. **Scale up** when ``scale_up_total`` (pending + running + failed + deleting) < replicas: create the
   difference. For ``patchID > 0`` the reconciler first checks the marker on a fresh read and creates
   nothing when it equals ``spec.patchID`` (the listener's decrement for the finished job is on its way).
   The reconciler creates them in growing batches (:func:`creation_batches`: 1, 2, 4, ... up to the
   create concurrency) and stops at the first batch with a failure, so an API server that refuses every
   runner (a quota, a webhook) costs one failed create per pass, not one per missing runner.
7. **Scale down** only for ``patchID == 0`` and ``total`` (pending + running + failed) > replicas: remove up
   to ``total - replicas`` idle runners, pending first, oldest first; never one with a job, never one
   without a runner ID (it may be registering this very moment).
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from arc_scaleset.api.keys import EphemeralRunnerSetPhase
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.controllers.runner_classification import RunnerStates, RunnerView

DEFAULT_FAILED_RUNNER_MIN_AGE = 60.0
"""Seconds a Failed runner is kept (from its creation) before it is reaped and its slot refilled."""
REASON_REPLICAS_ABOVE_CEILING: Final = "ReplicasAboveCeiling"


@dataclass(frozen=True)
class SetSpec:
    """The EphemeralRunnerSet fields the decisions read.

    ``max_replicas``: the controller's ceiling (``--max-runners-ceiling``); ``replicas`` above it count as
    ``max_replicas`` (``None``: no ceiling).
    """

    replicas: int
    patch_id: int
    actionable_revision: int = 0
    applied_revision: int = 0
    max_replicas: int | None = None

    @property
    def effective_replicas(self) -> int:
        """``replicas``, at most ``max_replicas``."""
        return self.replicas if self.max_replicas is None else min(self.replicas, self.max_replicas)


class Step(enum.StrEnum):
    """Which rule of the module docstring decided the pass (for logs and tests)."""

    OUTDATED_HOLD = "OutdatedHold"
    DELETE_STALE_OUTDATED = "DeleteStaleOutdated"
    REAP_FAILED = "ReapFailed"
    GATE_CLOSED = "GateClosed"
    REAP_FINISHED = "ReapFinished"
    SCALE_UP = "ScaleUp"
    SCALE_DOWN = "ScaleDown"
    STEADY = "Steady"


@dataclass(frozen=True)
class CleanupPlan:
    """Runners to delete outright (done ones) and runners to remove from GitHub first, then delete.

    ``remove`` is ordered by preference; at most ``remove_limit`` of them are removed (``None``: all). A
    removal that GitHub refuses because a job started meanwhile (JobStillRunning) is skipped and does not
    count; a runner with ``runner_id == 0`` has no registration to remove and is just deleted.
    """

    delete: list[RunnerView] = field(default_factory=list)
    remove: list[RunnerView] = field(default_factory=list)
    remove_limit: int | None = None

    @property
    def empty(self) -> bool:
        return not self.delete and not self.remove


@dataclass(frozen=True)
class ScalingPlan:
    """What one pass of the EphemeralRunnerSet does (see :func:`plan_scaling`)."""

    step: Step
    phase: EphemeralRunnerSetPhase
    cleanup: CleanupPlan = field(default_factory=CleanupPlan)
    create: int = 0
    check_finished_marker: bool = False
    """Create only if a fresh read shows ``finishedRunnerCleanupPatchID != spec.patchID``."""
    record_finished_marker: int | None = None
    """Write ``status.finishedRunnerCleanupPatchID`` = this before deleting (rule 5)."""
    requeue_after: float | None = None
    """Come back then even if nothing changes (a Failed runner reaches ``failed_runner_min_age``)."""


def set_phase(states: RunnerStates) -> EphemeralRunnerSetPhase:
    """``Outdated`` while a runner of the current revision is Outdated, else ``Running`` (both directions)."""
    return EphemeralRunnerSetPhase.OUTDATED if states.outdated else EphemeralRunnerSetPhase.RUNNING


def revision_cleanup(states: RunnerStates) -> CleanupPlan:
    """A spec change (or the set's deletion): delete every done runner, remove every idle or pending one.

    Busy runners (running with a job) and runners already being deleted are left alone.
    """
    return CleanupPlan(delete=states.terminated, remove=states.idle_or_pending)


def plan_scaling(
    spec: SetSpec,
    states: RunnerStates,
    *,
    now: dt.datetime,
    failed_runner_min_age: float = DEFAULT_FAILED_RUNNER_MIN_AGE,
) -> ScalingPlan:
    """The decision of one pass of the main path (after any revision cleanup); see the module docstring."""
    phase = set_phase(states)
    held = _outdated_plan(states, phase=phase)
    if held is not None:
        return held
    reapable, waiting = _failed_by_age(states.failed, now=now, min_age=failed_runner_min_age)
    if reapable:
        return ScalingPlan(step=Step.REAP_FAILED, phase=phase, cleanup=CleanupPlan(delete=reapable))
    return _replicas_plan(spec, states, phase=phase, requeue_after=waiting)


def _outdated_plan(states: RunnerStates, *, phase: EphemeralRunnerSetPhase) -> ScalingPlan | None:
    """Rules 1 and 2: the outdated hold, and the deletion of stale Outdated runners (``None``: neither)."""
    if states.outdated:
        evidence = {runner.name for runner in states.outdated}
        done = [runner for runner in states.terminated if runner.name not in evidence]
        return ScalingPlan(
            step=Step.OUTDATED_HOLD,
            phase=phase,
            cleanup=CleanupPlan(delete=done, remove=states.idle_or_pending),
        )
    if states.stale_outdated:
        return ScalingPlan(
            step=Step.DELETE_STALE_OUTDATED, phase=phase, cleanup=CleanupPlan(delete=states.stale_outdated)
        )
    return None


def _replicas_plan(
    spec: SetSpec, states: RunnerStates, *, phase: EphemeralRunnerSetPhase, requeue_after: float | None
) -> ScalingPlan:
    """Rules 4 to 7: the patch gate, finished-runner reaping, scale-up, scale-down, or nothing to do."""
    if spec.patch_id != 0 and spec.patch_id == states.latest_patch_id:
        return ScalingPlan(step=Step.GATE_CLOSED, phase=phase, requeue_after=requeue_after)

    if states.finished:
        return ScalingPlan(
            step=Step.REAP_FINISHED,
            phase=phase,
            cleanup=CleanupPlan(delete=states.finished),
            record_finished_marker=spec.patch_id,
            requeue_after=requeue_after,
        )

    replicas = spec.effective_replicas
    if states.scale_up_total < replicas:
        return ScalingPlan(
            step=Step.SCALE_UP,
            phase=phase,
            create=replicas - states.scale_up_total,
            check_finished_marker=spec.patch_id > 0,
            requeue_after=requeue_after,
        )

    if spec.patch_id == 0 and states.total > replicas:
        return ScalingPlan(
            step=Step.SCALE_DOWN,
            phase=phase,
            cleanup=CleanupPlan(remove=scale_down_candidates(states), remove_limit=states.total - replicas),
            requeue_after=requeue_after,
        )
    return ScalingPlan(step=Step.STEADY, phase=phase, requeue_after=requeue_after)


def creation_batches(count: int, *, limit: int) -> list[int]:
    """The batch sizes in which a scale-up creates ``count`` runners: 1, 2, 4, ... doubling up to ``limit``,
    the last one cut so that they add up to ``count``.

    The slow start of Kubernetes' ReplicaSet controller: a first request that fails costs nothing more, and
    a working API server reaches full concurrency after a few round trips. At most ``limit`` creations
    (and their tasks) are in flight at once, whatever ``count`` is.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    batches: list[int] = []
    size, remaining = 1, count
    while remaining > 0:
        batch = min(size, limit, remaining)
        batches.append(batch)
        remaining -= batch
        size *= 2
    return batches


def replicas_above_ceiling(ers: Mapping[str, Any], *, ceiling: int) -> tuple[str, str] | None:
    """(reason, message) when the set asks for more runners than the controller's ceiling allows, else ``None``."""
    replicas = EphemeralRunnerSetView(ers).replicas
    if replicas <= ceiling:
        return None
    return (
        REASON_REPLICAS_ABOVE_CEILING,
        f"spec.replicas {replicas} is above the controller's ceiling of {ceiling} runners per scale set"
        f" (--max-runners-ceiling): at most {ceiling} runners are kept; set the scale set's maxRunners to at most"
        f" {ceiling}, or raise the ceiling",
    )


def scale_down_candidates(states: RunnerStates) -> list[RunnerView]:
    """Idle runners that may go, in the order they should: pending oldest first, then running oldest first.

    Excluded: runners with a job, and runners without a runner ID (not registered yet: removing the ER now
    could race the registration and leak it on GitHub).
    """
    return [runner for runner in (*states.pending, *states.running) if not runner.has_job and runner.runner_id != 0]


def _failed_by_age(
    failed: Sequence[RunnerView], *, now: dt.datetime, min_age: float
) -> tuple[list[RunnerView], float | None]:
    """Failed runners old enough to reap, and the seconds until the next one is (``None``: no other)."""
    reapable: list[RunnerView] = []
    soonest: float | None = None
    for runner in failed:
        remaining = min_age - (now - runner.created).total_seconds()
        if remaining <= 0:
            reapable.append(runner)
        else:
            soonest = remaining if soonest is None else min(soonest, remaining)
    return reapable, soonest
