"""The shared-listener reconciler: a group's pod, ServiceAccount, Roles, RoleBindings and config Secret
(docs/controllers.md, "Shared listeners").

Keyed by group ID (``<controller namespace>/<group>``): every event of a member AutoscalingListener (but an update of
its status alone: :func:`.members.concerns_group`), or of an object carrying the group label, queues its group. A
pass has the shape of every controller's (:mod:`arc_scaleset.controllers.reconcile_pass`); its scope is
:class:`GroupPass`. The phases:

1. :meth:`~SharedListenerReconciler._plan`: the members from the cache (:class:`.members.MemberVerdicts`), the
   config Secret's keys (read once per change: :mod:`arc_scaleset.controllers.group_config_secrets`), and the
   plan (:func:`.plan.plan_group`);
2. :meth:`~SharedListenerReconciler._delete_all`: with no member left, every group object deleted (the Roles in
   the scale set namespace found by their label), until none is left;
3. :meth:`~SharedListenerReconciler._apply`: each object created, or its metadata merged and its rules or
   subjects replaced; an object under a group name without the group's label, or a binding of another Role, is in
   the way and left alone (:func:`.plan.in_the_way`);
4. :meth:`~SharedListenerReconciler._prune`: config Secret keys of listeners that are no longer members removed
   (the listener process stops their sessions);
5. :meth:`~SharedListenerReconciler._pod`: one step (:func:`.plan.plan_group_pod`), with a restart backoff as a
   per-set listener's.

There is no status of a group: each member's AutoscalingListener reports the group's pod in its ``Ready``
(:mod:`arc_scaleset.controllers.autoscalinglistener.membership`), and a failed pod or an object in the way of the
group's is a Warning Event on each.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.listener_group import LABEL_GROUP, group_object_name
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.controllers.autoscalinglistener.deletion import delete_owned
from arc_scaleset.controllers.autoscalinglistener.restart import RestartBackoff, listener_pod_failure
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.drift import alignment_patch
from arc_scaleset.controllers.reconcile_pass import ObjectMemory, Phase, run_phases
from arc_scaleset.controllers.sharedlistener.members import Member, MemberVerdicts, concerns_group
from arc_scaleset.controllers.sharedlistener.plan import (
    Desired,
    GroupPlan,
    GroupPodAction,
    GroupPodStep,
    in_the_way,
    is_group_object,
    plan_group,
    plan_group_pod,
)
from arc_scaleset.kube.controller import Controller, Request, Result
from arc_scaleset.kube.errors import AlreadyExists, Conflict
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.resources import PODS, ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS, Resource
from arc_scaleset.kube.views import ObjectView
from arc_scaleset.kube.workqueue import RateLimiter

log = logging.getLogger(__name__)

CONTROLLER_NAME: Final = "sharedlistener"
WAIT_SECONDS: Final = 1.0
"""How soon to look again at something that is on its way (a deletion; a member's first config)."""
CONFLICT_REQUEUE_SECONDS: Final = 0.5
_CACHED: Final = (PODS, SERVICE_ACCOUNTS, ROLES, ROLE_BINDINGS)


class GroupObjectInTheWay(Exception):  # noqa: N818 - reads as what it reports
    """An object under a group object's name is not the group's; it is left untouched (retried with backoff)."""


@dataclass
class GroupPass:
    """The scope of one pass over one group."""

    request: Request
    backoff: RestartBackoff
    members: list[Member] = field(default_factory=list)
    secret: Object | None = None
    plan: GroupPlan = field(default_factory=GroupPlan)

    @property
    def group(self) -> str:
        return self.request.name


class SharedListenerReconciler:
    """Reconciles shared listeners; build the controller with :meth:`controller`."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.namespace = ctx.settings.controller_namespace
        self.listeners = ctx.cache(AUTOSCALING_LISTENERS)
        self.scale_sets = ctx.cache(AUTOSCALING_RUNNER_SETS)
        self.caches = {resource: ctx.cache(resource) for resource in _CACHED}
        self.verdicts = MemberVerdicts()
        settings = ctx.settings
        self.memory: ObjectMemory[RestartBackoff] = ObjectMemory(
            lambda: RestartBackoff(
                base=settings.listener_restart_backoff_base, cap=settings.listener_restart_backoff_cap
            )
        )
        self.phases: tuple[Phase[GroupPass], ...] = (self._plan, self._delete_all, self._apply, self._prune, self._pod)

    def controller(self, *, rate_limiter: RateLimiter | None = None) -> Controller:
        """The controller running this reconciler; ``rate_limiter``: its workqueue's (``None``: the default)."""
        return Controller(
            CONTROLLER_NAME,
            AUTOSCALING_LISTENERS,
            self.reconcile,
            primary_keys=self._group_of,
            primary_update_if=concerns_group,
            watches=[(resource, self._group_of) for resource in _CACHED],
            sources=[self.ctx.group_secret_watch],
            rate_limiter=rate_limiter,
            clock=self.ctx.clock,
        )

    def _group_of(self, obj: Object) -> Iterable[Request]:
        """An object labelled with a group concerns that group (keyed in the controller namespace)."""
        group = ObjectView(obj).label(LABEL_GROUP)
        return (Request(self.namespace, group),) if group else ()

    def _scale_set_of(self, listener: Mapping[str, Any]) -> Object | None:
        view = AutoscalingListenerView(listener)
        return self.scale_sets.get(view.scale_set_namespace, view.scale_set_name)

    async def reconcile(self, request: Request) -> Result:
        scope = GroupPass(request, self.memory.slot(request, request.name))
        try:
            return await run_phases(scope, self.phases)
        except Conflict:
            # A write raced the cache (a Role or binding written from an older version): look again at once.
            return Result(requeue_after=CONFLICT_REQUEUE_SECONDS)
        except GroupObjectInTheWay as exc:
            # A group has no status of its own: its members are where users look (retried with backoff).
            for member in scope.members:
                await self.ctx.events.event(
                    member.obj, type="Warning", reason="ObjectInTheWay", note=str(exc), action="Configure"
                )
            raise

    # -- the phases ---------------------------------------------------------------------------------

    async def _plan(self, scope: GroupPass) -> None:
        group = scope.group
        # The Secret first, the members after: a member publishes its key only once the cache shows it, so every
        # key read here belongs to a listener the cache already holds, and no new member's key is pruned.
        secret = await self.ctx.group_secrets.get(group_object_name(group))
        scope.secret = secret if secret is not None and is_group_object(secret, group) else None
        candidates = self.listeners.by_label(LABEL_GROUP, group)
        scope.members = self.verdicts.select(
            candidates, group=group, controller_namespace=self.namespace, scale_set_of=self._scale_set_of
        )
        published = list((scope.secret or {}).get("data") or {})
        scope.plan = plan_group(
            group, scope.members, published=published, controller_namespace=self.namespace, settings=self.ctx.settings
        )

    async def _delete_all(self, scope: GroupPass) -> Result | None:
        """With no member left: every object of the group deleted (each as read: a UID precondition)."""
        if not scope.plan.delete_all:
            return None
        remaining = 0
        for resource, obj in self._group_objects(scope):
            view = ObjectView(obj)
            remaining += 1
            if not view.is_deleting:
                await delete_owned(self.ctx.kube, resource, view.namespace, view.name, uid=view.uid)
        if remaining:
            return Result(requeue_after=WAIT_SECONDS)
        self.memory.forget(scope.request)
        return Result()

    def _group_objects(self, scope: GroupPass) -> list[tuple[Resource, Object]]:
        """The group's objects that exist: the cached kinds by label (in any namespace), its Secret as read."""
        found = [
            (resource, obj)
            for resource, cache in self.caches.items()
            for obj in cache.by_label(LABEL_GROUP, scope.group)
        ]
        return found + ([(SECRETS, scope.secret)] if scope.secret is not None else [])

    async def _apply(self, scope: GroupPass) -> None:
        for desired in scope.plan.objects:
            view = ObjectView(desired.body)
            live = scope.secret if desired.resource is SECRETS else self.caches[desired.resource].get(*view.key)
            await self._ensure(scope, desired, live)

    async def _ensure(self, scope: GroupPass, desired: Desired, live: Object | None) -> None:
        """Create ``desired``, or merge its metadata into ``live`` and replace its drifted ``replace`` fields."""
        want, kube = ObjectView(desired.body), self.ctx.kube
        if live is None:
            with contextlib.suppress(AlreadyExists):
                self._written(desired, await kube.create(desired.resource, desired.body, namespace=want.namespace))
                return
            live = await kube.get(desired.resource, want.name, namespace=want.namespace)
        refusal = in_the_way(live, desired.body, group=scope.group)
        if refusal is not None:
            raise GroupObjectInTheWay(refusal)
        patch = alignment_patch(
            live,
            desired.body,
            replace=desired.replace,
            excluded_label_prefixes=self.ctx.settings.exclude_label_prefixes,
        )
        if patch is not None:
            self._written(desired, await kube.patch(desired.resource, want.name, patch, namespace=want.namespace))

    def _written(self, desired: Desired, obj: Object) -> None:
        """A write's answer: the config Secret's is kept for the next passes' reads."""
        if desired.resource is SECRETS:
            self.ctx.group_secrets.written(obj)

    async def _prune(self, scope: GroupPass) -> None:
        """Remove the keys of listeners that are no longer members: the listener process ends their sessions."""
        if scope.plan.prune and scope.secret is not None:
            # Against the version read: a key published since then is not dropped on the strength of an old read.
            version = ObjectView(scope.secret).resource_version
            patch = {"metadata": {"resourceVersion": version}, "data": dict.fromkeys(scope.plan.prune)}
            name = group_object_name(scope.group)
            self.ctx.group_secrets.written(await self.ctx.kube.patch(SECRETS, name, patch, namespace=self.namespace))

    async def _pod(self, scope: GroupPass) -> Result:
        desired, name = scope.plan.pod, group_object_name(scope.group)
        live = self.caches[PODS].get(self.namespace, name)
        now = self.ctx.clock.monotonic()
        step = plan_group_pod(
            live,
            desired,
            group=scope.group,
            failure=None if live is None else listener_pod_failure(live, now=self.ctx.clock.now()),
            backoff_remaining=scope.backoff.remaining(now=now),
        )
        return await self._execute(scope, step, desired, live)

    async def _execute(
        self, scope: GroupPass, step: GroupPodStep, desired: dict[str, Any] | None, live: Object | None
    ) -> Result:
        """Carry out the pod step."""
        execute = {
            GroupPodAction.NOTHING: self._nothing,
            GroupPodAction.IN_THE_WAY: self._in_the_way,
            GroupPodAction.CREATE: self._create,
            GroupPodAction.KEEP: self._keep,
            GroupPodAction.WAIT_BACKOFF: self._wait,
            GroupPodAction.WAIT_TERMINATING: self._wait,
            GroupPodAction.REMOVE: self._replace,
            GroupPodAction.RECREATE: self._replace,
            GroupPodAction.REPLACE_FAILED: self._replace,
        }[step.action]
        return await execute(scope, step, _Pods(desired, live))

    async def _nothing(self, scope: GroupPass, step: GroupPodStep, pods: _Pods) -> Result:
        # While members wait for their first config to be published, look again soon: the Secret's watch runs
        # only where this controller leads, and a member's first key is what makes the pod wanted.
        return Result(requeue_after=WAIT_SECONDS) if scope.members else Result()

    async def _in_the_way(self, scope: GroupPass, step: GroupPodStep, pods: _Pods) -> Result:
        raise GroupObjectInTheWay(step.why)

    async def _create(self, scope: GroupPass, step: GroupPodStep, pods: _Pods) -> Result:
        with contextlib.suppress(AlreadyExists):  # the cache is behind: the next pass sees the pod
            await self.ctx.kube.create(PODS, pods.wanted, namespace=self.namespace)
        return Result()

    async def _keep(self, scope: GroupPass, step: GroupPodStep, pods: _Pods) -> Result:
        await self._ensure(scope, Desired(PODS, pods.wanted), pods.existing)
        return Result(requeue_after=self.ctx.settings.scale_set_verify_interval)

    async def _wait(self, scope: GroupPass, step: GroupPodStep, pods: _Pods) -> Result:
        return Result(requeue_after=step.requeue_after or WAIT_SECONDS)

    async def _replace(self, scope: GroupPass, step: GroupPodStep, pods: _Pods) -> Result:
        """``REMOVE``, ``RECREATE``, ``REPLACE_FAILED``: the live pod deleted; a failure counted, once per pod, and
        reported on every member (as a Warning Event), the next pod delayed by the group's backoff."""
        failure, delay, live = step.failure, 0.0, ObjectView(pods.existing)
        if failure is not None and not scope.backoff.is_recorded(pod_uid=live.uid):
            now = self.ctx.clock.monotonic()
            delay = scope.backoff.record_failure(
                pod_uid=live.uid, now=now, ran_for=failure.ran_for, message=failure.message
            )
            note = f"shared listener pod {live.name}: {failure.message}; recreating it in {delay:.0f}s"
            for member in scope.members:
                await self.ctx.events.event(
                    member.obj, type="Warning", reason=failure.reason, note=note, action="Recreate"
                )
        force = failure is not None and failure.force_delete
        await delete_owned(self.ctx.kube, PODS, live.namespace, live.name, uid=live.uid, force=force)
        if step.why:
            log.info("shared listener %s: recreating pod %s: %s", scope.group, live.name, step.why)
        return Result(requeue_after=max(delay, WAIT_SECONDS))


@dataclass(frozen=True)
class _Pods:
    """The desired pod (``None``: none is wanted) and the live one (``None``: there is none) of one step."""

    desired: dict[str, Any] | None
    live: Object | None

    @property
    def wanted(self) -> dict[str, Any]:
        assert self.desired is not None, "this step is planned only when a pod is wanted"
        return self.desired

    @property
    def existing(self) -> Object:
        assert self.live is not None, "this step is planned only when a pod exists"
        return self.live


def setup_shared_listener_controller(ctx: ControllerContext, *, rate_limiter: RateLimiter | None = None) -> Controller:
    """Build the shared-listener controller and register it with the context's manager."""
    controller = SharedListenerReconciler(ctx).controller(rate_limiter=rate_limiter)
    ctx.manager.add(controller)
    return controller
