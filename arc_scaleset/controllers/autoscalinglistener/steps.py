"""What the listener reconciler's step executors act through (:class:`.pod_steps.ListenerPod` for a listener of
its own, :class:`.membership.Membership` for a member of a shared listener): one constructor for both."""

from __future__ import annotations

from arc_scaleset.controllers.autoscalinglistener.child_objects import ChildObjects
from arc_scaleset.controllers.autoscalinglistener.events import ListenerEvents
from arc_scaleset.controllers.autoscalinglistener.health import ListenerHealth
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.kube.manager import Cache


class ListenerSteps:
    """The controller's context, the pod cache, the child objects, the health writer and the Events."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        pods: Cache,
        children: ChildObjects,
        health: ListenerHealth,
        events: ListenerEvents,
    ) -> None:
        self.ctx = ctx
        self.pods = pods
        self.children = children
        self.health = health
        self.events = events
