"""Capacity truth on the EphemeralRunnerSet: gather :mod:`.capacity`'s inputs from the caches, publish its answer.

Where each input comes from (docs/capacity.md):

- ``maxRunners``: the set's AutoscalingRunnerSet (its controller owner); the controller's
  ``--max-runners-ceiling`` when it has none;
- one runner pod: built exactly as the next runner's would be (:func:`.template_check.dry_run_pod`);
- the namespace's ResourceQuotas: a cache of them (the set is reconciled when one changes);
- the set's runner pods (named after its EphemeralRunners) and the namespace's warm-capacity placeholders
  (:data:`~arc_scaleset.api.warm_capacity.LABEL_WARM_POOL`; they live in the controller namespace, so
  this matters only to a scale set there): the pod cache the EphemeralRunner controller keeps;
- unschedulable runners: a pod whose ``PodScheduled`` condition has been ``False``/``Unschedulable`` for longer
  than ``--unschedulable-runner-bound``;
- node room, with ``--capped-node-room`` only: the cluster's nodes and the pods bound to them
  (:mod:`.node_room_source`, a source of the controller: :meth:`CapacityPublisher.sources`).

The answer goes to ``status.advertisedCapacity`` with the ``CapacityLimited`` condition, in one status write
conflict-checked (the write is done only when either changes, which is rare; the ``Degraded`` condition written
earlier in the same pass is kept). Both the assessment and the write are made against the set as this
controller's last status write returned it while the cache shows a version it replaced (``OwnWrites``), else as the
cache shows it, and only after a refusal (the set changed meanwhile) against a fresh read: a new set's capacity is
one request, not a read and a write, on the sets' one client bucket, and a pass that starts before the cache shows
the write does not write it again (issue 30). The listener reads the figure from the set its own patches return,
and sends ``min(maxRunners, advertisedCapacity)`` to the Actions service with its next poll (docs/listener.md).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import CONDITION_CAPACITY_LIMITED
from arc_scaleset.api.warm_capacity import LABEL_WARM_POOL
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunnerset.capacity import Capacity, CapacityInputs, assess_capacity
from arc_scaleset.controllers.ephemeralrunnerset.node_room_source import NodeRoomSource
from arc_scaleset.controllers.ephemeralrunnerset.template_check import dry_run_pod
from arc_scaleset.controllers.own_writes import OwnWrites
from arc_scaleset.controllers.runner_classification import RunnerStates
from arc_scaleset.kube.client import PatchType
from arc_scaleset.kube.conditions import ConditionStatus, get_condition, set_condition
from arc_scaleset.kube.controller import Request, Source
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.ownerrefs import controller_of
from arc_scaleset.kube.resources import PODS, RESOURCE_QUOTAS
from arc_scaleset.kube.retry import retry_on_conflict
from arc_scaleset.kube.views import ObjectView, sequence

log = logging.getLogger(__name__)

STATUS_FIELD: Final = "advertisedCapacity"
_FINISHED: Final = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class RunnerPods:
    """The set's runner pods as capacity sees them, and when the next one passes the unschedulable bound."""

    holding_quota: int
    scheduled: int
    unschedulable_past_bound: int
    next_bound_in: float | None


def runner_pods(pods: Sequence[Mapping[str, Any]], *, now: dt.datetime, bound: float) -> RunnerPods:
    """Count ``pods`` (the set's runner pods): unfinished, on a node, unschedulable for longer than ``bound``."""
    holding = scheduled = past = 0
    next_in: float | None = None
    for pod in pods:
        view = ObjectView(pod)
        if view.status.get("phase") in _FINISHED:
            continue
        holding += 1
        if (pod.get("spec") or {}).get("nodeName"):
            scheduled += 1
            continue
        since = _unschedulable_since(view.status)
        if since is None:
            continue
        remaining = bound - (now - since).total_seconds()
        if remaining <= 0:
            past += 1
        else:
            next_in = remaining if next_in is None else min(next_in, remaining)
    return RunnerPods(holding, scheduled, past, next_in)


def _unschedulable_since(status: Mapping[str, Any]) -> dt.datetime | None:
    condition = get_condition(sequence(status.get("conditions")), "PodScheduled")
    if condition is None or condition.get("status") != "False" or condition.get("reason") != "Unschedulable":
        return None
    try:
        return dt.datetime.fromisoformat(str(condition.get("lastTransitionTime", "")).replace("Z", "+00:00"))
    except ValueError:
        return None


def capacity_changes(
    ers: Mapping[str, Any], capacity: Capacity, *, now: dt.datetime
) -> tuple[int, list[dict[str, Any]]] | None:
    """``(advertisedCapacity, conditions)`` to write on ``ers``, or ``None`` when both already say so."""
    view = ObjectView(ers)
    conditions = sequence(view.status.get("conditions"))
    existing = get_condition(conditions, CONDITION_CAPACITY_LIMITED)
    status: ConditionStatus = "True" if capacity.limited else "False"
    message = capacity.message or "the set advertises its maxRunners: no quota or node limit lowers it"
    same_condition = existing is not None and (
        existing.get("status"),
        existing.get("reason"),
        existing.get("message"),
    ) == (status, capacity.reason, message)
    if view.status.get(STATUS_FIELD) == capacity.advertised and (
        same_condition or (existing is None and not capacity.limited)
    ):
        return None
    updated = set_condition(
        conditions,
        type=CONDITION_CAPACITY_LIMITED,
        status=status,
        reason=capacity.reason,
        message=message,
        observed_generation=view.generation,
        now=now,
    )
    return capacity.advertised, updated


INDEX_PLACEHOLDER_NAMESPACE: Final = "warm-placeholder-namespace"
"""Pods by namespace, only those labelled as warm-pool placeholders (:data:`LABEL_WARM_POOL`): a pass reads its
namespace's few placeholders without going over every runner pod of the namespace's sets."""


def placeholder_namespace_index(pod: Mapping[str, Any]) -> Iterable[str]:
    """The index function of :data:`INDEX_PLACEHOLDER_NAMESPACE`."""
    view = ObjectView(pod)
    return (view.namespace,) if LABEL_WARM_POOL in view.labels else ()


class CapacityPublisher:
    """Assesses a set's capacity from the caches and keeps ``status.advertisedCapacity`` and ``CapacityLimited``
    in step (see the module docstring). Create it during setup: it asks for its caches then."""

    def __init__(self, ctx: ControllerContext) -> None:
        self._ctx = ctx
        self._pods = ctx.cache(PODS)
        with contextlib.suppress(ValueError):  # another publisher on this manager added it already
            ctx.manager.add_index(PODS, INDEX_PLACEHOLDER_NAMESPACE, placeholder_namespace_index)
        self.quotas = ctx.cache(RESOURCE_QUOTAS)
        self._scale_sets = ctx.cache(AUTOSCALING_RUNNER_SETS)
        self._node_room: NodeRoomSource | None = None

    def sources(self) -> list[Source]:
        """The controller's sources for capacity: node room with ``--capped-node-room`` (a fresh one per
        controller: a controller runs once), else none."""
        if not self._ctx.settings.capped_node_room:
            return []
        sets = self._ctx.cache(EPHEMERAL_RUNNER_SETS)

        def every_set() -> list[Request]:
            return [Request(ObjectView(ers).namespace, ObjectView(ers).name) for ers in sets.list()]

        self._node_room = NodeRoomSource(self._ctx.kube, clock=self._ctx.clock, sets=every_set)
        return [self._node_room]

    def assess(self, ers: Object, states: RunnerStates) -> tuple[Capacity, float | None]:
        """The set's capacity now, and the seconds until a pending pod passes the bound (``None``: none)."""
        view = ObjectView(ers)
        settings = self._ctx.settings
        pods = [pod for runner in states.all() if (pod := self._pods.get(view.namespace, runner.name)) is not None]
        counted = runner_pods(pods, now=self._ctx.clock.now(), bound=settings.unschedulable_runner_bound)
        runner_pod = dry_run_pod(
            ers, exclude_label_prefixes=settings.exclude_label_prefixes, version=settings.build_version
        )
        room = self._node_room.room(runner_pod) if self._node_room is not None else None
        inputs = CapacityInputs(
            max_runners=self._max_runners(ers),
            runner_pod=runner_pod,
            quotas=self.quotas.list(view.namespace),
            runners_holding_quota=counted.holding_quota,
            placeholder_pods=self._pods.by_index(INDEX_PLACEHOLDER_NAMESPACE, view.namespace),
            unschedulable_past_bound=counted.unschedulable_past_bound,
            scheduled_runners=counted.scheduled,
            node_room=room.runners if room is not None else None,
            capped_nodes=room.nodes if room is not None else 0,
        )
        return assess_capacity(inputs), counted.next_bound_in

    def _max_runners(self, ers: Object) -> int:
        ceiling = self._ctx.settings.max_runners_ceiling
        owner = controller_of(ers)
        if owner is None or owner.get("kind") != AUTOSCALING_RUNNER_SETS.kind:
            return ceiling
        scale_set = self._scale_sets.get(ObjectView(ers).namespace, str(owner.get("name", "")))
        value = ((scale_set or {}).get("spec") or {}).get("maxRunners")
        return min(value, ceiling) if isinstance(value, int) else ceiling

    async def publish(self, cached: Object, states: RunnerStates, writes: OwnWrites) -> float | None:
        """Assess and write the set's capacity when it changed (a Warning Event when a limit starts or its
        reason changes); returns the seconds until a pending runner pod passes the bound (``None``: none).
        ``writes``: this controller's status writes of the set (module docstring; the write is recorded there)."""
        ers = writes.freshest(cached)
        capacity, recheck = self.assess(ers, states)
        now = self._ctx.clock.now()
        if capacity_changes(ers, capacity, now=now) is None:
            return recheck
        view = ObjectView(ers)
        kube = self._ctx.kube
        unread: Object | None = ers

        async def write() -> str | None:
            """Write the change against ``ers``, after a conflict against a fresh read; the reason the set had
            before (``None``: nothing written)."""
            nonlocal unread
            fresh, unread = unread or await kube.get(EPHEMERAL_RUNNER_SETS, view.name, namespace=view.namespace), None
            changes = capacity_changes(fresh, capacity, now=now)
            if changes is None:
                return None
            advertised, conditions = changes
            body = {
                "metadata": {"resourceVersion": ObjectView(fresh).resource_version},
                "status": {STATUS_FIELD: advertised, "conditions": conditions},
            }
            stored = await kube.patch(
                EPHEMERAL_RUNNER_SETS,
                view.name,
                body,
                namespace=view.namespace,
                patch_type=PatchType.MERGE,
                subresource="status",
            )
            writes.wrote(fresh, stored)
            before = get_condition(sequence(ObjectView(fresh).status.get("conditions")), CONDITION_CAPACITY_LIMITED)
            return str((before or {}).get("reason", ""))

        before = await retry_on_conflict(write, clock=self._ctx.clock)
        if before is None:
            return recheck
        log.info(
            "advertised capacity changed",
            extra={"set": f"{view.namespace}/{view.name}", "capacity": capacity.advertised, "reason": capacity.reason},
        )
        if capacity.limited and before != capacity.reason:
            await self._ctx.events.event(
                ers, type="Warning", reason=capacity.reason, note=capacity.message, action="AdvertiseCapacity"
            )
        return recheck
