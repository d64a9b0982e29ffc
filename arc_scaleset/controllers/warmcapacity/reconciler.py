"""The warm-pool controller: placeholder pods that keep room for runners (docs/capacity.md, "Warm capacity").

Keys are *pools*, not scale sets: ``Request("", <pool ID>)``. Every AutoscalingRunnerSet with ``warmCapacity`` maps
to the pool of its runner shape (:mod:`.shape`; an update maps the old and the new object, so a scale set whose
shape changed is taken out of its old pool in the same breath as it joins the new one), every placeholder pod to
the pool on its label. A scale set whose template gives no shape maps to its own key, ``Request(ns, name)``: that
pass only says what is wrong. One pass of a pool: its members (an index of the scale-set cache), each member's
ask (``runners``, schedule, forecast, bounded), the pool's size (:mod:`.plan`), the placeholders that exist (a
cache of their own, see below), then create and delete by the plan, and tell: a ``WarmCapacity`` condition on each
member, Events when the size changes and when a placeholder is preempted, and the ``gha_warm_*`` metrics.

Placeholders live in the controller's namespace (a pool is shared across namespaces, so it belongs to none of
them; they are inert, and only the runner's shape crosses into that namespace: :mod:`.placeholder`). They are
cached by an informer of their own, selected by :data:`~arc_scaleset.api.warm_capacity.LABEL_WARM_POOL`: the
manager's pod cache selects ``actions.github.com/scale-set-name``, which a placeholder never carries, so no runner
or listener logic ever sees one (and with that selector off, they are still no runner's: no owner, no runner label).

When a member's EphemeralRunnerSet ``replicas`` rises, the pass first releases as many placeholders that hold
room on a node (:mod:`.handover`), so the runner pods to come find the room free instead of preempting for it.
A preempted placeholder is seen when it goes (its ``DisruptionTarget`` condition, written by kube-scheduler before
it deletes a victim), counted and told; the pass its deletion triggers creates it again under its name, Pending,
which is what asks the node autoscaler for the next node while the runner already runs.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import OrderedDict, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import pydantic

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.constants import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.warm_capacity import (
    CONDITION_WARM_CAPACITY,
    EVENT_WARM_PLACEHOLDER_PREEMPTED,
    EVENT_WARM_POOL_RESIZED,
    LABEL_WARM_POOL,
    WarmCapacity,
)
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.warmcapacity.arrivals import JobArrivals, job_appeared
from arc_scaleset.controllers.warmcapacity.forecast import forecast_runners
from arc_scaleset.controllers.warmcapacity.handover import ReplicaGrowth, replicas_changed, to_release
from arc_scaleset.controllers.warmcapacity.metrics import WarmPoolMetrics
from arc_scaleset.controllers.warmcapacity.placeholder import bound_violations, placeholder_pod
from arc_scaleset.controllers.warmcapacity.plan import (
    MemberWant,
    Placeholder,
    PoolPlan,
    PoolSize,
    member_want,
    placeholder_index,
    plan_pool,
    pool_size,
)
from arc_scaleset.controllers.warmcapacity.report import bound_source, preempted_note, resized_note, size_message
from arc_scaleset.controllers.warmcapacity.schedule import scheduled_runners
from arc_scaleset.controllers.warmcapacity.shape import RunnerShape, ShapeError, runner_shape
from arc_scaleset.controllers.warmcapacity.source import PlaceholderSource
from arc_scaleset.kube.conditions import ConditionStatus, get_condition, remove_condition, set_condition
from arc_scaleset.kube.controller import Controller, Request, Result, Watch
from arc_scaleset.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from arc_scaleset.kube.failures import one_line
from arc_scaleset.kube.informer import Informer, Object, compact
from arc_scaleset.kube.resources import PODS
from arc_scaleset.kube.views import ObjectView
from arc_scaleset.kube.workqueue import RateLimiter

log = logging.getLogger(__name__)

CONTROLLER_NAME: Final = "warmcapacity"
INDEX_WARM_POOL: Final = "warm-pool"
RESIZED: Final = EVENT_WARM_POOL_RESIZED
PREEMPTED: Final = EVENT_WARM_PLACEHOLDER_PREEMPTED
SHAPE_INVALID: Final = "WarmShapeInvalid"
SHAPE_REFUSED: Final = "WarmShapeRefused"
PLACEHOLDERS_REFUSED: Final = "PlaceholdersRefused"
MAX_RESOURCES_FLAG: Final = "--warm-placeholder-max-resources"
RESYNC_SECONDS: Final = 60.0
"""A pool whose members follow a schedule or a forecast is looked at again at the next minute: windows start and
end on minutes, and arrivals come without any event on the pool."""
CONFLICT_RETRY_SECONDS: Final = 0.5
PREEMPTIONS_REMEMBERED: Final = 10_000
"""Preempted placeholders (UIDs) remembered, so one told twice (an update, then its deletion) counts once."""


class PlaceholdersRefusedError(RuntimeError):
    """The API server refused a placeholder (told on the members' condition; the pool's key backs off)."""


def warm_capacity_of(obj: Object) -> WarmCapacity | None:
    """The scale set's ``spec.warmCapacity`` (``None``: not set, or not readable: the CRD schema validates it)."""
    raw = ObjectView(obj).spec.get("warmCapacity")
    if raw is None:
        return None
    try:
        return WarmCapacity.model_validate(raw)
    except pydantic.ValidationError:
        return None


def shape_of(obj: Object) -> RunnerShape:
    """The runner shape of a scale set's template; :class:`ShapeError` when it has none."""
    return runner_shape(ObjectView(obj).spec.get("template") or {})


def pool_of(obj: Object) -> str | None:
    """The pool a scale set is a member of: only one with ``warmCapacity``, not being deleted, with a shape."""
    view = ObjectView(obj)
    if view.is_deleting or warm_capacity_of(obj) is None:
        return None
    try:
        return shape_of(obj).pool_id
    except ShapeError:
        return None


def scale_set_keys(obj: Object) -> Iterable[Request]:
    """The keys a scale set concerns: its pool, or itself when it asks for warm capacity without a shape (to say
    so) or carries a ``WarmCapacity`` condition without asking (to take it away)."""
    pool = pool_of(obj)
    if pool is not None:
        return (Request("", pool),)
    view = ObjectView(obj)
    wants = warm_capacity_of(obj) is not None and not view.is_deleting
    told = get_condition(view.status.get("conditions"), CONDITION_WARM_CAPACITY) is not None
    return (Request(view.namespace, view.name),) if wants or told else ()


@dataclass(frozen=True)
class _Member:
    obj: Object
    warm: WarmCapacity

    @property
    def key(self) -> str:
        view = ObjectView(self.obj)
        return f"{view.namespace}/{view.name}"


class WarmPoolReconciler:
    """See the module docstring."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.namespace = ctx.settings.controller_namespace
        self.scale_sets = ctx.cache(AUTOSCALING_RUNNER_SETS)
        ctx.manager.add_index(AUTOSCALING_RUNNER_SETS, INDEX_WARM_POOL, lambda obj: [p] if (p := pool_of(obj)) else [])
        self.placeholders = Informer(
            ctx.kube, PODS, namespace=self.namespace, label_selector=LABEL_WARM_POOL, clock=ctx.clock, transform=compact
        )
        self.metrics = WarmPoolMetrics(ctx.manager.registry, enabled=ctx.settings.metrics_enabled)
        self.arrivals = JobArrivals(ctx.clock)
        self.growth = ReplicaGrowth(self._pool_of_scale_set)
        # Preemptions seen (placeholder UIDs, per pool) and not yet told, and each pool's size last told.
        self._preemptions: dict[str, dict[str, None]] = defaultdict(dict)
        self._told: OrderedDict[str, None] = OrderedDict()
        # Placeholder name -> the node its preempted predecessor held room on (its replacement keeps off it).
        self._avoid: dict[str, str] = {}
        self._sizes: dict[str, PoolSize] = {}

    def controller(self, *, rate_limiter: RateLimiter | None = None) -> Controller:
        return Controller(
            CONTROLLER_NAME,
            AUTOSCALING_RUNNER_SETS,
            self.reconcile,
            primary_keys=scale_set_keys,
            watches=[
                Watch(EPHEMERAL_RUNNERS, self.arrivals.record, on_update_if=job_appeared),
                Watch(EPHEMERAL_RUNNER_SETS, self.growth.note, on_update_if=replicas_changed),
            ],
            sources=[PlaceholderSource(self.placeholders, self._note_preemption)],
            rate_limiter=rate_limiter,
            clock=self.ctx.clock,
        )

    def _pool_of_scale_set(self, namespace: str, name: str) -> str | None:
        obj = self.scale_sets.get(namespace, name)
        return pool_of(obj) if obj is not None else None

    def _note_preemption(self, pool: str, pod: Object) -> None:
        uid = ObjectView(pod).uid
        if uid in self._told:
            return
        self._told[uid] = None
        if len(self._told) > PREEMPTIONS_REMEMBERED:
            self._told.popitem(last=False)
        self._preemptions[pool][uid] = None
        view = ObjectView(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        if node and len(self._avoid) < PREEMPTIONS_REMEMBERED:
            self._avoid[view.name] = str(node)
        self.metrics.preempted(pool)
        log.info("warm pool %s: placeholder %s gave its room to a runner pod", pool, ObjectView(pod).name)

    # -- the pass -------------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        await self.placeholders.wait_synced()
        if request.namespace:
            return await self._scale_set_without_pool(request)
        return await self._pool(request.name)

    async def _scale_set_without_pool(self, request: Request) -> Result:
        obj = self.scale_sets.get(request.namespace, request.name)
        if obj is None or pool_of(obj) is not None:
            return Result()
        if warm_capacity_of(obj) is None or ObjectView(obj).is_deleting:
            conflict = await self._clear_condition(obj)
        else:
            try:
                shape_of(obj)
                conflict = False
            except ShapeError as exc:
                message = f"no placeholders: the runner template gives no shape to hold room for ({exc})"
                conflict = await self._tell(obj, "False", SHAPE_INVALID, message, warning=True)
        return Result(requeue_after=CONFLICT_RETRY_SECONDS) if conflict else Result()

    async def _pool(self, pool: str) -> Result:
        pods = self.placeholders.store.by_label(LABEL_WARM_POOL, pool)
        await self._release(pool, pods)
        members = self._members(pool)
        now = self.ctx.clock.now()
        shape = shape_of(members[0].obj) if members else None
        bound = self.ctx.settings.warm_placeholder_max_resources
        refused = bound_violations(shape, bound, flag=MAX_RESOURCES_FLAG) if shape is not None else []
        wants = [self._want(member, now) for member in members]
        size = pool_size(wants, cap=self.ctx.settings.warm_pool_max_placeholders)
        if refused:
            size = PoolSize(0, SHAPE_REFUSED, None)
        plan = plan_pool(pool, size.size, [Placeholder.of(pod) for pod in pods])
        failures = await self._apply(pool, shape, plan)
        self.metrics.observe(pool, size=size.size, reason=size.reason, ready=plan.ready, waiting=plan.waiting)
        if not members:
            if not pods:
                self._forget(pool)
            return Result()
        conflict = await self._report(pool, shape, members, wants, size, refused=refused, failures=failures)
        if failures:
            raise PlaceholdersRefusedError(f"warm pool {pool}: {failures[0]}")
        if conflict:
            return Result(requeue_after=CONFLICT_RETRY_SECONDS)
        follows_time = any(m.warm.schedule or m.warm.forecast for m in members)
        return Result(requeue_after=_to_next_minute(now)) if follows_time else Result()

    async def _release(self, pool: str, pods: list[Object]) -> None:
        """Release a placeholder holding room on a node for each runner its members' sets rose by, all at once
        (:mod:`.handover`): counted and told as room runner pods took; each replacement keeps off the node."""
        released = to_release(pool, pods, self.growth.take(pool))
        await asyncio.gather(
            *(
                self.ctx.kube.delete(PODS, ObjectView(p).name, namespace=self.namespace, missing_ok=True)
                for p in released
            )
        )
        for pod in released:
            self._note_preemption(pool, pod)

    def _members(self, pool: str) -> list[_Member]:
        found = []
        for obj in sorted(self.scale_sets.by_index(INDEX_WARM_POOL, pool), key=lambda o: ObjectView(o).key):
            warm = warm_capacity_of(obj)
            if warm is not None and pool_of(obj) == pool:
                found.append(_Member(obj, warm))
        return found

    def _want(self, member: _Member, now: dt.datetime) -> MemberWant:
        warm, view = member.warm, ObjectView(member.obj)
        forecast = 0
        if warm.forecast:
            forecast = forecast_runners(self.arrivals.arrivals(view.namespace, view.name, now), now)
        return member_want(
            member.key,
            runners=warm.runners,
            scheduled=scheduled_runners(warm.schedule or [], now),
            forecast=forecast,
            bound=warm.bound(view.spec.get("maxRunners")),
        )

    async def _apply(self, pool: str, shape: RunnerShape | None, plan: PoolPlan) -> list[str]:
        """Create and delete by ``plan``; the API's refusals of creates, in words (deletes that fail raise)."""
        for name in plan.delete:
            await self.ctx.kube.delete(PODS, name, namespace=self.namespace, missing_ok=True)
        refusals: list[str] = []
        if shape is None:
            return refusals
        for name in plan.create:
            pod = placeholder_pod(
                name=name,
                namespace=self.namespace,
                shape=shape,
                priority_class=self.ctx.settings.warm_priority_class,
                avoid_node=self._avoid.get(name),
            )
            try:
                await self.ctx.kube.create(PODS, pod, namespace=self.namespace)
                self._avoid.pop(name, None)
            except AlreadyExists:
                continue  # made by a pass the cache does not show yet, or still going after a preemption
            except KubeError as exc:
                refusals.append(f"placeholder {name} refused: {one_line(exc)}")
                break  # the next ones would be refused the same way; the key backs off
        return refusals

    # -- telling ---------------------------------------------------------------------------------------

    async def _report(
        self,
        pool: str,
        shape: RunnerShape | None,
        members: list[_Member],
        wants: list[MemberWant],
        size: PoolSize,
        *,
        refused: list[str],
        failures: list[str],
    ) -> bool:
        """Conditions and Events on the members; True when a condition write met a newer object."""
        told_before = self._sizes.get(pool)
        self._sizes[pool] = size
        preemptions = len(self._preemptions.pop(pool, {}))
        described = shape.describe() if shape is not None else ""
        conflict = False
        status: ConditionStatus
        for member, want in zip(members, wants, strict=True):
            if refused:
                status, reason, warning = "False", SHAPE_REFUSED, True
                message = f"no placeholders: the runner shape {'; '.join(refused)}"
            elif failures:
                status, reason, warning = "False", PLACEHOLDERS_REFUSED, True
                message = f"warm pool {pool}: {failures[0]}"
            else:
                status, reason, warning = "True", size.reason, False
                bounded_by = bound_source(member.warm, ObjectView(member.obj).spec.get("maxRunners"))
                message = size_message(pool, described, len(members), size, want, bounded_by)
            conflict |= await self._tell(member.obj, status, reason, message, warning=warning)
            if told_before is not None and told_before.size != size.size and not refused:
                await self._event(member.obj, "Normal", RESIZED, resized_note(pool, told_before, size))
            if preemptions:
                await self._event(member.obj, "Normal", PREEMPTED, preempted_note(pool, preemptions))
        return conflict

    async def _tell(self, obj: Object, status: ConditionStatus, reason: str, message: str, *, warning: bool) -> bool:
        """Set the ``WarmCapacity`` condition where it differs (a Warning Event with it when ``warning``); True
        when the write met a newer object (the pass is repeated shortly)."""
        view = ObjectView(obj)
        conditions = view.status.get("conditions")
        current = get_condition(conditions, CONDITION_WARM_CAPACITY)
        same = current is not None and (current.get("status"), current.get("reason"), current.get("message")) == (
            status,
            reason,
            message,
        )
        if same and current is not None and current.get("observedGeneration") == view.generation:
            return False
        updated = set_condition(
            conditions,
            type=CONDITION_WARM_CAPACITY,
            status=status,
            reason=reason,
            message=message,
            observed_generation=view.generation,
            now=self.ctx.clock.now(),
        )
        if warning and not same:
            await self._event(obj, "Warning", reason, message)
        return await self._write_conditions(obj, updated)

    async def _clear_condition(self, obj: Object) -> bool:
        """Take the ``WarmCapacity`` condition away; True when the write met a newer object."""
        conditions = ObjectView(obj).status.get("conditions")
        if get_condition(conditions, CONDITION_WARM_CAPACITY) is None:
            return False
        return await self._write_conditions(obj, remove_condition(conditions, CONDITION_WARM_CAPACITY))

    async def _write_conditions(self, obj: Object, conditions: list[dict[str, Any]]) -> bool:
        # The scale set's own controller writes the other conditions of the list: the patch carries the
        # resourceVersion read, so a newer list is never overwritten; the pass is repeated against it instead.
        view = ObjectView(obj)
        patch = {"metadata": {"resourceVersion": view.resource_version}, "status": {"conditions": conditions}}
        try:
            await self.ctx.kube.patch(
                AUTOSCALING_RUNNER_SETS, view.name, patch, namespace=view.namespace, subresource="status"
            )
        except Conflict:
            return True
        except NotFound:
            return False
        return False

    async def _event(self, obj: Object, type: str, reason: str, note: str) -> None:
        await self.ctx.events.event(
            obj, type="Warning" if type == "Warning" else "Normal", reason=reason, note=note, action="WarmCapacity"
        )

    def _forget(self, pool: str) -> None:
        self.metrics.forget(pool)
        self._sizes.pop(pool, None)
        self._preemptions.pop(pool, None)
        self._avoid = {name: node for name, node in self._avoid.items() if placeholder_index(pool, name) is None}


def _to_next_minute(now: dt.datetime) -> float:
    return max(1.0, min(RESYNC_SECONDS, 60.0 - now.second - now.microsecond / 1e6 + 0.5))


def setup_warm_capacity_controller(ctx: ControllerContext, *, rate_limiter: RateLimiter | None = None) -> Controller:
    """Build the warm-pool controller and register it with the context's manager."""
    controller = WarmPoolReconciler(ctx).controller(rate_limiter=rate_limiter)
    ctx.manager.add(controller)
    return controller
