"""The AutoscalingListener reconciler: the listener pod of one scale set and everything it needs.

A pass has the shape every controller's has (docs/controllers.md, "The shape of a pass"); its scope is
:class:`.scope.ListenerPass`, its memory of a listener :class:`.scope.ListenerMemory`. The phases, in order, each
continuing in the same pass once its object is in line (docs/controllers.md, "AutoscalingListener"):

1. :meth:`~AutoscalingListenerReconciler._delete`: a deleting listener: every child deleted (:mod:`.deletion`),
   then the finalizer;
2. :meth:`.tenancy.Tenancy.refuse_unless_served`: a listener outside the controller namespace is refused
   before anything its spec names is read; then :meth:`~AutoscalingListenerReconciler._add_finalizer`;
3. :mod:`.takeover`: the AutoscalingRunnerSet the spec names must exist, or this listener is deleted; a
   listener ARC's controller made is left for the AutoscalingRunnerSet controller to replace
   (docs/migration.md); then a listener its scale set did not make is refused (:mod:`.tenancy`). A refused
   listener gets no credentials and no pod (those it has are withdrawn);
4. :meth:`~AutoscalingListenerReconciler._serve`: from here the pass reports on the listener, built with its
   scale set's credentials; :meth:`.tenancy.Tenancy.check_template`: the ``listenerTemplate`` and metadata
   policies, before anything is written;
5. :meth:`.membership.Membership.serve`: a member of a shared listener publishes its config in its group's
   Secret and ends its pass (its group's reconciler keeps the objects of steps 6 and 7; a deleting member's key
   is removed before step 1, :meth:`.membership.Membership.leave`);
6. :meth:`.child_objects.ChildObjects.apply`: ServiceAccount, Role, RoleBinding, proxy and config Secrets;
   :meth:`.standby_objects.StandbyObjects.apply`: with a standby, its Lease, Role and RoleBinding (:mod:`.standby`);
7. :meth:`~AutoscalingListenerReconciler._pod`: the pod (with a standby, each pod of the pair), one step planned
   by :func:`.pod_plan.plan_pod` (:mod:`.pod_steps`);

and, at the end of every pass that served or refused the listener, whatever happened, the status (``Ready``,
``Degraded``; :mod:`.health`, :mod:`.status`), written once and only when it changed.

Bad input (credentials, TLS, a template the policy or the API server rejects, an object in the way) is a Warning
Event on the listener and on its AutoscalingRunnerSet and a ``Ready`` condition saying what is wrong (after a
refusal, ``Degraded`` too, and the listener pod is withdrawn), and the key is retried with backoff. A listener whose
spec cannot be read runs no phase: ``Ready`` and an Event say which field, once (:mod:`.unreadable_spec`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Final

import pydantic

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS, AutoscalingListener
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS, AutoscalingRunnerSet
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import AUTOSCALING_LISTENER_FINALIZER, LABEL_LISTENER_NAME, LABEL_LISTENER_NAMESPACE
from arc_scaleset.api.listener_group import LABEL_GROUP
from arc_scaleset.api.naming import listener_pod_name
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.controllers.autoscalinglistener.child_objects import ChildObjects
from arc_scaleset.controllers.autoscalinglistener.config import uses_vault
from arc_scaleset.controllers.autoscalinglistener.deletion import delete_children
from arc_scaleset.controllers.autoscalinglistener.errors import REFUSALS
from arc_scaleset.controllers.autoscalinglistener.events import ListenerEvents
from arc_scaleset.controllers.autoscalinglistener.health import ListenerHealth
from arc_scaleset.controllers.autoscalinglistener.listener_health import (
    INDEX_RUNNER_SET,
    listener_state_changed,
    runner_set_index,
)
from arc_scaleset.controllers.autoscalinglistener.membership import Membership
from arc_scaleset.controllers.autoscalinglistener.ownership import with_scale_set_credentials
from arc_scaleset.controllers.autoscalinglistener.pod_plan import DELETION_REQUEUE_SECONDS
from arc_scaleset.controllers.autoscalinglistener.pod_steps import CONFLICT_REQUEUE_SECONDS, ListenerPod
from arc_scaleset.controllers.autoscalinglistener.restart import RestartBackoff, listener_running
from arc_scaleset.controllers.autoscalinglistener.scope import ListenerMemory, ListenerPass
from arc_scaleset.controllers.autoscalinglistener.standby_leases import StandbyLeaseWatch
from arc_scaleset.controllers.autoscalinglistener.standby_objects import StandbyObjects
from arc_scaleset.controllers.autoscalinglistener.status import ListenerReport
from arc_scaleset.controllers.autoscalinglistener.takeover import ScaleSetClaim
from arc_scaleset.controllers.autoscalinglistener.tenancy import Tenancy
from arc_scaleset.controllers.autoscalinglistener.unreadable_spec import (
    deletion_skeleton,
    unreadable_spec_message,
    unreadable_spec_report,
)
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.errors import ConfigurationError, InvalidSpec, first_spec_error
from arc_scaleset.controllers.failure_report import ReconcileFailureReporter
from arc_scaleset.controllers.metrics import scale_set_labels
from arc_scaleset.controllers.reconcile_pass import ObjectMemory, Phase, gather, run_phases
from arc_scaleset.controllers.referenced_objects import listener_references
from arc_scaleset.kube.controller import Controller, Request, Result, Watch
from arc_scaleset.kube.errors import Conflict
from arc_scaleset.kube.failures import pass_failure
from arc_scaleset.kube.finalizers import add_finalizer, has_finalizer, remove_finalizer
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.resources import PODS, ROLE_BINDINGS, ROLES, SERVICE_ACCOUNTS
from arc_scaleset.kube.views import ObjectView
from arc_scaleset.kube.workqueue import RateLimiter

log = logging.getLogger(__name__)

CONTROLLER_NAME: Final = "autoscalinglistener"


def rbac_to_listener(obj: Object) -> Iterable[Request]:
    """A listener Role or RoleBinding (scale set namespace) concerns the listener its labels name."""
    view = ObjectView(obj)
    namespace, name = view.label(LABEL_LISTENER_NAMESPACE), view.label(LABEL_LISTENER_NAME)
    return (Request(namespace, name),) if namespace and name else ()


class AutoscalingListenerReconciler:
    """Reconciles AutoscalingListeners; build the controller with :meth:`controller`."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.listeners = ctx.cache(AUTOSCALING_LISTENERS)
        self.pods = ctx.cache(PODS)
        self._child_caches = {
            PODS: self.pods,
            SERVICE_ACCOUNTS: ctx.cache(SERVICE_ACCOUNTS),
            ROLES: ctx.cache(ROLES),
            ROLE_BINDINGS: ctx.cache(ROLE_BINDINGS),
        }
        with contextlib.suppress(ValueError):  # another reconciler on this manager added it already
            ctx.manager.add_index(AUTOSCALING_LISTENERS, INDEX_RUNNER_SET, runner_set_index)
        settings = ctx.settings
        self.memory: ObjectMemory[ListenerMemory] = ObjectMemory(
            lambda: ListenerMemory(
                RestartBackoff(base=settings.listener_restart_backoff_base, cap=settings.listener_restart_backoff_cap)
            )
        )
        # What each listener is built from (credentials, CA, proxy Secrets), watched so a rotation reaches it in
        # seconds; the context's, shared by every controller (controllers/referenced_objects.py).
        self.references = ctx.references
        scale_sets = ctx.cache(AUTOSCALING_RUNNER_SETS)
        self.events = events = ListenerEvents(ctx.events, scale_sets)
        self.claim = ScaleSetClaim(ctx.kube, scale_sets)
        self.tenancy = Tenancy(ctx, pods=self.pods, events=events)
        self.children = ChildObjects(ctx, self._child_caches, events)
        # A takeover changes no pod: this watch brings it to the status, and passes read the Lease from it.
        excluded = settings.exclude_label_prefixes
        self.standby_leases = StandbyLeaseWatch(
            ctx.kube, namespace=settings.controller_namespace, excluded_label_prefixes=excluded, clock=ctx.clock
        )
        self.standby = StandbyObjects(ctx, self._child_caches, self.children, self.standby_leases)
        self.health = ListenerHealth(ctx, runner_sets=ctx.cache(EPHEMERAL_RUNNER_SETS), events=events)
        self.pod = ListenerPod(ctx, pods=self.pods, children=self.children, health=self.health, events=events)
        self.membership = Membership(ctx, pods=self.pods, children=self.children, health=self.health, events=events)
        self.phases: tuple[Phase[ListenerPass], ...] = (
            self.membership.leave,  # a member's key in its group's config Secret goes first
            self._delete,
            self.tenancy.refuse_unless_served,  # outside the controller namespace: before anything is read
            self._add_finalizer,
            self.claim.find_scale_set,
            self.claim.leave_arc_listener,
            self.tenancy.refuse_unless_served,  # and now: not made by the scale set it names
            self._serve,
            self.tenancy.check_template,
            self.membership.serve,  # a member ends its pass here: its group's reconciler keeps the objects below
            self.children.apply,
            self.standby.apply,
            self._pod,
        )

    def controller(self, *, rate_limiter: RateLimiter | None = None) -> Controller:
        """The controller running this reconciler; ``rate_limiter``: its workqueue's (``None``: the default)."""
        return Controller(
            CONTROLLER_NAME,
            AUTOSCALING_LISTENERS,
            self.reconcile,
            owns=[PODS, SERVICE_ACCOUNTS],
            watches=[
                (ROLES, rbac_to_listener),
                (ROLE_BINDINGS, rbac_to_listener),
                Watch(EPHEMERAL_RUNNER_SETS, self._runner_set_to_listeners, on_update_if=listener_state_changed),
                (PODS, self._group_pod_to_members),
            ],
            sources=[self.references, self.standby_leases, self.children.secrets],
            concurrency=self.ctx.settings.scale_set_max_concurrent_reconciles,
            rate_limiter=rate_limiter,
            clock=self.ctx.clock,
            failure_reporter=ReconcileFailureReporter(self.ctx, AUTOSCALING_LISTENERS),
            self_reported=(ConfigurationError,),  # its own condition and Event (see reconcile)
        )

    def _runner_set_to_listeners(self, obj: Object) -> Iterable[Request]:
        """An EphemeralRunnerSet concerns the listeners that scale it (whose state it carries)."""
        view = ObjectView(obj)
        listeners = self.listeners.by_index(INDEX_RUNNER_SET, f"{view.namespace}/{view.name}")
        return [Request.for_object(listener) for listener in listeners]

    def _group_pod_to_members(self, obj: Object) -> Iterable[Request]:
        """A shared listener's pod concerns its members (whose ``Ready`` it decides); other pods concern none."""
        group = ObjectView(obj).label(LABEL_GROUP)
        if not group:
            return ()
        return [Request.for_object(listener) for listener in self.listeners.by_label(LABEL_GROUP, group)]

    # -- the pass -------------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        obj = gather(self.listeners, self.memory, request)
        if obj is None:
            self.references.forget(request)
            return Result()
        view = AutoscalingListenerView(obj)
        try:
            listener = AutoscalingListener.from_object(obj)
        except pydantic.ValidationError as exc:
            return await self._unreadable(request, obj, exc)
        scope = ListenerPass(request, obj, view, listener, self.memory.slot(request, view.uid))
        try:
            return await run_phases(scope, self.phases)
        except Conflict:
            if scope.report is None:
                raise
            return Result(requeue_after=CONFLICT_REQUEUE_SECONDS)
        except asyncio.CancelledError:
            # Stopping (possibly because leadership was lost): another process may already own the status.
            if scope.report is not None:
                scope.report.cancelled = True
            raise
        except Exception as exc:
            if scope.report is not None:
                await self._report_error(scope, exc)
            raise
        finally:
            if scope.report is not None and not scope.report.cancelled:
                scope.report.restarts = scope.memory.restart_state(now=self.ctx.clock.monotonic())
                await self.health.write_status(scope)

    async def _unreadable(self, request: Request, obj: Object, exc: pydantic.ValidationError) -> Result:
        """A listener whose spec cannot be read (:mod:`.unreadable_spec`): deleted all the same when it is being
        deleted; else ``Ready`` says why, and a Warning Event when that is news; not requeued (its edit wakes it)."""
        view = AutoscalingListenerView(obj)
        memory = self.memory.slot(request, view.uid)
        if view.is_deleting:
            scope = ListenerPass(request, obj, view, deletion_skeleton(view), memory)
            return await run_phases(scope, (self.membership.leave, self._delete))
        pod = self.pods.get(view.namespace, listener_pod_name(view.name))
        message = unreadable_spec_message(exc)
        restarts = memory.restart_state(now=self.ctx.clock.monotonic())
        report = unreadable_spec_report(view, message, pod_running=listener_running(pod or {}), restarts=restarts)
        if await self.health.write_report(obj, memory, report):
            log.warning("AutoscalingListener %s: %s", request, message)
            # On the listener alone: the scale set its unread spec names was never checked against it (tenancy).
            await self.events.on_listener(obj, "Warning", InvalidSpec.reason, message, action="Read")
        return Result()

    async def _report_error(self, scope: ListenerPass, exc: Exception) -> None:
        """Put the error that ends a reporting pass in its report; bad input is also an Event, and after a
        refusal (:data:`.errors.REFUSALS`) the listener's pod is withdrawn."""
        assert scope.report is not None
        if not isinstance(exc, ConfigurationError):
            # Retried by the controller, which reports it once it persists: the status says the same by then.
            scope.report.failed, scope.report.failure = True, pass_failure(exc)
            return
        scope.report.problem = (exc.reason, exc.message)
        if isinstance(exc, REFUSALS):
            scope.report.refused = True
            await self.tenancy.withdraw(scope, credentials=False)
            await self.membership.withdraw(scope)
        await self.events.warning(scope.obj, exc.reason, exc.message, action="Configure")

    # -- the phases kept here (the others are in their modules) ---------------------------------------

    async def _delete(self, scope: ListenerPass) -> Result | None:
        """A deleting listener: its children deleted (:func:`.deletion.delete_children`), then its finalizer."""
        if not scope.view.is_deleting:
            return None
        if not has_finalizer(scope.obj, AUTOSCALING_LISTENER_FINALIZER):
            return Result()
        listener = scope.listener
        self.children.secrets.forget(listener.name)
        remaining = await delete_children(self.ctx.kube, self._child_caches, scope.obj, listener)
        self.ctx.metrics.set_listener_running(
            scale_set_labels(listener.name, listener.namespace, listener.metadata.labels), False
        )
        if remaining:
            return Result(requeue_after=DELETION_REQUEUE_SECONDS)
        self.memory.forget(scope.request)
        await remove_finalizer(self.ctx.kube, AUTOSCALING_LISTENERS, scope.obj, AUTOSCALING_LISTENER_FINALIZER)
        return Result()

    async def _add_finalizer(self, scope: ListenerPass) -> Result | None:
        if has_finalizer(scope.obj, AUTOSCALING_LISTENER_FINALIZER):
            return None
        await add_finalizer(self.ctx.kube, AUTOSCALING_LISTENERS, scope.obj, AUTOSCALING_LISTENER_FINALIZER)
        return Result()

    async def _serve(self, scope: ListenerPass) -> None:
        """From here the pass reports on the listener (its status is written at the end, whatever happens), and
        the listener is the one its scale set's credentials make (:func:`.ownership.with_scale_set_credentials`)."""
        assert scope.scale_set is not None
        live_pod = self.pods.get(scope.view.namespace, listener_pod_name(scope.view.name))
        scope.report = ListenerReport(generation=scope.view.generation, pod_running=listener_running(live_pod or {}))
        scope.listener = with_scale_set_credentials(scope.listener, _parse_scale_set(scope.scale_set))
        self.references.track(scope.request, listener_references(scope.listener))

    async def _pod(self, scope: ListenerPass) -> Result:
        """The pod step (:mod:`.pod_steps`); with a vault, back every interval: nothing watches a vault, and a
        changed secret there changes the config Secret, hence the pod."""
        result = await self.pod.step(scope)
        if uses_vault(scope.listener):
            interval = self.ctx.settings.vault_refresh_interval
            if result.requeue_after is None or result.requeue_after > interval:
                result = Result(requeue_after=interval)
        return result


def _parse_scale_set(obj: Object) -> AutoscalingRunnerSet:
    try:
        return AutoscalingRunnerSet.from_object(obj)
    except pydantic.ValidationError as exc:
        view = ObjectView(obj)
        raise InvalidSpec(
            f"AutoscalingRunnerSet {view.namespace}/{view.name} cannot be read: {first_spec_error(exc)}"
        ) from None


def setup_autoscaling_listener_controller(
    ctx: ControllerContext, *, rate_limiter: RateLimiter | None = None
) -> Controller:
    """Build the AutoscalingListener controller and register it with the context's manager."""
    controller = AutoscalingListenerReconciler(ctx).controller(rate_limiter=rate_limiter)
    ctx.manager.add(controller)
    return controller
