"""Capacity truth on the EphemeralRunnerSet, against the real control plane (docs/capacity.md): a runner pod the
real scheduler cannot place for longer than the bound lowers what the set advertises and sets
``CapacityLimited``; a ResourceQuota lowers it to what it admits; nodes that will not grow lower it to the room
they have left."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import CONDITION_CAPACITY_LIMITED
from arc_scaleset.controllers.ephemeralrunnerset.capacity import REASON_NODES, REASON_QUOTA, REASON_UNSCHEDULABLE
from arc_scaleset.controllers.ephemeralrunnerset.node_room import LABEL_NODE_POOL_CAPPED
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.resources import NODES, PODS, RESOURCE_QUOTAS
from arc_scaleset_lab.cluster.node_pool import NodePool, Resources
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import harness_fixture, runner_template  # noqa: F401 - fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


def limited(h: ControllerHarness, reason: str, capacity: int) -> Callable[[], Awaitable[dict[str, Any] | None]]:
    """The set's ``CapacityLimited`` condition once it is True for ``reason`` and it advertises ``capacity``."""

    async def check() -> dict[str, Any] | None:
        status = (await h.get_ers()).get("status") or {}
        condition = get_condition(status.get("conditions"), CONDITION_CAPACITY_LIMITED)
        if status.get("advertisedCapacity") != capacity or condition is None:
            return None
        return condition if (condition["status"], condition["reason"]) == ("True", reason) else None

    return check


async def test_a_runner_unschedulable_past_the_bound_lowers_the_capacity_and_sets_the_condition(
    h: ControllerHarness,
) -> None:
    await h.start(unschedulable_runner_bound=2.0)
    nowhere = runner_template()
    nowhere["spec"]["nodeSelector"] = {"arc-scaleset.dev/no-such-pool": "true"}  # the scheduler finds no node
    await h.create_ers(replicas=2, patch_id=0, template=nowhere)

    condition = await eventually(
        limited(h, REASON_UNSCHEDULABLE, 0), what="CapacityLimited RunnersUnschedulable", timeout=60
    )
    assert "found no node" in condition["message"]
    await h.wait_for_event(REASON_UNSCHEDULABLE, regarding="arc")  # written after the condition it reports


async def test_a_set_without_limits_advertises_the_ceiling_and_says_so(h: ControllerHarness) -> None:
    await h.start(max_runners_ceiling=7)
    await h.create_ers(replicas=1, patch_id=0)

    async def as_expected() -> bool:
        status = (await h.get_ers()).get("status") or {}
        condition = get_condition(status.get("conditions"), CONDITION_CAPACITY_LIMITED) or {}
        return status.get("advertisedCapacity") == 7 and condition.get("status") == "False"

    await eventually(as_expected, what="advertisedCapacity 7, CapacityLimited False")


async def test_a_pod_quota_lowers_the_capacity_to_what_it_admits(h: ControllerHarness) -> None:
    await h.kube.create(RESOURCE_QUOTAS, {"metadata": {"name": "runners"}, "spec": {"hard": {"pods": "3"}}},
                        namespace=h.namespace)  # fmt: skip
    await h.start()
    await h.create_ers(replicas=1, patch_id=0)

    condition = await eventually(limited(h, REASON_QUOTA, 3), what="CapacityLimited by the pods quota", timeout=60)
    assert "ResourceQuota runners (pods)" in condition["message"]


async def test_nodes_that_will_not_grow_lower_the_capacity_to_the_room_they_have_left(h: ControllerHarness) -> None:
    """Two kwok nodes of 2 CPUs for the runners, one CPU taken by another pod: once both are labelled capped, the
    set advertises its placed runner plus the room left (4 - 1 - 1 = 2 runners of 1 CPU), not the ceiling."""
    pool = NodePool(name=f"capped-{uuid.uuid4().hex[:6]}", shape=Resources.parse("2", "8Gi", 110))
    names = [f"{pool.name}-{i}" for i in range(2)]
    for name in names:
        await h.kube.create(NODES, pool.node(name))
    try:
        await h.kube.create(PODS, {"metadata": {"name": "busy"}, "spec": {
            "nodeName": names[0], "tolerations": pool.placement()["tolerations"],
            "containers": [{"name": "c", "image": "busy", "resources": {"requests": {"cpu": "1"}}}]}},
            namespace=h.namespace)  # fmt: skip
        template = runner_template()
        template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
        template["spec"].update(pool.placement())
        await h.start(capped_node_room=True, max_runners_ceiling=10)
        await h.create_ers(replicas=1, patch_id=0, template=template)

        async def advertises_ceiling() -> bool:
            return ((await h.get_ers()).get("status") or {}).get("advertisedCapacity") == 10

        await eventually(advertises_ceiling, what="the ceiling while the nodes may grow", timeout=60)
        for name in names:
            await h.kube.patch(NODES, name, {"metadata": {"labels": {LABEL_NODE_POOL_CAPPED: "true"}}})

        check = limited(h, REASON_NODES, 1 + 2)

        async def placed_and_room_left() -> dict[str, Any] | None:
            # The same figure before the runner pod is bound ("3 more beside the 0 placed"); the words once it is.
            condition = await check()
            return (
                condition
                if condition and "room for 2 more runner(s) beside the 1 placed" in condition["message"]
                else None
            )

        condition = await eventually(placed_and_room_left, what="CapacityLimited NodePoolCapped", timeout=60)
        assert "the 2 node(s) this set's runners may run on will not grow" in condition["message"]
    finally:
        await _delete_nodes_and_their_pods(h, names)


async def _delete_nodes_and_their_pods(h: ControllerHarness, names: list[str]) -> None:
    """kwok finishes a pod's deletion only on a node it manages: the pods go first, then the nodes."""
    await h.stop()

    async def on_nodes() -> list[str]:
        pods = (await h.kube.list(PODS, namespace=h.namespace)).items
        return [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") in names]

    for pod in await on_nodes():
        with contextlib.suppress(NotFound):
            await h.kube.delete(PODS, pod, namespace=h.namespace, grace_period_seconds=0)
    await eventually(lambda: _none(on_nodes()), what="the pods on the capped nodes gone", timeout=60)
    for name in names:
        with contextlib.suppress(NotFound):
            await h.kube.delete(NODES, name)


async def _none(pending: Awaitable[list[str]]) -> bool:
    return not await pending


async def test_a_new_sets_capacity_is_written_without_reading_the_set(h: ControllerHarness) -> None:
    # Issue 30: the capacity is written under the set's resourceVersion, as the pass's earlier status write
    # returned it or the cache shows it: no read of the set (its kind's one client bucket is shared by every set
    # at set-up).
    await h.start(max_runners_ceiling=7)
    reads = h.kube.namespace_request_counts
    before = reads[("get", "ephemeralrunnersets", h.namespace)]
    await h.create_ers(replicas=0, patch_id=0)

    def advertised() -> bool:  # read from the controllers' cache: no request of the test's own
        assert h.ctx is not None
        ers = h.ctx.cache(EPHEMERAL_RUNNER_SETS).get(h.namespace, "arc") or {}
        status = ers.get("status") or {}
        return status.get("phase") == "Running" and status.get("advertisedCapacity") == 7

    await eventually(advertised, what="the set Running, advertising 7")
    assert reads[("get", "ephemeralrunnersets", h.namespace)] == before
