"""The lab cluster behaves like a real one with finite nodes: the real kube-scheduler finds no room, the node
provisioner (the lab's cluster autoscaler) adds a node after its delay and removes an idle one, its maximum
holds, priority preemption happens on a full node, and a ResourceQuota refuses a pod beyond it at admission.

The provisioner runs on a :class:`FakeClock`, driven scan by scan: the delay is exact and nothing sleeps.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from arc_scaleset.clock import FakeClock
from arc_scaleset.controllers.ephemeralrunnerset.node_room import LABEL_NODE_POOL_CAPPED
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import Forbidden, NotFound
from arc_scaleset.kube.resources import Resource
from arc_scaleset_lab.cluster.node_pool import NodePool, Resources, is_unschedulable
from arc_scaleset_lab.cluster.provisioner import NodeProvisioner
from arc_scaleset_lab.harness.waiting import eventually

RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
DELAY, IDLE = 2.0, 5.0

PoolFactory = Callable[..., NodePool]


@pytest.fixture
async def make_pool(kube: KubeClient, namespace: str) -> AsyncIterator[PoolFactory]:
    """Pools named after the test (no other test's pods ask for them); afterwards the namespace's pods are
    deleted while their nodes still exist (kwok finishes a deletion only on a node it manages), then the nodes."""
    made: list[NodePool] = []

    def make(*, cpu: str = "2", max_nodes: int = 2) -> NodePool:
        pool = NodePool(name=f"p-{uuid.uuid4().hex[:8]}", shape=Resources.parse(cpu, "8Gi", 10), delay=DELAY,
                        idle=IDLE, max_nodes=max_nodes)  # fmt: skip
        made.append(pool)
        return pool

    try:
        yield make
    finally:
        for pod in (await kube.list(resources.PODS, namespace=namespace)).items:
            with contextlib.suppress(NotFound):
                await kube.delete(resources.PODS, pod["metadata"]["name"], namespace=namespace)

        async def no_pods() -> bool:
            return not (await kube.list(resources.PODS, namespace=namespace)).items

        await eventually(no_pods, timeout=60, what=f"the pods of {namespace} to be deleted")
        for pool in made:
            for node in (await kube.list(resources.NODES, label_selector=pool.selector)).items:
                with contextlib.suppress(NotFound):
                    await kube.delete(resources.NODES, node["metadata"]["name"])


def _pod(name: str, pool: NodePool, *, cpu: str = "1", priority_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {"name": "runner", "image": "runner:1", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
        ],
        **pool.placement(),
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"metadata": {"name": name}, "spec": spec}


async def _pod_state(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    return await kube.get(resources.PODS, name, namespace=namespace)


async def _wait_unschedulable(kube: KubeClient, namespace: str, name: str) -> None:
    async def found_no_node() -> bool:
        return is_unschedulable(await _pod_state(kube, namespace, name))

    await eventually(found_no_node, timeout=30, what=f"the scheduler to find no node for pod {name}")


async def _wait_running_on(kube: KubeClient, namespace: str, name: str, node: str) -> None:
    async def running_there() -> bool:
        pod = await _pod_state(kube, namespace, name)
        return pod["spec"].get("nodeName") == node and pod["status"].get("phase") == "Running"

    await eventually(running_there, timeout=30, what=f"pod {name} to run on node {node}")


async def _pool_nodes(kube: KubeClient, pool: NodePool) -> list[str]:
    return [n["metadata"]["name"] for n in (await kube.list(resources.NODES, label_selector=pool.selector)).items]


async def _grow_one(kube: KubeClient, provisioner: NodeProvisioner, clock: FakeClock) -> str:
    """Scan once (a node is launched), let the delay pass, scan again: the node is created. Its name."""
    assert (await provisioner.scan()).launch == 1
    await clock.advance(DELAY)
    (created,) = (await provisioner.scan()).create
    return created


async def test_a_pod_that_fits_no_node_stays_pending_until_the_provisioner_adds_one_after_the_delay(
    kube: KubeClient, namespace: str, make_pool: PoolFactory
) -> None:
    pool, clock = make_pool(), FakeClock()
    provisioner = NodeProvisioner(kube, pool, clock=clock)
    await kube.create(resources.PODS, _pod("job", pool), namespace=namespace)
    await _wait_unschedulable(kube, namespace, "job")

    assert (await provisioner.scan()).launch == 1
    await clock.advance(DELAY - 0.1)
    assert (await provisioner.scan()).create == ()
    assert await _pool_nodes(kube, pool) == []
    assert is_unschedulable(await _pod_state(kube, namespace, "job"))

    await clock.advance(0.1)
    (node,) = (await provisioner.scan()).create
    await _wait_running_on(kube, namespace, "job", node)
    assert (await kube.get(resources.NODES, node))["status"]["allocatable"]["cpu"] == "2"  # kwok kept the shape
    assert provisioner.added == 1


async def test_a_node_empty_for_the_idle_bound_is_removed(
    kube: KubeClient, namespace: str, make_pool: PoolFactory
) -> None:
    pool, clock = make_pool(), FakeClock()
    provisioner = NodeProvisioner(kube, pool, clock=clock)
    await kube.create(resources.PODS, _pod("job", pool), namespace=namespace)
    await _wait_unschedulable(kube, namespace, "job")
    node = await _grow_one(kube, provisioner, clock)
    await _wait_running_on(kube, namespace, "job", node)

    await clock.advance(IDLE * 10)
    assert (await provisioner.scan()).remove == ()  # a node with a pod stays, however long
    node_labels = (await kube.get(resources.NODES, node))["metadata"]["labels"]
    assert LABEL_NODE_POOL_CAPPED not in node_labels, "1 node of 2 at most: more may come"
    await kube.delete(resources.PODS, "job", namespace=namespace)

    async def job_gone() -> bool:
        return not (await kube.list(resources.PODS, namespace=namespace)).items

    await eventually(job_gone, timeout=30, what="pod job to be deleted")
    assert (await provisioner.scan()).remove == ()  # empty from now on
    await clock.advance(IDLE - 0.1)
    assert (await provisioner.scan()).remove == ()
    await clock.advance(0.1)
    assert (await provisioner.scan()).remove == (node,)
    assert await _pool_nodes(kube, pool) == []
    assert provisioner.removed == 1


async def test_the_pool_never_grows_beyond_its_maximum(
    kube: KubeClient, namespace: str, make_pool: PoolFactory
) -> None:
    pool, clock = make_pool(cpu="1", max_nodes=1), FakeClock()
    provisioner = NodeProvisioner(kube, pool, clock=clock)
    for name in ("first", "second"):
        await kube.create(resources.PODS, _pod(name, pool), namespace=namespace)
        await _wait_unschedulable(kube, namespace, name)

    launched = await provisioner.scan()
    assert (launched.launch, len(launched.at_max)) == (1, 1)
    await clock.advance(DELAY)
    (node,) = (await provisioner.scan()).create

    async def one_runs_one_waits() -> list[str] | None:
        pods = [await _pod_state(kube, namespace, n) for n in ("first", "second")]
        running = [p for p in pods if p["spec"].get("nodeName") == node and p["status"].get("phase") == "Running"]
        waiting = [p["metadata"]["name"] for p in pods if is_unschedulable(p)]
        return waiting if len(running) == 1 and len(waiting) == 1 else None

    (left,) = await eventually(one_runs_one_waits, timeout=30, what="one pod on the node and one unschedulable")
    await clock.advance(DELAY * 10)
    again = await provisioner.scan()
    assert (again.launch, again.create, again.at_max) == (0, (), (f"{namespace}/{left}",))
    assert await _pool_nodes(kube, pool) == [node]
    # At its maximum, the pool says no more nodes will come (the contract of --capped-node-room, docs/capacity.md).
    labels = (await kube.get(resources.NODES, node))["metadata"]["labels"]
    assert labels[LABEL_NODE_POOL_CAPPED] == "true"


async def test_a_higher_priority_pod_preempts_a_lower_one_on_a_full_node(
    kube: KubeClient, namespace: str, make_pool: PoolFactory
) -> None:
    pool, clock = make_pool(cpu="1", max_nodes=1), FakeClock()
    provisioner = NodeProvisioner(kube, pool, clock=clock)
    high = f"high-{namespace}"[:63]
    await kube.create(PRIORITY_CLASSES, {"metadata": {"name": high}, "value": 1000})
    try:
        await kube.create(resources.PODS, _pod("placeholder", pool), namespace=namespace)
        await _wait_unschedulable(kube, namespace, "placeholder")
        node = await _grow_one(kube, provisioner, clock)
        await _wait_running_on(kube, namespace, "placeholder", node)

        await kube.create(resources.PODS, _pod("runner", pool, priority_class=high), namespace=namespace)

        await _wait_running_on(kube, namespace, "runner", node)  # the real scheduler evicted the placeholder
        with pytest.raises(NotFound):
            await _pod_state(kube, namespace, "placeholder")
    finally:
        await kube.delete(PRIORITY_CLASSES, high)


async def test_a_resource_quota_refuses_a_pod_beyond_it_at_admission(kube: KubeClient, namespace: str) -> None:
    pool = NodePool(name="quota-only")
    await kube.create(RESOURCE_QUOTAS, {"metadata": {"name": "runners"}, "spec": {"hard": {"requests.cpu": "1"}}},
                      namespace=namespace)  # fmt: skip

    async def quota_tracked() -> bool:
        quota = await kube.get(RESOURCE_QUOTAS, "runners", namespace=namespace)
        return bool((quota.get("status") or {}).get("hard"))

    await eventually(quota_tracked, timeout=30, what="the resource quota controller to track quota runners")
    await kube.create(resources.PODS, _pod("first", pool), namespace=namespace)

    with pytest.raises(Forbidden, match="exceeded quota: runners"):
        await kube.create(resources.PODS, _pod("second", pool), namespace=namespace)
