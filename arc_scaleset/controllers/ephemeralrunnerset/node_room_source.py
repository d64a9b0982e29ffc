"""The cluster's nodes and the pods on them, for :mod:`.node_room` (``--capped-node-room``, docs/capacity.md).

Room on a node depends on every pod bound to it, whatever its namespace, so this is a cluster-wide view: an
informer of Nodes and one of pods that are bound to a node and not finished (a field selector), each pod kept only
as far as room needs it (node, phase, requests, labels). It is a controller
:class:`~arc_scaleset.kube.controller.Source` of the EphemeralRunnerSet controller. A Node that comes, goes, or
changes its labels, taints, cordon or allocatable queues every set (rare events; which sets a node concerns is
what a pass works out); pods queue nothing: a set reads the room when it is reconciled, which its runners, its
listener's patches and quotas already cause, so room other pods take or free is seen on the set's next pass
(docs/capacity.md, "Limits").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from arc_scaleset.clock import Clock
from arc_scaleset.controllers.ephemeralrunnerset.node_room import NodeRoom, node_room
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.informer import HandlerRegistration, Informer, Object, compact
from arc_scaleset.kube.resources import NODES, PODS

BOUND_AND_RUNNING: Final = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


def room_fields(pod: dict[str, Any]) -> dict[str, Any]:
    """What node room needs of a pod: its node, phase, labels (placeholders) and containers' resources."""
    spec = pod.get("spec") or {}

    def containers(key: str) -> list[dict[str, Any]]:
        return [{"resources": c.get("resources") or {}} for c in spec.get(key) or []]

    meta = pod.get("metadata") or {}
    return {
        "metadata": {k: meta.get(k) for k in ("name", "namespace", "uid", "resourceVersion", "labels") if k in meta},
        "spec": {"nodeName": spec.get("nodeName"), "containers": containers("containers"),
                 "initContainers": containers("initContainers"), "overhead": spec.get("overhead") or {}},
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }  # fmt: skip


def _room_facts(node: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a Node decides room: labels, taints, cordon, allocatable."""
    spec = node.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    return labels, spec.get("taints"), spec.get("unschedulable"), (node.get("status") or {}).get("allocatable")


class NodeRoomSource:
    """See the module docstring."""

    def __init__(self, kube: KubeClient, *, clock: Clock, sets: Callable[[], Iterable[Request]]) -> None:
        self.nodes = Informer(kube, NODES, clock=clock, transform=compact)
        self.pods = Informer(kube, PODS, field_selector=BOUND_AND_RUNNING, clock=clock, transform=room_fields)
        self._sets = sets
        self._registration: HandlerRegistration | None = None

    def start(self, enqueue: Callable[[Request], None]) -> None:
        def every_set(*_: Object) -> None:
            for request in self._sets():
                enqueue(request)

        def changed(old: Object, new: Object) -> None:
            if _room_facts(old) != _room_facts(new):
                every_set()

        self._registration = self.nodes.add_handler(on_add=every_set, on_update=changed, on_delete=every_set)
        self.nodes.start()
        self.pods.start()

    async def stop(self) -> None:
        if self._registration is not None:
            self._registration.remove()
        await self.nodes.stop()
        await self.pods.stop()

    def room(self, runner_pod: Mapping[str, Any]) -> NodeRoom | None:
        """:func:`~.node_room.node_room` for ``runner_pod`` now; ``None`` until both informers have listed."""
        if not (self.nodes.has_synced and self.pods.has_synced):
            return None
        return node_room(runner_pod, self.nodes.store.list(), self.pods.store.list())
