"""The warm-pool controller against the real API server: scale sets of two namespaces with one runner shape share
one pool of placeholders (as many as the largest ask, not the sum); a scale set whose shape changes leaves for the
other shape's pool; a scale set that stops asking leaves, and its condition goes; a shape above the controller's
bound gets no placeholder and says why; a member set's rise in replicas hands placeholders' room to the runners
to come. Only the warm-pool controller runs (placeholders are its whole output)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import LABEL_SCALE_SET_NAME
from arc_scaleset.api.warm_capacity import LABEL_WARM_POOL
from arc_scaleset.cmd.controller_setup import cache_label_selectors
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.settings import DEFAULT_WARM_PRIORITY_CLASS, ControllerSettings, parse_resource_bound
from arc_scaleset.controllers.warmcapacity.reconciler import setup_warm_capacity_controller
from arc_scaleset.controllers.warmcapacity.shape import runner_shape
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import AlreadyExists
from arc_scaleset.kube.manager import Manager
from arc_scaleset.kube.resources import Resource
from arc_scaleset_lab.cluster.node_pool import NodePool, Resources
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixture
    controller_namespace_fixture,
    temporary_namespace,
)

PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)

Running = Callable[..., AbstractAsyncContextManager[str]]


def _template(cpu: str = "500m") -> dict[str, Any]:
    return {
        "spec": {
            "containers": [
                {"name": "runner", "image": "runner:warm", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
            ]
        }
    }


def _scale_set(name: str, *, runners: int | None, cpu: str = "500m") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "githubConfigUrl": "https://github.com/org",
        "githubConfigSecret": "gh-secret",
        "maxRunners": 10,
        "template": _template(cpu),
    }
    if runners is not None:
        spec["warmCapacity"] = {"runners": runners}
    return {"metadata": {"name": name}, "spec": spec}


@pytest.fixture
async def other_namespace(kube: KubeClient) -> AsyncIterator[str]:
    async with temporary_namespace(kube, "t-warm-other") as name:
        yield name


@pytest.fixture
def running(
    kube: KubeClient, namespace: str, other_namespace: str, controller_namespace: str, crds_installed: list[str]
) -> Running:
    """``async with running(**settings)``: the warm-pool controller alone, until the block ends."""

    @asynccontextmanager
    async def run(**settings: Any) -> AsyncIterator[str]:
        with contextlib.suppress(AlreadyExists):
            await kube.create(PRIORITY_CLASSES, {"metadata": {"name": DEFAULT_WARM_PRIORITY_CLASS}, "value": -10,
                                                 "preemptionPolicy": "Never"})  # fmt: skip
        manager = Manager(kube, namespaces={namespace, other_namespace, controller_namespace},
                          label_selectors=cache_label_selectors(), metrics_address=None)  # fmt: skip
        options = ControllerSettings(controller_namespace=controller_namespace, controller_image="c:1", **settings)
        ctx = ControllerContext.create(kube, manager, options, environ={})
        setup_warm_capacity_controller(ctx)
        task = asyncio.create_task(manager.run())
        try:
            await eventually(lambda: manager.ready, "the manager's caches to sync")
            yield controller_namespace
        finally:
            manager.request_stop()
            await asyncio.wait_for(task, 30)
            await ctx.github.pool.aclose()

    return run


async def _pools(kube: KubeClient, controller_namespace: str) -> dict[str, set[str]]:
    pods = (await kube.list(resources.PODS, namespace=controller_namespace, label_selector=LABEL_WARM_POOL)).items
    found: dict[str, set[str]] = {}
    for pod in pods:
        if not pod["metadata"].get("deletionTimestamp"):
            found.setdefault(pod["metadata"]["labels"][LABEL_WARM_POOL], set()).add(pod["metadata"]["name"])
    return found


async def _condition(kube: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    ars = await kube.get(AUTOSCALING_RUNNER_SETS, name, namespace=namespace)
    return next((c for c in (ars.get("status") or {}).get("conditions") or [] if c["type"] == "WarmCapacity"), None)


async def test_scale_sets_of_one_shape_share_a_pool_and_leave_it_when_their_shape_or_ask_changes(
    kube: KubeClient, namespace: str, other_namespace: str, running: Running
) -> None:
    small, large = runner_shape(_template("500m")).pool_id, runner_shape(_template("1")).pool_id
    async with running() as controller_namespace:
        await kube.create(AUTOSCALING_RUNNER_SETS, _scale_set("team-a", runners=2), namespace=namespace)
        await kube.create(AUTOSCALING_RUNNER_SETS, _scale_set("team-b", runners=3), namespace=other_namespace)

        async def shared() -> bool:
            return await _pools(kube, controller_namespace) == {small: {f"warm-{small}-{i}" for i in range(3)}}

        await eventually(shared, timeout=30, what="one pool of 3 placeholders for both scale sets (the largest ask)")

        async def told(ns: str, name: str, reason: str, words: str) -> bool:
            condition = await _condition(kube, ns, name)
            return bool(condition and condition["reason"] == reason and words in condition["message"])

        await eventually(lambda: told(namespace, "team-a", "Runners", "shared by 2 scale sets"), timeout=30)

        # team-b's runners grow: another shape, another pool; team-a's pool shrinks to team-a's own ask.
        await kube.patch(AUTOSCALING_RUNNER_SETS, "team-b", {"spec": {"template": _template("1")}},
                         namespace=other_namespace)  # fmt: skip

        async def split() -> bool:
            return await _pools(kube, controller_namespace) == {
                small: {f"warm-{small}-{i}" for i in range(2)},
                large: {f"warm-{large}-{i}" for i in range(3)},
            }

        await eventually(split, timeout=30, what="team-b in a pool of its own shape, team-a's pool at 2")

        # team-a stops asking: its pool goes, and so does its condition.
        await kube.patch(AUTOSCALING_RUNNER_SETS, "team-a", {"spec": {"warmCapacity": None}}, namespace=namespace)

        async def left() -> bool:
            pools = await _pools(kube, controller_namespace)
            return small not in pools and await _condition(kube, namespace, "team-a") is None

        await eventually(left, timeout=30, what="team-a's pool deleted and its WarmCapacity condition removed")
        assert (await _pools(kube, controller_namespace))[large] == {f"warm-{large}-{i}" for i in range(3)}

        # The last member deleted: no placeholder is left.
        await kube.delete(AUTOSCALING_RUNNER_SETS, "team-b", namespace=other_namespace)

        async def empty() -> bool:
            return not await _pools(kube, controller_namespace)

        await eventually(empty, timeout=30, what="no placeholder once no scale set asks for warm capacity")


async def test_a_shape_above_the_controllers_bound_gets_no_placeholder_and_says_why(
    kube: KubeClient, namespace: str, running: Running
) -> None:
    bound = parse_resource_bound("cpu=1,memory=4Gi", flag="--warm-placeholder-max-resources")
    async with running(warm_placeholder_max_resources=bound) as controller_namespace:
        await kube.create(AUTOSCALING_RUNNER_SETS, _scale_set("big", runners=2, cpu="2"), namespace=namespace)

        async def refused() -> dict[str, Any] | None:
            condition = await _condition(kube, namespace, "big")
            return condition if condition and condition["reason"] == "WarmShapeRefused" else None

        condition = await eventually(refused, timeout=30, what="a WarmShapeRefused condition")
        assert condition["status"] == "False"
        assert "requests cpu=2 (above 1 allowed by --warm-placeholder-max-resources)" in condition["message"]
        assert await _pools(kube, controller_namespace) == {}
        events = (await kube.list(resources.EVENTS, namespace=namespace)).items
        assert any(e.get("reason") == "WarmShapeRefused" for e in events)


async def test_a_placeholder_the_api_server_refuses_is_told_on_the_scale_set(
    kube: KubeClient, namespace: str, running: Running
) -> None:
    async with running(warm_priority_class=f"missing-{uuid.uuid4().hex[:6]}") as controller_namespace:
        await kube.create(AUTOSCALING_RUNNER_SETS, _scale_set("no-class", runners=1), namespace=namespace)

        async def refused() -> dict[str, Any] | None:
            condition = await _condition(kube, namespace, "no-class")
            return condition if condition and condition["reason"] == "PlaceholdersRefused" else None

        condition = await eventually(refused, timeout=30, what="a PlaceholdersRefused condition")
        assert condition["status"] == "False"
        assert "PriorityClass" in condition["message"], condition["message"]
        assert await _pools(kube, controller_namespace) == {}


async def test_a_member_sets_rise_in_replicas_releases_placeholders_before_any_runner_pod_exists(
    kube: KubeClient, namespace: str, running: Running
) -> None:
    """The handover (controllers/warmcapacity/handover.py): the listener raising a member's EphemeralRunnerSet by 2
    frees the room of 2 placeholders on the node at once, so the runner pods to come bind without preempting (the
    scheduler's async preemption can park a preemptor until another pod on the node changes: bench/README.md); the
    2 come back under their names, kept off that node, and wait for the next one."""
    pool = NodePool(name=f"warm-{uuid.uuid4().hex[:6]}", shape=Resources.parse("4", "16Gi", 110))
    node = f"{pool.name}-0"
    template = _template("1")
    template["spec"].update(pool.placement())
    scale_set = _scale_set("team-a", runners=3)
    scale_set["spec"]["template"] = template
    pool_id = runner_shape(template).pool_id
    await kube.create(resources.NODES, pool.node(node))
    try:
        async with running() as controller_namespace:
            await kube.create(AUTOSCALING_RUNNER_SETS, scale_set, namespace=namespace)
            await kube.create(EPHEMERAL_RUNNER_SETS, _runner_set("team-a", namespace, replicas=0), namespace=namespace)

            async def on_the_node() -> dict[str, str] | None:
                pods = await _placeholder_pods(kube, controller_namespace)
                held = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods if p["spec"].get("nodeName") == node}
                return held if len(held) == 3 else None

            before = await eventually(on_the_node, timeout=60, what=f"3 placeholders on node {node}")
            await kube.patch(EPHEMERAL_RUNNER_SETS, "team-a", {"spec": {"replicas": 2}}, namespace=namespace)

            async def released() -> list[dict[str, Any]] | None:
                pods = await _placeholder_pods(kube, controller_namespace)
                if {p["metadata"]["name"] for p in pods} != set(before):
                    return None
                made_again = [p for p in pods if p["metadata"]["uid"] != before[p["metadata"]["name"]]]
                return made_again if len(made_again) == 2 else None

            made_again = await eventually(released, timeout=30, what="2 placeholders released and made again")
            assert {p["metadata"]["name"] for p in made_again} == {f"warm-{pool_id}-2", f"warm-{pool_id}-1"}
            for pod in made_again:
                assert not pod["spec"].get("nodeName"), "the room released on the node is the runners'"
                terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                assert {"key": "metadata.name", "operator": "NotIn", "values": [node]} in (
                    terms["nodeSelectorTerms"][0]["matchFields"]
                )
            await kube.delete(AUTOSCALING_RUNNER_SETS, "team-a", namespace=namespace)
            await eventually(lambda: _no_placeholders(kube, controller_namespace), timeout=60, what="the pool gone")
    finally:
        await kube.delete(resources.NODES, node, missing_ok=True)


def _runner_set(name: str, namespace: str, *, replicas: int) -> dict[str, Any]:
    labels = {LABEL_SCALE_SET_NAME: name, "actions.github.com/scale-set-namespace": namespace}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": replicas, "patchID": 0, "ephemeralRunnerSpec": {
            "githubConfigUrl": "https://github.com/org", "githubConfigSecret": "gh-secret", "runnerScaleSetId": 1,
            **_template()}},
    }  # fmt: skip


async def _placeholder_pods(kube: KubeClient, controller_namespace: str) -> list[dict[str, Any]]:
    pods = (await kube.list(resources.PODS, namespace=controller_namespace, label_selector=LABEL_WARM_POOL)).items
    return [pod for pod in pods if not pod["metadata"].get("deletionTimestamp")]


async def _no_placeholders(kube: KubeClient, controller_namespace: str) -> bool:
    pods = (await kube.list(resources.PODS, namespace=controller_namespace, label_selector=LABEL_WARM_POOL)).items
    return not pods
