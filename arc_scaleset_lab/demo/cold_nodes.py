"""``arc-scaleset demo --cold-nodes``: the runners on nodes that do not exist until a pod needs one.

Without it, every runner pod lands on the lab's one unlimited node at once. With it, runner pods request
a CPU and 2 GiB each and ask for a node pool (``nodeSelector`` and toleration) that starts empty; the
lab's node provisioner (:mod:`arc_scaleset_lab.cluster.provisioner`) plays a cluster autoscaler: a node
of ``node_size`` CPUs appears ``delay`` seconds after a runner pod finds no room, at most ``max_nodes``
of them, and a node empty for ``idle`` seconds goes away. The listener pod stays on the base node. The
queue-to-start figures then include the wait for a node, as on a real cluster with ``minRunners: 0``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sized
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from arc_scaleset_lab.cluster.node_pool import NodePool, Resources

RUNNER_CPU = "1"
RUNNER_MEMORY = "2Gi"
MEMORY_PER_CPU = 4 * 2**30
PODS_PER_NODE = 110
POOL_NAME = "runners"


@dataclass(frozen=True, kw_only=True)
class ColdNodes:
    """The node pool of a cold-nodes demo: ``node_size`` CPUs (4 GiB each) per node; ``pool_name`` its label
    value (a test on a shared cluster picks its own)."""

    delay: float = 60.0
    max_nodes: int = 10
    node_size: int = 4
    idle: float = 30.0
    pool_name: str = POOL_NAME

    def __post_init__(self) -> None:
        if self.delay < 0 or self.idle < 0 or self.max_nodes < 1 or self.node_size < 1:
            raise ValueError("need --node-delay >= 0, --node-idle >= 0, --max-nodes >= 1 and --node-size >= 1")

    def pool(self) -> NodePool:
        shape = Resources(Fraction(self.node_size), Fraction(self.node_size * MEMORY_PER_CPU), PODS_PER_NODE)
        return NodePool(name=self.pool_name, shape=shape, delay=self.delay, idle=self.idle, max_nodes=self.max_nodes)

    def place(self, template: Mapping[str, Any]) -> dict[str, Any]:
        """``template`` (a runner pod template) on the pool: requests on every container, the pool's placement."""
        placed = copy.deepcopy(dict(template))
        spec = placed.setdefault("spec", {})
        for container in spec.get("containers") or []:
            requests = container.setdefault("resources", {}).setdefault("requests", {})
            requests.update({"cpu": RUNNER_CPU, "memory": RUNNER_MEMORY})
        spec.update(self.pool().placement())
        return placed

    def nodes_line(self, nodes: Sized, launches: Sized) -> str:
        """The pool at a glance, for the live view: nodes up, nodes on their way, the maximum."""
        return f"{len(nodes)} up, {len(launches)} coming (at most {self.max_nodes} of {self.node_size} CPUs)"

    def summary_line(self, *, added: int, removed: int) -> str:
        return (
            f"cold nodes:            {added} added, {removed} removed (a node of {self.node_size} CPUs appears "
            f"{self.delay:g}s after a runner pod finds no room; at most {self.max_nodes})"
        )
