"""Node room when the pool cannot grow (controllers/ephemeralrunnerset/node_room.py, docs/capacity.md): counted
only when every node the runner may run on carries the capped label; the room is allocatable minus the requests
of the pods there (placeholders' room is a runner's); selectors, affinity, taints and cordons decide the nodes."""

from __future__ import annotations

from typing import Any

from arc_scaleset.api.warm_capacity import LABEL_WARM_POOL
from arc_scaleset.controllers.ephemeralrunnerset.capacity import REASON_NODES, CapacityInputs, assess_capacity
from arc_scaleset.controllers.ephemeralrunnerset.node_room import LABEL_NODE_POOL_CAPPED, NodeRoom, node_room

POOL = {"pool": "runners"}
TAINT = {"key": "pool", "value": "runners", "effect": "NoSchedule"}


def runner_pod(**spec: Any) -> dict[str, Any]:
    container = {"name": "runner", "image": "r", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}
    return {"spec": {"containers": [container], "nodeSelector": POOL,
                     "tolerations": [{"key": "pool", "operator": "Equal", "value": "runners", "effect": "NoSchedule"}],
                     **spec}}  # fmt: skip


def node(name: str, *, capped: bool = True, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    all_labels = {**POOL, **(labels or {})}
    if capped:
        all_labels[LABEL_NODE_POOL_CAPPED] = "true"
    return {
        "metadata": {"name": name, "labels": all_labels},
        "spec": {"taints": [TAINT], **spec},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }


def pod_on(node_name: str, cpu: str, *, phase: str = "Running", placeholder: bool = False) -> dict[str, Any]:
    labels = {LABEL_WARM_POOL: "p"} if placeholder else {}
    return {
        "metadata": {"labels": labels},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": phase},
    }


def test_room_is_allocatable_minus_the_requests_of_the_pods_there_placeholders_counted_free() -> None:
    pods = [pod_on("n1", "2500m"), pod_on("n1", "1", placeholder=True), pod_on("n2", "1", phase="Succeeded")]
    assert node_room(runner_pod(), [node("n1"), node("n2")], pods) == NodeRoom(runners=1 + 4, nodes=2)


def test_growth_is_capped_only_when_every_node_the_runner_may_use_says_so() -> None:
    assert node_room(runner_pod(), [node("n1"), node("n2", capped=False)], []) is None
    assert node_room(runner_pod(), [], []) is None, "no node: an autoscaler may make the first"
    # A node the runner may not use does not decide: another pool's, a taint it does not tolerate, a cordon.
    other = node("o1", capped=False, labels={"pool": "gpu"})
    tainted = node("t1", capped=False, taints=[{"key": "dedicated", "value": "x", "effect": "NoExecute"}])
    cordoned = node("c1", capped=False, unschedulable=True)
    assert node_room(runner_pod(), [node("n1"), other, tainted, cordoned], []) == NodeRoom(runners=4, nodes=1)


def test_required_node_affinity_and_memory_decide_too() -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}  # fmt: skip
    nodes = [node("a1", labels={"zone": "a"}), node("b1", capped=False, labels={"zone": "b"})]
    assert node_room(runner_pod(affinity=affinity), nodes, []) == NodeRoom(runners=4, nodes=1)
    big = runner_pod()
    big["spec"]["containers"][0]["resources"]["requests"]["memory"] = "6Gi"
    assert node_room(big, [node("n1")], []) == NodeRoom(runners=2, nodes=1)


def test_the_advertised_capacity_is_the_placed_runners_plus_the_room_left() -> None:
    capacity = assess_capacity(
        CapacityInputs(max_runners=20, runner_pod=runner_pod(), scheduled_runners=3, node_room=2, capped_nodes=2)
    )
    assert (capacity.advertised, capacity.reason, capacity.limited) == (5, REASON_NODES, True)
    assert "the 2 node(s) this set's runners may run on will not grow" in capacity.message
    assert "room for 2 more runner(s) beside the 3 placed" in capacity.message
    roomy = CapacityInputs(max_runners=20, runner_pod=runner_pod(), scheduled_runners=3, node_room=40, capped_nodes=9)
    assert not assess_capacity(roomy).limited
