"""The lab cluster autoscaler's pure decision (node_pool.plan_nodes) and the pod/node arithmetic under it."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from arc_scaleset_lab.cluster.node_pool import (
    POOL_LABEL,
    Launch,
    NodePool,
    PoolNode,
    Resources,
    WaitingPod,
    is_unschedulable,
    plan_nodes,
    pod_requests,
)

GI = 2**30
POOL = NodePool(name="runners", shape=Resources.parse("4", "16Gi", 110), delay=60, idle=30, max_nodes=3)
RUNNER = Resources.parse("1", "2Gi", 1)


def waiting(count: int, requests: Resources = RUNNER) -> list[WaitingPod]:
    return [WaitingPod(f"ns/pod-{i}", requests) for i in range(count)]


def empty_node(name: str, since: float | None = 0.0) -> PoolNode:
    return PoolNode(name, POOL.shape, 0, since)


def test_an_unschedulable_pod_launches_a_node_now_that_appears_after_the_delay() -> None:
    plan = plan_nodes(100.0, POOL, waiting=waiting(1), nodes=[], launches=[])
    assert (plan.launch, plan.create) == (1, ())

    launch = Launch("runners-1", started=100.0, due=160.0)
    still_waiting = plan_nodes(159.9, POOL, waiting=waiting(1), nodes=[], launches=[launch])
    assert (still_waiting.launch, still_waiting.create) == (0, ())  # the launch in flight covers the pod
    due = plan_nodes(160.0, POOL, waiting=waiting(1), nodes=[], launches=[launch])
    assert (due.launch, due.create) == (0, ("runners-1",))


def test_a_burst_launches_the_nodes_it_needs_packed_not_one_per_pod() -> None:
    assert plan_nodes(0.0, POOL, waiting=waiting(9), nodes=[], launches=[]).launch == 3  # 4 + 4 + 1


def test_room_left_on_a_node_is_used_before_a_launch() -> None:
    half_full = PoolNode("runners-1", POOL.shape - RUNNER - RUNNER, 2, None)
    assert plan_nodes(0.0, POOL, waiting=waiting(2), nodes=[half_full], launches=[]).launch == 0
    assert plan_nodes(0.0, POOL, waiting=waiting(3), nodes=[half_full], launches=[]).launch == 1


def test_the_maximum_counts_nodes_and_launches_and_names_the_pods_left_without_room() -> None:
    full = PoolNode("runners-1", Resources(), 4, None)
    launch = Launch("runners-2", started=0.0, due=60.0)
    plan = plan_nodes(0.0, POOL, waiting=waiting(9), nodes=[full], launches=[launch])
    assert plan.launch == 1  # 1 node + 1 launch + 1 new = max 3
    assert plan.at_max == ("ns/pod-0",)  # 4 fit the launch, 4 the new node: the ninth has no room

    at_max = plan_nodes(0.0, POOL, waiting=waiting(5), nodes=[full, full], launches=[launch])  # 4 fit the launch
    assert (at_max.launch, at_max.at_max) == (0, ("ns/pod-0",))


def test_a_pod_larger_than_a_node_launches_nothing_and_is_named() -> None:
    plan = plan_nodes(0.0, POOL, waiting=[WaitingPod("ns/huge", Resources.parse("8", "1Gi", 1))], nodes=[], launches=[])
    assert (plan.launch, plan.too_big) == (0, ("ns/huge",))


def test_a_node_empty_for_the_idle_bound_is_removed_and_not_before() -> None:
    assert plan_nodes(29.9, POOL, waiting=[], nodes=[empty_node("runners-1", 0.0)], launches=[]).remove == ()
    assert plan_nodes(30.0, POOL, waiting=[], nodes=[empty_node("runners-1", 0.0)], launches=[]).remove == (
        "runners-1",
    )


def test_a_node_with_pods_is_never_removed() -> None:
    busy = PoolNode("runners-1", POOL.shape - RUNNER, 1, None)
    assert plan_nodes(10_000.0, POOL, waiting=[], nodes=[busy], launches=[]).remove == ()


def test_an_idle_node_a_waiting_pod_is_counted_on_is_kept() -> None:
    plan = plan_nodes(100.0, POOL, waiting=waiting(1), nodes=[empty_node("runners-1", 0.0)], launches=[])
    assert (plan.launch, plan.remove) == (0, ())


def test_pod_requests_take_the_larger_of_containers_and_the_largest_init_container() -> None:
    def container(cpu: str, memory: str) -> dict[str, Any]:
        return {"resources": {"requests": {"cpu": cpu, "memory": memory}}}

    pod = {"spec": {"containers": [container("500m", "1Gi"), container("250m", "1Gi")],
                    "initContainers": [container("2", "512Mi")]}}  # fmt: skip
    assert pod_requests(pod) == Resources(Fraction(2), Fraction(2 * GI), 1)
    assert pod_requests({"spec": {"containers": [{"name": "c"}]}}) == Resources(pods=1)


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        ({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}, True),
        ({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulerError"}]}}, False),
        ({"status": {"phase": "Pending"}}, False),  # the scheduler has not tried it yet
        (
            {
                "spec": {"nodeName": "n"},
                "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
            },
            False,
        ),  # bound: not the provisioner's to place
    ],
)
def test_only_a_pod_the_scheduler_found_no_node_for_is_unschedulable(pod: dict[str, Any], expected: bool) -> None:
    assert is_unschedulable(pod) is expected


def test_a_pool_serves_only_pods_that_ask_for_it_and_its_nodes_admit_only_them() -> None:
    placement = POOL.placement()
    assert POOL.wants({"spec": placement})
    assert not POOL.wants({"spec": {}})
    assert not NodePool(name="other").wants({"spec": placement})
    node = POOL.node("runners-1")
    assert node["metadata"]["labels"][POOL_LABEL] == "runners"
    (taint,) = node["spec"]["taints"]
    (toleration,) = placement["tolerations"]
    assert (taint["key"], taint["value"], taint["effect"]) == (
        toleration["key"],
        toleration["value"],
        toleration["effect"],
    )
    assert node["status"]["allocatable"] == {"cpu": "4000m", "memory": str(16 * GI), "pods": "110"}


def test_a_pool_refuses_a_negative_bound() -> None:
    with pytest.raises(ValueError, match="max_nodes"):
        NodePool(max_nodes=-1)
