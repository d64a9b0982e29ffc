"""The health step of an AutoscalingListener pass: ``Ready`` of a running listener, and the status written once
at the end of the pass with the Events of an outage (docs/controllers.md, "The listener's health").

The decisions are pure, in :mod:`.listener_health` (what the listener reports) and :mod:`.status` (the
conditions); this module reads the caches, keeps the listener's memory of them and writes.
"""

from __future__ import annotations

from typing import Any

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.controllers.autoscalinglistener.events import ListenerEvents
from arc_scaleset.controllers.autoscalinglistener.listener_health import (
    listener_readiness,
    reported_state,
    state_annotation,
)
from arc_scaleset.controllers.autoscalinglistener.scope import ListenerMemory, ListenerPass
from arc_scaleset.controllers.autoscalinglistener.status import (
    ListenerReport,
    PodReadiness,
    derive_conditions,
    outage_event,
    status_patch,
)
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.manager import Cache
from arc_scaleset.kube.views import ObjectView


class ListenerHealth:
    """What a listener reports about itself (read from its EphemeralRunnerSet), and its status."""

    def __init__(self, ctx: ControllerContext, *, runner_sets: Cache, events: ListenerEvents) -> None:
        self.ctx = ctx
        # The listener reports its state on the set it scales (docs/listener.md): the cache every other
        # controller shares, watched for that annotation alone.
        self.runner_sets = runner_sets
        self.events = events

    def runner_set(self, scope: ListenerPass) -> Object | None:
        """The EphemeralRunnerSet the listener scales, as cached."""
        return self.runner_sets.get(scope.view.scale_set_namespace, scope.view.ephemeral_runner_set_name)

    def remember_predecessor(self, scope: ListenerPass) -> None:
        """Before a new pod is made: whatever state its set carries now was written by an earlier listener."""
        scope.memory.predecessor_state = state_annotation(self.runner_set(scope))

    def running_readiness(self, scope: ListenerPass, pod: Object) -> PodReadiness:
        """``Ready`` of a running listener container: what its listener reports (:mod:`.listener_health`)."""
        runner_set = self.runner_set(scope)
        memory = scope.memory
        if memory.predecessor_state is not None and state_annotation(runner_set) != memory.predecessor_state:
            memory.predecessor_state = None  # the new listener has spoken
        state = reported_state(runner_set, pod=pod, predecessor=memory.predecessor_state)
        where = f"{scope.view.scale_set_namespace}/{scope.view.ephemeral_runner_set_name}"
        return listener_readiness(ObjectView(pod).name, where, state)

    async def write_status(self, scope: ListenerPass) -> None:
        """Write the conditions the pass derived from ``scope.report`` (:meth:`write_report`)."""
        assert scope.report is not None
        await self.write_report(scope.obj, scope.memory, scope.report)

    async def write_report(self, obj: Object, memory: ListenerMemory, report: ListenerReport) -> bool:
        """Write the conditions derived from ``report`` on the listener ``obj`` (as cached), when they differ from
        the stored ones; True when they differed and were written.

        No resourceVersion precondition: only this controller writes the listener's status, and it is derived
        afresh from the live state on every pass, so a write from a stale read is corrected by the next pass.
        The conditions are derived from what this process last wrote (``memory``) when the cache still shows the
        object it was computed from (the write has not come back through the watch yet), so an outage's start or
        end is announced once (:func:`.status.outage_event`), on the listener and on its AutoscalingRunnerSet.
        """
        view = AutoscalingListenerView(obj)
        stored: list[dict[str, Any]] = [dict(condition) for condition in view.conditions]
        if memory.written_status is not None and memory.written_status[0] == view.resource_version:
            stored = memory.written_status[1]
        now = self.ctx.clock.now()
        conditions = derive_conditions(stored, report, now=now)
        patch = status_patch({"conditions": stored}, conditions)
        if not patch:
            return False
        try:
            await self.ctx.kube.patch(
                AUTOSCALING_LISTENERS, view.name, {"status": patch}, namespace=view.namespace, subresource="status"
            )
        except NotFound:
            return False
        memory.written_status = (view.resource_version, conditions)
        event = outage_event(stored, conditions, now=now)
        if event is not None:
            kind, reason, note = event
            key = f"{view.namespace}/{view.name}"
            await self.events.on_both(
                obj, kind, reason, note, scale_set_note=f"listener {key}: {note}", action="Listen"
            )
        return True
