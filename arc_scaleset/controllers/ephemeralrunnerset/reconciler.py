"""The EphemeralRunnerSet controller: keeps a set's runners at ``spec.replicas``, at the current revision.

A pass has the shape of every pass (docs/controllers.md, "The shape of a pass"): the set from the cache, its
scope (:class:`.scope.SetPass`: the set, its runners by state against the applied revision, its memory), these
phases in order, and the status written at the end. The decisions are :mod:`.scaling`, the writes of runners
:mod:`.runner_writes`, the revision bookkeeping :mod:`.revision` (docs/revisions.md):

1. ``_finalize``, while the set is being deleted: remove every runner (busy ones block until their job ends),
   then the proxy Secret, then the finalizer;
2. ``_count_from_zero``: the scale set's counters exist, at 0 until counted (docs/observability.md); then
   ``_ensure_finalizer``: add the finalizer if missing;
3. ``_apply_revision``, the **revision cleanup**, when ``spec.actionableRevision >
   status.appliedActionableRevision``: delete every done runner, remove every idle or pending one (busy runners
   keep the old spec until their job ends), reconcile the proxy Secret, then record the revision with the
   conflict-checked write against a fresh read (:func:`.status.patch_applied_actionable_revision`) and end
   the pass. Any error leaves ``appliedActionableRevision`` behind, so the cleanup is done again; it is
   idempotent, so a restart at any point converges to the same state, and no runner of the new revision
   exists before the revision is recorded (creation happens only in ``_scale``, only once applied >= spec);
4. ``_reconcile_proxy``: the runners' proxy Secret;
5. ``_await_creations``: wait while runners this process created are not yet in the cache (no double creation);
6. ``_scale``: carry out :func:`.scaling.plan_scaling`: outdated hold, stale-Outdated deletion, failed-runner
   reaping, the patch gate, finished-runner reaping (marker first, or riding the status write when the runners'
   own controller deletes them: :mod:`.finished_marker`), scale-up (concurrent creates, bounded by
   ``runner_create_concurrency``; none from a runner template above the size bound or one the API server
   refuses: :mod:`.spec_problems`) or scale-down. A set *superseded* by a newer set of its scale set
   (:mod:`arc_scaleset.api.runner_sets`; only after a move from ARC) is planned as ``replicas`` 0 under
   patch ID 0: it creates nothing and removes its idle runners while the AutoscalingRunnerSet deletes it.

The status, at the end (:mod:`.pass_status`): ``Degraded`` and the advertised capacity after a pass that got
through ``_scale``; the phase and the runner counts where they differ, in one patch (a change of the counts alone
``counts_interval`` seconds after a pass first saw it: :mod:`.counts`), also while the set drains, with the jobs
its runners finished.

The set's finalizer is this controller's, or ARC's (``ephemeralrunner.actions.github.com/finalizer``, on sets
ARC's releases made): either one makes the set drain its runners before it goes, and both are removed then.
Bad input (missing GitHub Secret, invalid URL, missing proxy credentials) is reported as a Warning Event on
the set and the pass fails, so the key is retried with backoff; nothing is deleted because of it.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.job_window import WindowBounds
from arc_scaleset.api.keys import EPHEMERAL_RUNNER_SET_FINALIZER, EPHEMERAL_RUNNER_SET_FINALIZERS
from arc_scaleset.api.runner_sets import is_superseded, siblings_of
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunnerset.capacity_status import CapacityPublisher
from arc_scaleset.controllers.ephemeralrunnerset.counts import DEFAULT_COUNTS_INTERVAL
from arc_scaleset.controllers.ephemeralrunnerset.expectations import DEFAULT_EXPECTATION_TIMEOUT
from arc_scaleset.controllers.ephemeralrunnerset.pass_status import PassStatus, sooner
from arc_scaleset.controllers.ephemeralrunnerset.proxy import (
    delete_runner_proxy_secret,
    reconcile_runner_proxy_secret,
)
from arc_scaleset.controllers.ephemeralrunnerset.runner_index import SetRunners
from arc_scaleset.controllers.ephemeralrunnerset.runner_writes import CreateFailedError, RunnerWrites
from arc_scaleset.controllers.ephemeralrunnerset.scaling import (
    DEFAULT_FAILED_RUNNER_MIN_AGE,
    ScalingPlan,
    SetSpec,
    Step,
    plan_scaling,
    replicas_above_ceiling,
    revision_cleanup,
)
from arc_scaleset.controllers.ephemeralrunnerset.scope import SetMemory, SetPass, SetReport, set_memory_of
from arc_scaleset.controllers.ephemeralrunnerset.spec_problems import spec_verdict
from arc_scaleset.controllers.ephemeralrunnerset.status import (
    patch_applied_actionable_revision,
    patch_finished_cleanup_marker,
    read_finished_cleanup_patch_id,
)
from arc_scaleset.controllers.ephemeralrunnerset.template_check import dry_run_pod, try_runner_pod
from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.controllers.failure_report import ReconcileFailureReporter
from arc_scaleset.controllers.metrics import DeletedReason, ScaleSetState, runner_set_labels, scale_set_states
from arc_scaleset.controllers.reconcile_pass import ObjectMemory, Phase, gather, run_phases
from arc_scaleset.controllers.runner_classification import RunnerStates, RunnerView
from arc_scaleset.controllers.runner_template_size import runner_set_template_problem
from arc_scaleset.kube.controller import Controller, Request, Result, Watch
from arc_scaleset.kube.finalizers import add_finalizer, has_finalizer, remove_finalizer
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.ownerrefs import Owner, children_of
from arc_scaleset.kube.resources import RESOURCE_QUOTAS
from arc_scaleset.kube.views import ObjectView
from arc_scaleset.kube.workqueue import RateLimiter

log = logging.getLogger(__name__)

CONTROLLER_NAME: Final = "ephemeralrunnerset"
EXPECTATION_RECHECK: Final = 5.0
"""Seconds after which a pass that waited for its own creations looks again even without an event."""


class EphemeralRunnerSetReconciler:
    """Reconciles EphemeralRunnerSets (primary) and their EphemeralRunners (owned); see the module docstring.

    ``failed_runner_min_age``: seconds a Failed runner is kept before it is reaped and replaced
    (:mod:`~arc_scaleset.controllers.ephemeralrunnerset.scaling`, rule 3). ``counts_interval``: seconds a
    change of the runner counts alone waits before it is written (:mod:`.counts`).
    ``expectation_timeout``: seconds after which runners this process created or deleted are no longer awaited
    in the cache (:mod:`.expectations`). ``job_window``: how many finished jobs, and how old, the set's
    ``status.recentJobs`` keeps (:mod:`arc_scaleset.api.job_window`). ``runner_writes``: makes what creates and
    removes the runners (:mod:`.runner_writes`).
    """

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        failed_runner_min_age: float = DEFAULT_FAILED_RUNNER_MIN_AGE,
        counts_interval: float = DEFAULT_COUNTS_INTERVAL,
        expectation_timeout: float = DEFAULT_EXPECTATION_TIMEOUT,
        job_window: WindowBounds | None = None,
        runner_writes: Callable[[ControllerContext], RunnerWrites] = RunnerWrites,
    ) -> None:
        self._ctx = ctx
        self._kube = ctx.kube
        self._sets = ctx.cache(EPHEMERAL_RUNNER_SETS)
        self._runners = ctx.cache(EPHEMERAL_RUNNERS)
        self._failed_runner_min_age = failed_runner_min_age
        self._memory: ObjectMemory[SetMemory] = ObjectMemory(
            functools.partial(
                SetMemory.new,
                clock=ctx.clock,
                expectation_timeout=expectation_timeout,
                counts_interval=counts_interval,
                job_window=job_window,
            )
        )
        self._writes = runner_writes(ctx)
        self.capacity = CapacityPublisher(ctx)
        self._status = PassStatus(ctx, self.capacity)
        self._phases: tuple[Phase[SetPass], ...] = (
            self._finalize,
            self._count_from_zero,
            self._ensure_finalizer,
            self._apply_revision,
            self._reconcile_proxy,
            self._await_creations,
            self._scale,
        )
        ctx.metrics.observe_scale_sets(self._scale_set_states)

    def controller(self, *, rate_limiter: RateLimiter | None = None) -> Controller:
        # The runner indexes are fed by this controller's event handlers: a new controller starts them afresh
        # (its informers replay what they hold, but not what was deleted while no handler listened).
        for _request, memory in self._memory:
            memory.runners = None
        return Controller(
            CONTROLLER_NAME,
            EPHEMERAL_RUNNER_SETS,
            self.reconcile,
            owns=[EPHEMERAL_RUNNERS],
            watches=[
                # A set that appears, or starts being deleted, may supersede a sibling or make it current again.
                Watch(EPHEMERAL_RUNNER_SETS, self._siblings_of, on_update_if=_deletion_started),
                Watch(EPHEMERAL_RUNNERS, self._runner_changed),
                # A quota's usage moves what its namespace's sets can advertise (docs/capacity.md).
                Watch(RESOURCE_QUOTAS, self._sets_in_namespace),
            ],
            sources=self.capacity.sources(),
            concurrency=self._ctx.settings.scale_set_max_concurrent_reconciles,
            rate_limiter=rate_limiter,
            clock=self._ctx.clock,
            failure_reporter=ReconcileFailureReporter(self._ctx, EPHEMERAL_RUNNER_SETS),
        )

    def _siblings_of(self, ers: Object) -> list[Request]:
        """The other sets of the same scale set (usually none; :func:`~arc_scaleset.api.runner_sets.siblings_of`)."""
        view = EphemeralRunnerSetView(ers)
        return [
            Request(sibling.namespace, sibling.name)
            for sibling in map(EphemeralRunnerSetView, siblings_of(self._sets, ers))
            if sibling.uid != view.uid
        ]

    def _sets_in_namespace(self, obj: Object) -> list[Request]:
        namespace = ObjectView(obj).namespace
        return [Request(namespace, ObjectView(ers).name) for ers in self._sets.list(namespace)]

    def _runner_changed(self, runner: Object) -> list[Request]:
        """Tell the runner index of the runner's set (its controller owner, by key and UID) that the runner
        changed (added, updated or deleted), and keep the job it finished: a runner deleted right after its job
        may be gone from the cache before the set's next pass, but its delete event still has it. Queues nothing
        itself (``owns`` queues the set)."""
        slot = set_memory_of(self._memory, runner)
        if slot is None:
            return []
        if slot.runners is not None:
            view = ObjectView(runner)
            slot.runners.changed(view.namespace, view.name)
        slot.jobs.see(runner)
        return []

    # -- the pass ---------------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        """One pass over the set ``request`` names (see the module docstring)."""
        ers = gather(self._sets, self._memory, request)
        if ers is None:
            return Result()
        scope = self._scope(ers, request)
        try:
            result = await run_phases(scope, self._phases)
        except ConfigurationError as exc:
            await self._status.bad_input(scope, exc)
            raise
        finally:
            status_due = await self._status.write(scope)
        return Result(requeue_after=sooner(result.requeue_after, status_due))

    def _scope(self, ers: Object, request: Request) -> SetPass:
        view = EphemeralRunnerSetView(ers)
        memory = self._memory.slot(request, view.uid)
        states = self._runner_states(ers, view, memory)
        return SetPass(ers=ers, view=view, request=request, memory=memory, states=states)

    def _runner_states(self, ers: Object, view: EphemeralRunnerSetView, memory: SetMemory) -> RunnerStates:
        """The set's runners as the cache has them, by state against the applied revision; runners this set
        deleted whose deletion the cache has not shown yet count as deleting (never removed twice).

        Costs the runners that changed since the last pass (:mod:`.runner_index`), not the set's size.
        """
        applied = view.applied_actionable_revision
        if not view.uid:
            return RunnerStates(applied_revision=applied)
        if memory.runners is None:
            memory.runners = SetRunners(Owner.of(ers))
        index = memory.runners
        index.refresh(self._runners)
        return index.states(applied_revision=applied, deleting=memory.deleted.unseen(index.view))

    async def _finalize(self, scope: SetPass) -> Result | None:
        """While the set is being deleted: drain its runners, then drop its proxy Secret and finalizers."""
        if not scope.view.is_deleting:
            return None
        held = [finalizer for finalizer in EPHEMERAL_RUNNER_SET_FINALIZERS if has_finalizer(scope.ers, finalizer)]
        if not held:
            return Result()
        if scope.states.all():
            # A draining set keeps showing what it still runs (kubectl, dashboards, the scale set's totals).
            scope.report.counts = True
            plan = revision_cleanup(scope.states)
            if not plan.empty:
                await self._writes.cleanup(scope, plan, removal=DeletedReason.SET_DELETED)
            # Deletion events of the runners bring us back; busy runners come back when their job ends.
            return Result()
        await delete_runner_proxy_secret(self._kube, scope.ers)
        for finalizer in held:
            await remove_finalizer(self._kube, EPHEMERAL_RUNNER_SETS, scope.ers, finalizer)
        self._memory.forget(scope.request)
        if not self._siblings_of(scope.ers):
            # The scale set's last set is gone (no other set of it: docs/migration.md): its counters go too (the
            # state gauges follow the cache).
            self._ctx.metrics.forget(runner_set_labels(scope.ers))
        return Result()

    async def _count_from_zero(self, scope: SetPass) -> Result | None:
        """The scale set's transition counters exist, at 0 until its first transition (a set being deleted has
        ended in :meth:`_finalize`, which forgets them once its last set is gone)."""
        self._ctx.metrics.start_scale_set(runner_set_labels(scope.ers))
        return None

    async def _ensure_finalizer(self, scope: SetPass) -> Result | None:
        """Add this controller's finalizer unless the set holds one (ours or ARC's); its write ends the pass."""
        if any(has_finalizer(scope.ers, finalizer) for finalizer in EPHEMERAL_RUNNER_SET_FINALIZERS):
            return None
        stored = await add_finalizer(self._kube, EPHEMERAL_RUNNER_SETS, scope.ers, EPHEMERAL_RUNNER_SET_FINALIZER)
        scope.memory.marker.answered(stored)
        return Result()

    async def _apply_revision(self, scope: SetPass) -> Result | None:
        """Revision cleanup (module docstring, phase 3), when a revision is pending; it ends the pass."""
        view, states = scope.view, scope.states
        if not view.revision_pending:
            return None
        target = view.actionable_revision
        result = await self._writes.cleanup(scope, revision_cleanup(states), removal=DeletedReason.REVISION)
        await self._reconcile_proxy(scope)
        stored = await patch_applied_actionable_revision(
            self._kube, namespace=view.namespace, name=view.name, target=target,
            exclude_label_prefixes=self._ctx.settings.exclude_label_prefixes, clock=self._ctx.clock,
        )  # fmt: skip
        # The revision's write resets the finished-runner marker: remember it as that write left it.
        scope.memory.marker.stored_as(EphemeralRunnerSetView(stored).finished_runner_cleanup_patch_id)
        log.info(
            "%s/%s: revision %d applied (deleted %d done, removed %d idle/pending, %d busy kept)",
            view.namespace, view.name, target, len(result.deleted) - len(result.removed),
            len(result.removed), len(states.busy) + len(result.busy),
        )  # fmt: skip
        return Result()

    async def _reconcile_proxy(self, scope: SetPass) -> None:
        """The runners' proxy Secret, as the set's proxy settings say (:mod:`.proxy`)."""
        await reconcile_runner_proxy_secret(self._kube, self._ctx.github.reads, scope.ers, scope.memory.proxy)

    async def _await_creations(self, scope: SetPass) -> Result | None:
        """Wait while runners this process created are not in the cache yet: a pass on a cache that misses
        them would create them again (:mod:`.expectations`)."""
        namespace = scope.request.namespace
        waiting = scope.memory.created.outstanding(seen=lambda name: self._runners.get(namespace, name) is not None)
        if not waiting:
            return None
        log.debug("%s: waiting for %d created runners to reach the cache", scope.key, waiting)
        return Result(requeue_after=EXPECTATION_RECHECK)

    async def _scale(self, scope: SetPass) -> Result | None:
        """Carry out the scaling plan, unless the runner template is above the size bound or the API server refuses
        the runner pod: then create nothing (:mod:`.spec_problems`)."""
        plan = self._plan(scope)
        settings = self._ctx.settings
        oversized = runner_set_template_problem(scope.ers, limit=settings.max_runner_template_bytes)
        rejection, recheck = await self._check_template(scope, creating=plan.create > 0 and oversized is None)
        verdict = spec_verdict(
            oversized=oversized,
            rejection=rejection,
            above_ceiling=replicas_above_ceiling(scope.ers, ceiling=settings.max_runners_ceiling),
        )
        if not verdict.may_create:
            plan = dataclasses.replace(plan, create=0)
        await self._execute(scope, plan)
        scope.report = SetReport(counts=True, phase=str(plan.phase), assessed=True, problem=verdict.problem)
        return Result(requeue_after=sooner(plan.requeue_after, recheck))

    def _plan(self, scope: SetPass) -> ScalingPlan:
        view = scope.view
        superseded = is_superseded(scope.ers, siblings_of(self._sets, scope.ers))
        if superseded:
            log.debug("%s: superseded by a newer set of its scale set: no new runners, idle ones removed", scope.key)
        spec = SetSpec(
            # A superseded set is drained like a listener's "0 runners" (patch ID 0: authoritative).
            replicas=0 if superseded else view.replicas,
            patch_id=0 if superseded else view.patch_id,
            actionable_revision=view.actionable_revision,
            applied_revision=view.applied_actionable_revision,
            max_replicas=self._ctx.settings.max_runners_ceiling,
        )
        return plan_scaling(
            spec, scope.states, now=self._ctx.clock.now(), failed_runner_min_age=self._failed_runner_min_age
        )

    async def _check_template(self, scope: SetPass, *, creating: bool) -> tuple[str | None, float | None]:
        """The API server's refusal of the set's runner pod (``None``: accepted, or never tried) and, while it
        refuses and runners are wanted, the seconds until it is tried again (:mod:`.template_check`).

        The pod is tried (a dry-run create) only before a scale-up: for a runner spec not tried yet, or when
        its verdict is due again.
        """
        checks = scope.memory.template
        verdict = checks.known(scope.ers)
        if creating and checks.due_in(verdict) == 0:
            settings = self._ctx.settings
            pod = dry_run_pod(scope.ers, exclude_label_prefixes=settings.exclude_label_prefixes,
                              version=settings.build_version)  # fmt: skip
            verdict = checks.record(scope.ers, await try_runner_pod(self._kube, pod))
        if verdict is None or verdict.rejection is None:
            return None, None
        return verdict.rejection, checks.due_in(verdict) if creating else None

    async def _execute(self, scope: SetPass, plan: ScalingPlan) -> None:
        view = scope.view
        cleanup = plan.cleanup
        marker = scope.memory.marker
        if plan.record_finished_marker is not None:
            # A succeeded runner that its own controller is deleting is left to it (controllers/handoff.py).
            deleting = self._ctx.runner_deletions.deleting
            cleanup = dataclasses.replace(cleanup, delete=[r for r in cleanup.delete if not deleting(r.uid)])
            # Marker first when the set deletes some itself: if the deletions below happen and we crash, a
            # restarted controller still knows it must not replace them under this patch ID. Else it rides
            # the pass's status write (.finished_marker).
            if marker.record(plan.record_finished_marker, set_deletes=bool(cleanup.delete)):
                marker.stored_as(await patch_finished_cleanup_marker(
                    self._kube, namespace=view.namespace, name=view.name,
                    patch_id=plan.record_finished_marker, known=marker.stored, clock=self._ctx.clock,
                ))  # fmt: skip
        if not cleanup.empty:
            await self._writes.cleanup(scope, cleanup, removal=DeletedReason.SCALE_DOWN)
        if plan.create > 0:
            patch_id = view.patch_id
            if plan.check_finished_marker and await self._reaped_under(scope, patch_id):
                log.debug("%s: finished runners were reaped under patch %d; no scale-up until the next",
                          scope.key, patch_id)  # fmt: skip
                return
            await self._writes.create(scope, plan.create)
        if plan.step is not Step.STEADY and plan.step is not Step.GATE_CLOSED:
            log.debug("%s: %s", scope.key, plan.step)

    async def _reaped_under(self, scope: SetPass, patch_id: int) -> bool:
        """Whether the finished-runner marker holds ``patch_id``: as this process knows it, else as the API has
        it now (the cache may lag a write of the previous leader's)."""
        marker = scope.memory.marker
        if marker.known is None:
            view = scope.view
            marker.stored_as(await read_finished_cleanup_patch_id(self._kube, namespace=view.namespace, name=view.name))
        return marker.known == patch_id

    def _scale_set_states(self) -> list[ScaleSetState]:
        """The state gauges' source (read at scrape time): every cached set with its cached runners."""

        def runners_of(runner_set: Mapping[str, Any]) -> list[RunnerView]:
            return [RunnerView.of(runner) for runner in children_of(self._runners, Owner.of(runner_set))]

        return scale_set_states(self._sets.list(), runners_of)


def _deletion_started(old: Object, new: Object) -> bool:
    return EphemeralRunnerSetView(old).is_deleting != EphemeralRunnerSetView(new).is_deleting


def setup_ephemeral_runner_set_controller(
    ctx: ControllerContext, *, rate_limiter: RateLimiter | None = None, **options: Any
) -> Controller:
    """Build the EphemeralRunnerSet controller and register it with the context's manager."""
    controller = EphemeralRunnerSetReconciler(ctx, **options).controller(rate_limiter=rate_limiter)
    ctx.manager.add(controller)
    return controller


__all__ = [
    "CreateFailedError",
    "EphemeralRunnerSetReconciler",
    "setup_ephemeral_runner_set_controller",
]
