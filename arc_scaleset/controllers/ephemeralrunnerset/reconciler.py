"""The EphemeralRunnerSet controller: keeps a set's runners at ``spec.replicas``, at the current revision.

A pass (docs/controllers.md, docs/revisions.md; the decisions are
:mod:`~arc_scaleset.controllers.ephemeralrunnerset.scaling`, the revision bookkeeping
:mod:`~arc_scaleset.controllers.ephemeralrunnerset.revision`):

1. being deleted -> remove every runner (busy ones block until their job ends), then the proxy Secret, then
   the finalizer;
2. add the finalizer if missing;
3. **revision cleanup** when ``spec.actionableRevision > status.appliedActionableRevision``: delete every done
   runner, remove every idle or pending one (busy runners keep the old spec until their job ends), reconcile
   the proxy Secret, then record the revision with the conflict-checked write against a fresh read
   (:func:`~arc_scaleset.controllers.ephemeralrunnerset.status.patch_applied_actionable_revision`) and end the
   pass. Any error leaves ``appliedActionableRevision`` behind, so the cleanup is done again; it is
   idempotent, so a restart at any point converges to the same state, and no runner of the new revision
   exists before the revision is recorded (creation happens only in step 5, only once applied >= spec);
4. reconcile the proxy Secret, classify the runners against the applied revision, publish the per-phase
   gauges;
5. wait while runners this process created are not yet in the cache (no double creation), then carry out
   :func:`.scaling.plan_scaling`: outdated hold, stale-Outdated deletion, failed-runner
   reaping, the patch gate, finished-runner reaping (marker first), scale-up (concurrent creates, bounded by
   ``runner_create_concurrency``) or scale-down. A set *superseded* by a newer set of its scale set
   (:mod:`arc_scaleset.api.runner_sets`; only after a move from ARC) is planned as ``replicas`` 0 under
   patch ID 0: it creates nothing and removes its idle runners while the AutoscalingRunnerSet deletes it;
6. write the phase and the runner counts where they differ, in one patch (counts alone at most every
   ``counts_interval`` seconds: :mod:`.counts`).

The set's finalizer is this controller's, or ARC's (``ephemeralrunner.actions.github.com/finalizer``, on sets
ARC's releases made): either one makes the set drain its runners before it goes, and both are removed then.

Bad input (missing GitHub Secret, invalid URL, missing proxy credentials) is reported as a Warning Event on
the set and the pass fails, so the key is retried with backoff; nothing is deleted because of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import (
    EPHEMERAL_RUNNER_SET_FINALIZER,
    EPHEMERAL_RUNNER_SET_FINALIZERS,
)
from arc_scaleset.api.runner_sets import is_superseded, siblings_of
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunnerset.builders import desired_ephemeral_runner, with_runner_instance
from arc_scaleset.controllers.ephemeralrunnerset.capacity_status import CapacityPublisher
from arc_scaleset.controllers.ephemeralrunnerset.cleanup import CleanupFailedError, CleanupResult, execute_cleanup
from arc_scaleset.controllers.ephemeralrunnerset.conditions import degraded_conditions, patch_conditions
from arc_scaleset.controllers.ephemeralrunnerset.counts import (
    DEFAULT_COUNTS_INTERVAL,
    StatusPacer,
    runner_counts,
    status_changes,
)
from arc_scaleset.controllers.ephemeralrunnerset.expectations import CreationExpectations, DeletionExpectations
from arc_scaleset.controllers.ephemeralrunnerset.proxy import (
    delete_runner_proxy_secret,
    reconcile_runner_proxy_secret,
)
from arc_scaleset.controllers.ephemeralrunnerset.runner_index import SetRunners, controller_uid
from arc_scaleset.controllers.ephemeralrunnerset.scaling import (
    DEFAULT_FAILED_RUNNER_MIN_AGE,
    CleanupPlan,
    ScalingPlan,
    SetSpec,
    Step,
    creation_batches,
    plan_scaling,
    replicas_above_ceiling,
    revision_cleanup,
)
from arc_scaleset.controllers.ephemeralrunnerset.status import (
    patch_applied_actionable_revision,
    patch_finished_cleanup_marker,
    patch_status,
    read_finished_cleanup_patch_id,
)
from arc_scaleset.controllers.ephemeralrunnerset.template_check import (
    REASON_INVALID_RUNNER_TEMPLATE,
    TemplateChecks,
    dry_run_pod,
    try_runner_pod,
)
from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.controllers.failure_report import ReconcileFailureReporter
from arc_scaleset.controllers.metrics import (
    DeletedReason,
    ScaleSetState,
    deleted_reason_of_done,
    runner_set_labels,
    scale_set_states,
)
from arc_scaleset.controllers.runner_classification import RunnerStates, RunnerView
from arc_scaleset.controllers.runner_github import client_for_runner_spec
from arc_scaleset.github import ActionsClient
from arc_scaleset.kube.controller import Controller, Request, Result, Watch
from arc_scaleset.kube.errors import NotFound as KubeNotFound
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


class CreateFailedError(Exception):
    """Some EphemeralRunners of a scale-up could not be created (the pass is retried)."""


class EphemeralRunnerSetReconciler:
    """Reconciles EphemeralRunnerSets (primary) and their EphemeralRunners (owned); see the module docstring.

    ``failed_runner_min_age``: seconds a Failed runner is kept before it is reaped and replaced
    (:mod:`~arc_scaleset.controllers.ephemeralrunnerset.scaling`, rule 3). ``counts_interval``: seconds between
    two status writes that change only the runner counts (:mod:`~arc_scaleset.controllers.ephemeralrunnerset.counts`).
    """

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        failed_runner_min_age: float = DEFAULT_FAILED_RUNNER_MIN_AGE,
        counts_interval: float = DEFAULT_COUNTS_INTERVAL,
    ) -> None:
        self._ctx = ctx
        self._kube = ctx.kube
        self._sets = ctx.cache(EPHEMERAL_RUNNER_SETS)
        self._runners = ctx.cache(EPHEMERAL_RUNNERS)
        self._failed_runner_min_age = failed_runner_min_age
        self.expectations = CreationExpectations(clock=ctx.clock)
        self.deletions = DeletionExpectations(clock=ctx.clock)
        self.templates = TemplateChecks(clock=ctx.clock)
        self._pacer = StatusPacer(clock=ctx.clock, interval=counts_interval)
        self._indexes: dict[str, SetRunners] = {}
        """Set key -> its classified runners, kept up to date from runner events (:mod:`.runner_index`)."""
        self._indexes_by_uid: dict[str, SetRunners] = {}
        self.capacity = CapacityPublisher(ctx)
        ctx.metrics.observe_scale_sets(self._scale_set_states)

    def controller(self, *, rate_limiter: RateLimiter | None = None) -> Controller:
        # The indexes are fed by this controller's event handlers: a new controller starts them afresh (its
        # informers replay what they hold, but not what was deleted while no handler listened).
        self._indexes.clear()
        self._indexes_by_uid.clear()
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
        """Tell the index of the runner's set that the runner changed (added, updated or deleted); queues
        nothing itself (``owns`` queues the set)."""
        index = self._indexes_by_uid.get(controller_uid(runner))
        if index is not None:
            view = ObjectView(runner)
            index.changed(view.namespace, view.name)
        return []

    # -- the pass ---------------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        ers = self._sets.get(request.namespace, request.name)
        if ers is None:
            self.expectations.forget(str(request))
            self.deletions.forget(str(request))
            self.templates.forget(str(request))
            self._forget_runners(str(request))
            self._pacer.forget(str(request))
            return Result()
        if EphemeralRunnerSetView(ers).is_deleting:
            return await self._finalize(ers, request)
        if not any(has_finalizer(ers, finalizer) for finalizer in EPHEMERAL_RUNNER_SET_FINALIZERS):
            await add_finalizer(self._kube, EPHEMERAL_RUNNER_SETS, ers, EPHEMERAL_RUNNER_SET_FINALIZER)
            return Result()
        try:
            return await self._reconcile_live(ers, request)
        except ConfigurationError as exc:
            await self._degraded_by(ers, exc)
            await self._ctx.events.event(ers, type="Warning", reason=exc.reason, note=exc.message, action="Reconcile")
            raise

    async def _reconcile_live(self, ers: Object, request: Request) -> Result:
        view = EphemeralRunnerSetView(ers)
        states = self._runner_states(ers)
        target = view.actionable_revision
        if view.revision_pending:
            await self._apply_revision(ers, states, target)
            return Result()

        await reconcile_runner_proxy_secret(self._kube, ers)

        key = str(request)
        waiting = self.expectations.outstanding(
            key, seen=lambda name: self._runners.get(request.namespace, name) is not None
        )
        if waiting:
            log.debug("%s: waiting for %d created runners to reach the cache", key, waiting)
            return Result(requeue_after=EXPECTATION_RECHECK)

        superseded = self._superseded(ers)
        if superseded:
            log.debug("%s: superseded by a newer set of its scale set: no new runners, idle ones removed", key)
        plan = plan_scaling(
            SetSpec(
                # A superseded set is drained like a listener's "0 runners" (patch ID 0: authoritative).
                replicas=0 if superseded else view.replicas,
                patch_id=0 if superseded else view.patch_id,
                actionable_revision=target,
                applied_revision=view.applied_actionable_revision,
                max_replicas=self._ctx.settings.max_runners_ceiling,
            ),
            states,
            now=self._ctx.clock.now(),
            failed_runner_min_age=self._failed_runner_min_age,
        )
        rejection, recheck = await self._check_template(ers, key, creating=plan.create > 0)
        problem = replicas_above_ceiling(ers, ceiling=self._ctx.settings.max_runners_ceiling)
        if rejection is not None:
            # No runner from a spec the API server refuses: none is registered on GitHub only to be refused.
            plan = dataclasses.replace(plan, create=0)
            problem = (
                REASON_INVALID_RUNNER_TEMPLATE,
                f"the API server refuses the runner pod: {rejection}; no runner is created (nor registered on"
                " GitHub) until the runner template is fixed",
            )
        await self._execute(ers, plan, key)
        await self._set_degraded(ers, problem)
        counts_due = await self._write_status(ers, key, states, phase=str(plan.phase))
        capacity_due = await self.capacity.publish(ers, states)
        return Result(requeue_after=_sooner(_sooner(_sooner(plan.requeue_after, counts_due), recheck), capacity_due))

    async def _check_template(self, ers: Object, key: str, *, creating: bool) -> tuple[str | None, float | None]:
        """The API server's refusal of the set's runner pod (``None``: accepted, or never tried) and, while it
        refuses and runners are wanted, the seconds until it is tried again (:mod:`.template_check`).

        The pod is tried (a dry-run create) only before a scale-up: for a runner spec not tried yet, or when
        its verdict is due again.
        """
        verdict = self.templates.known(key, ers)
        if creating and self.templates.due_in(verdict) == 0:
            settings = self._ctx.settings
            pod = dry_run_pod(ers, exclude_label_prefixes=settings.exclude_label_prefixes,
                              version=settings.build_version)  # fmt: skip
            verdict = self.templates.record(key, ers, await try_runner_pod(self._kube, pod))
        if verdict is None or verdict.rejection is None:
            return None, None
        return verdict.rejection, self.templates.due_in(verdict) if creating else None

    async def _set_degraded(self, ers: Object, problem: tuple[str, str] | None) -> None:
        """Write the set's ``Degraded`` condition when it changes, with a Warning Event for a new problem."""
        conditions = degraded_conditions(ers, problem, now=self._ctx.clock.now())
        if conditions is None:
            return
        await patch_conditions(self._kube, ers, conditions)
        if problem is not None:
            reason, message = problem
            await self._ctx.events.event(ers, type="Warning", reason=reason, note=message, action="Scale")

    async def _degraded_by(self, ers: Object, exc: ConfigurationError) -> None:
        """``Degraded=True`` naming the configuration error that stopped a pass (the pass's Warning Event is the
        caller's); the next pass that gets through derives the condition again."""
        conditions = degraded_conditions(ers, (exc.reason, exc.message), now=self._ctx.clock.now())
        if conditions is not None:
            with contextlib.suppress(KubeNotFound):
                await patch_conditions(self._kube, ers, conditions)

    def _superseded(self, ers: Object) -> bool:
        """Whether a newer EphemeralRunnerSet of the same scale set is the current one (docs/migration.md)."""
        return is_superseded(ers, siblings_of(self._sets, ers))

    async def _write_status(self, ers: Object, key: str, states: RunnerStates, *, phase: str | None) -> float | None:
        """Write the phase and the runner counts where they differ; a write of counts alone waits for the
        pacer: then the seconds until it may go out are returned (the pass comes back then), else ``None``."""
        changes = status_changes(EphemeralRunnerSetView(ers).status, counts=runner_counts(states), phase=phase)
        if not changes:
            return None
        if "phase" not in changes:
            wait = self._pacer.wait(key)
            if wait > 0:
                return wait
        await patch_status(self._kube, ers, changes)
        self._pacer.wrote(key)
        return None

    async def _apply_revision(self, ers: Object, states: RunnerStates, target: int) -> None:
        """Revision cleanup (module docstring, step 3); ``states``: the runners against the applied revision."""
        view = EphemeralRunnerSetView(ers)
        cleanup = revision_cleanup(states)
        result = await self._cleanup(ers, cleanup, removal=DeletedReason.REVISION)
        await reconcile_runner_proxy_secret(self._kube, ers)
        await patch_applied_actionable_revision(
            self._kube, namespace=view.namespace, name=view.name, target=target,
            exclude_label_prefixes=self._ctx.settings.exclude_label_prefixes, clock=self._ctx.clock,
        )  # fmt: skip
        log.info(
            "%s/%s: revision %d applied (deleted %d done, removed %d idle/pending, %d busy kept)",
            view.namespace, view.name, target, len(result.deleted) - len(result.removed),
            len(result.removed), len(states.busy) + len(result.busy),
        )  # fmt: skip

    async def _execute(self, ers: Object, plan: ScalingPlan, key: str) -> None:
        view = EphemeralRunnerSetView(ers)
        if plan.record_finished_marker is not None:
            # Marker first: if the deletions below happen and we crash, a restarted controller still knows
            # it must not replace those finished runners under this patch ID.
            await patch_finished_cleanup_marker(
                self._kube, namespace=view.namespace, name=view.name,
                patch_id=plan.record_finished_marker, clock=self._ctx.clock,
            )  # fmt: skip
        if not plan.cleanup.empty:
            await self._cleanup(ers, plan.cleanup, removal=DeletedReason.SCALE_DOWN)
        if plan.create > 0:
            patch_id = view.patch_id
            if plan.check_finished_marker:
                marker = await read_finished_cleanup_patch_id(self._kube, namespace=view.namespace, name=view.name)
                if marker == patch_id:
                    log.debug("%s: finished runners were reaped under patch %d; no scale-up until the next", key,
                              patch_id)  # fmt: skip
                    return
            await self._create_runners(ers, plan.create, key)
        if plan.step is not Step.STEADY and plan.step is not Step.GATE_CLOSED:
            log.debug("%s: %s", key, plan.step)

    async def _create_runners(self, ers: Object, count: int, key: str) -> None:
        """Create ``count`` runners in growing concurrent batches (:func:`.scaling.creation_batches`: 1, 2, 4, ...
        up to ``runner_create_concurrency``), stopping after the first batch in which a creation failed.

        At most one batch of requests (and tasks) is in flight, whatever ``count`` is; an API server that
        refuses every runner (a quota, a webhook) costs one failed request, not ``count``. The pass then
        fails and the key is retried with backoff; the runners created so far are expected in the cache.
        """
        body = desired_ephemeral_runner(ers, exclude_label_prefixes=self._ctx.settings.exclude_label_prefixes)

        async def create_one() -> str:
            created = await self._kube.create(EPHEMERAL_RUNNERS, with_runner_instance(body))
            return EphemeralRunnerSetView(created).name

        names: list[str] = []
        errors: list[BaseException] = []
        try:
            for size in creation_batches(count, limit=self._ctx.settings.runner_create_concurrency):
                outcomes = await asyncio.gather(*(create_one() for _ in range(size)), return_exceptions=True)
                names += [outcome for outcome in outcomes if isinstance(outcome, str)]
                errors += [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
                if errors:
                    break
        finally:
            self.expectations.expect(key, names)
            self._ctx.metrics.count_created(runner_set_labels(ers), len(names))
        log.info("%s: created %d of %d runners", key, len(names), count)
        if errors:
            raise CreateFailedError(
                f"{len(errors)} runner creation(s) failed, {count - len(names)} of {count} runners not created;"
                f" first: {errors[0]}"
            )

    # -- deletion ---------------------------------------------------------------------------------------

    async def _finalize(self, ers: Object, request: Request) -> Result:
        held = [finalizer for finalizer in EPHEMERAL_RUNNER_SET_FINALIZERS if has_finalizer(ers, finalizer)]
        if not held:
            return Result()
        states = self._runner_states(ers)
        if states.all():
            # A draining set keeps showing what it still runs (kubectl, dashboards, the scale set's totals).
            counts_due = await self._write_status(ers, str(request), states, phase=None)
            plan = revision_cleanup(states)
            if not plan.empty:
                try:
                    await self._cleanup(ers, plan, removal=DeletedReason.SET_DELETED)
                except ConfigurationError as exc:
                    await self._degraded_by(ers, exc)
                    await self._ctx.events.event(ers, type="Warning", reason=exc.reason, note=exc.message,
                                                 action="Delete")  # fmt: skip
                    raise
            # Deletion events of the runners bring us back; busy runners come back when their job ends.
            return Result(requeue_after=counts_due)
        await delete_runner_proxy_secret(self._kube, ers)
        for finalizer in held:
            await remove_finalizer(self._kube, EPHEMERAL_RUNNER_SETS, ers, finalizer)
        self.expectations.forget(str(request))
        self.deletions.forget(str(request))
        self.templates.forget(str(request))
        self._forget_runners(str(request))
        self._pacer.forget(str(request))
        if not self._has_siblings(ers):
            # The scale set's last set is gone: its counters go too (the state gauges follow the cache).
            self._ctx.metrics.forget(runner_set_labels(ers))
        return Result()

    # -- helpers ----------------------------------------------------------------------------------------

    def _runner_states(self, ers: Object) -> RunnerStates:
        """The set's runners as the cache has them, by state against the applied revision; runners this set
        deleted whose deletion the cache has not shown yet count as deleting (never removed twice).

        Costs the runners that changed since the last pass (:mod:`.runner_index`), not the set's size.
        """
        view = EphemeralRunnerSetView(ers)
        applied = view.applied_actionable_revision
        if not view.uid:
            return RunnerStates(applied_revision=applied)
        key = f"{view.namespace}/{view.name}"
        index = self._indexes.get(key)
        if index is None or index.uid != view.uid:
            self._forget_runners(key)
            index = self._indexes[key] = self._indexes_by_uid[view.uid] = SetRunners(Owner.of(ers))
        index.refresh(self._runners)
        return index.states(applied_revision=applied, deleting=self.deletions.unseen(key, index.view))

    def _forget_runners(self, key: str) -> None:
        index = self._indexes.pop(key, None)
        if index is not None:
            self._indexes_by_uid.pop(index.uid, None)

    async def _cleanup(self, ers: Object, plan: CleanupPlan, *, removal: str) -> CleanupResult:
        """Carry out ``plan`` for ``ers`` (:func:`.cleanup.execute_cleanup`); ``removal``: why live runners go."""
        return await execute_cleanup(
            self._kube, plan, client=self._client_source(ers),
            concurrency=self._ctx.settings.runner_create_concurrency,
            on_deleted=self._deleted(ers, plan, removal=removal),
            removed=self._ctx.removed_registrations, children=self._ctx.deleted_children,
        )  # fmt: skip

    def _deleted(self, ers: Object, plan: CleanupPlan, *, removal: str) -> Callable[[str], None]:
        """Records a runner of ``ers`` as deleted (:class:`.expectations.DeletionExpectations`) and counts it
        (``gha_controller_ephemeral_runners_deleted_total``): a done runner of ``plan.delete`` by its phase, a
        live one of ``plan.remove`` with the reason ``removal``."""
        view = EphemeralRunnerSetView(ers)
        key = f"{view.namespace}/{view.name}"
        labels = runner_set_labels(ers)
        reasons = {runner.name: deleted_reason_of_done(runner) for runner in plan.delete}

        def deleted(name: str) -> None:
            self.deletions.expect(key, name)
            self.expectations.discard(key, name)
            self._ctx.metrics.count_deleted(labels, reasons.get(name, removal), runner=f"{view.namespace}/{name}")

        return deleted

    def _scale_set_states(self) -> list[ScaleSetState]:
        """The state gauges' source (read at scrape time): every cached set with its cached runners."""

        def runners_of(runner_set: Mapping[str, Any]) -> list[RunnerView]:
            return [RunnerView.of(runner) for runner in children_of(self._runners, Owner.of(runner_set))]

        return scale_set_states(self._sets.list(), runners_of)

    def _has_siblings(self, ers: Object) -> bool:
        """Whether another EphemeralRunnerSet of the same scale set exists (a migration, docs/migration.md)."""
        return bool(self._siblings_of(ers))

    def _client_source(self, ers: Object) -> Any:
        view = EphemeralRunnerSetView(ers)
        namespace, spec = view.namespace, view.runner_spec

        async def source() -> ActionsClient:
            return await client_for_runner_spec(self._ctx.github, namespace=namespace, spec=spec)

        return source


def _deletion_started(old: Object, new: Object) -> bool:
    return EphemeralRunnerSetView(old).is_deleting != EphemeralRunnerSetView(new).is_deleting


def _sooner(first: float | None, second: float | None) -> float | None:
    """The earlier of two optional requeue delays."""
    if first is None:
        return second
    return first if second is None else min(first, second)


def setup_ephemeral_runner_set_controller(
    ctx: ControllerContext, *, rate_limiter: RateLimiter | None = None, **options: Any
) -> Controller:
    """Build the EphemeralRunnerSet controller and register it with the context's manager."""
    controller = EphemeralRunnerSetReconciler(ctx, **options).controller(rate_limiter=rate_limiter)
    ctx.manager.add(controller)
    return controller


__all__ = [
    "CleanupFailedError",
    "CleanupPlan",
    "CreateFailedError",
    "EphemeralRunnerSetReconciler",
    "setup_ephemeral_runner_set_controller",
]
