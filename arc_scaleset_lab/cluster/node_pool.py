"""A node pool with finite nodes, and the pure decision of a lab cluster autoscaler that grows and shrinks it.

The lab's base node (``kwok-node-0``) is effectively unlimited. A :class:`NodePool` describes nodes as a
real cloud gives them: each has a finite allocatable CPU, memory and pod count (kwok keeps a node's
``status.allocatable``, see ``stages.py``), carries the pool's label and a ``NoSchedule`` taint, and so
takes only the pods that ask for the pool (:meth:`NodePool.placement`: a ``nodeSelector`` and a
toleration, as runner pods on a dedicated runner node pool do). The real kube-scheduler then decides
where a pod fits, so requests, priority and preemption behave as on a real cluster.

:func:`plan_nodes` is the cluster autoscaler's decision, with no I/O (``provisioner.py`` is its shell):

- a pod the scheduler found *unschedulable* that asks for the pool, and that fits no existing pool node's
  free room nor a node already being launched, gets a new node: launched now, it appears ``delay``
  seconds later (the time a cloud needs for one; the real cluster autoscaler also decides at once and
  then waits for the node). Pending pods are packed first-fit-decreasing, so a burst of pods launches the
  nodes it needs, not one node per pod;
- never more than ``max_nodes`` nodes, counting those being launched; pods left without room are reported;
- a pod that does not fit even an empty node is reported and never launches anything;
- a node with no pod for ``idle`` seconds is removed, unless this plan just counted on its room for a
  waiting pod; a node with a pod is never removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from arc_scaleset.kube.quantity import InvalidQuantity, parse_quantity

POOL_LABEL = "arc-scaleset.dev/node-pool"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, order=True)
class Resources:
    """CPU (cores), memory (bytes) and a pod count: what a node offers and what a pod takes of it."""

    cpu: Fraction = Fraction(0)
    memory: Fraction = Fraction(0)
    pods: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.memory + other.memory, self.pods + other.pods)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu - other.cpu, self.memory - other.memory, self.pods - other.pods)

    def fits_in(self, room: Resources) -> bool:
        return self.cpu <= room.cpu and self.memory <= room.memory and self.pods <= room.pods

    @classmethod
    def parse(cls, cpu: str, memory: str, pods: int) -> Resources:
        """From Kubernetes quantities (``"4"``, ``"500m"``, ``"16Gi"``); ``ValueError`` names a bad one."""
        return cls(parse_quantity(cpu).value, parse_quantity(memory).value, pods)

    def as_quantities(self) -> dict[str, str]:
        """The ``allocatable``/``capacity`` map of a Node (CPU in millicores, memory in bytes)."""
        return {"cpu": f"{int(self.cpu * 1000)}m", "memory": str(int(self.memory)), "pods": str(self.pods)}


def _quantity(raw: Any) -> Fraction:
    try:
        return parse_quantity(raw).value if raw is not None else Fraction(0)
    except InvalidQuantity:
        return Fraction(0)  # the API server refuses such a pod; only a hand-made dict reaches here


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """What the scheduler reserves for ``pod``: the larger of its containers' summed requests and its largest
    init container's (init containers run one at a time, before the others), plus one pod slot."""
    spec = pod.get("spec") or {}

    def request(container: Mapping[str, Any], name: str) -> Fraction:
        return _quantity(((container.get("resources") or {}).get("requests") or {}).get(name))

    def need(name: str) -> Fraction:
        running = sum((request(c, name) for c in spec.get("containers") or []), Fraction(0))
        init = max((request(c, name) for c in spec.get("initContainers") or []), default=Fraction(0))
        return max(running, init)

    return Resources(need("cpu"), need("memory"), 1)


def is_unschedulable(pod: Mapping[str, Any]) -> bool:
    """The scheduler tried ``pod`` and found no node for it (``PodScheduled=False``, reason Unschedulable)."""
    if (pod.get("spec") or {}).get("nodeName") or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in conditions
    )


def holds_node(pod: Mapping[str, Any]) -> bool:
    """``pod`` occupies the node it is bound to: bound, and not finished (a finished pod's room is free)."""
    return (
        bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES
    )


@dataclass(frozen=True, kw_only=True)
class NodePool:
    """Nodes of one ``shape``; ``delay``: seconds from launch to the node's appearance; ``idle``: seconds a
    node stays empty before it is removed; ``max_nodes``: the most nodes the pool may have at once."""

    name: str = "runners"
    shape: Resources = Resources(Fraction(4), Fraction(16 * 2**30), 110)
    delay: float = 60.0
    idle: float = 30.0
    max_nodes: int = 10

    def __post_init__(self) -> None:
        if self.delay < 0 or self.idle < 0 or self.max_nodes < 0:
            raise ValueError("a node pool needs delay >= 0, idle >= 0 and max_nodes >= 0")
        if self.shape.pods < 1:
            raise ValueError("a node pool's nodes must admit at least one pod")

    @property
    def selector(self) -> str:
        """The label selector of this pool's nodes."""
        return f"{POOL_LABEL}={self.name}"

    def placement(self) -> dict[str, Any]:
        """The pod spec fields that put a pod on this pool: merge them into a pod (template) spec."""
        return {
            "nodeSelector": {POOL_LABEL: self.name},
            "tolerations": [{"key": POOL_LABEL, "operator": "Equal", "value": self.name, "effect": "NoSchedule"}],
        }

    def wants(self, pod: Mapping[str, Any]) -> bool:
        """``pod`` asks for this pool by its ``nodeSelector`` (other pods are not this pool's to serve)."""
        return ((pod.get("spec") or {}).get("nodeSelector") or {}).get(POOL_LABEL) == self.name

    def node(self, name: str) -> dict[str, Any]:
        """A Node of this pool, for kwok to manage: its allocatable and capacity are the pool's shape."""
        quantities = self.shape.as_quantities()
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    POOL_LABEL: self.name,
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                },
                "annotations": {KWOK_ANNOTATION: "fake"},
            },
            "spec": {"taints": [{"key": POOL_LABEL, "value": self.name, "effect": "NoSchedule"}]},
            "status": {"allocatable": quantities, "capacity": dict(quantities)},
        }


@dataclass(frozen=True)
class WaitingPod:
    """A pod of the pool that the scheduler found no room for."""

    name: str
    requests: Resources


@dataclass(frozen=True)
class PoolNode:
    """A node of the pool: its room left (allocatable minus its pods' requests), its pods, and since when it has
    had none (``None``: it has pods)."""

    name: str
    free: Resources
    pods: int
    empty_since: float | None


@dataclass(frozen=True)
class Launch:
    """A node asked for at ``started``, that appears at ``due``."""

    name: str
    started: float
    due: float


@dataclass(frozen=True)
class NodePlan:
    """What to do now: ``launch`` nodes (new), ``create`` the Node of these due launches, ``remove`` these
    idle nodes. ``too_big``: waiting pods no node of the pool could hold; ``at_max``: waiting pods left without
    room because the pool is at ``max_nodes``."""

    launch: int = 0
    create: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    too_big: tuple[str, ...] = ()
    at_max: tuple[str, ...] = ()


def plan_nodes(
    now: float,
    pool: NodePool,
    *,
    waiting: Iterable[WaitingPod],
    nodes: Sequence[PoolNode],
    launches: Sequence[Launch],
) -> NodePlan:
    """The cluster autoscaler's decision at ``now`` (see the module docstring); pure."""
    rooms = [node.free for node in nodes] + [pool.shape] * len(launches)
    used = [False] * len(nodes)
    new = 0
    too_big: list[str] = []
    at_max: list[str] = []
    for pod in sorted(waiting, key=lambda p: (p.requests, p.name), reverse=True):
        if not pod.requests.fits_in(pool.shape):
            too_big.append(pod.name)
            continue
        slot = next((i for i, room in enumerate(rooms) if pod.requests.fits_in(room)), None)
        if slot is None:
            if len(nodes) + len(launches) + new >= pool.max_nodes:
                at_max.append(pod.name)
                continue
            rooms.append(pool.shape)
            slot, new = len(rooms) - 1, new + 1
        rooms[slot] = rooms[slot] - pod.requests
        if slot < len(nodes):
            used[slot] = True
    idle = tuple(
        node.name
        for node, counted_on in zip(nodes, used, strict=True)
        if node.pods == 0 and node.empty_since is not None and now - node.empty_since >= pool.idle and not counted_on
    )
    return NodePlan(
        launch=new,
        create=tuple(launch.name for launch in launches if launch.due <= now),
        remove=idle,
        too_big=tuple(sorted(too_big)),
        at_max=tuple(sorted(at_max)),
    )
