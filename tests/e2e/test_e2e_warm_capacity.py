"""Warm capacity (issue 27, item 3): placeholder pods hold a node's room, a runner pod takes it through the real
kube-scheduler's preemption without waiting for a node, the pool refills in the background (the recreated
placeholder is what asks the node autoscaler for the next node), and a placeholder is never a runner: never
registered with GitHub, never counted in the scale set's status, its runner set's counts or the runner metrics.

The lab's node provisioner runs on a :class:`FakeClock`, scan by scan: no node can appear unless the test lets the
delay pass, so "the runner was scheduled without waiting for a node" is exact, not a race against a timer.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.warm_capacity import LABEL_WARM_POOL
from arc_scaleset.clock import FakeClock
from arc_scaleset.controllers.settings import DEFAULT_WARM_PRIORITY_CLASS
from arc_scaleset.kube import resources
from arc_scaleset.kube.errors import AlreadyExists, NotFound
from arc_scaleset.kube.resources import Resource
from arc_scaleset_lab.cluster.node_pool import is_unschedulable
from arc_scaleset_lab.cluster.provisioner import NodeProvisioner
from arc_scaleset_lab.demo.cold_nodes import ColdNodes
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.system import System
from arc_scaleset_lab.harness.waiting import eventually
from tests.e2e.conftest import SCALE_SET_NAMESPACE
from tests.e2e.harness import ScaleSetHandle, arc

PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
EVENTS = Resource("events.k8s.io", "v1", "events", "Event")
WARM_RUNNERS = 2
NODE_DELAY = 600.0  # on the fake clock: no node appears unless the test advances it
JOB_SECONDS = 60.0  # long enough to look at the counts while the runner runs


@pytest.fixture
async def placeholder_class(system: System) -> str:
    """The placeholders' PriorityClass, as the controller chart creates it."""
    body = {
        "metadata": {"name": DEFAULT_WARM_PRIORITY_CLASS},
        "value": -10,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "placeholder pods of arc-scaleset's warm pools: any runner pod preempts them",
    }
    with contextlib.suppress(AlreadyExists):
        await system.kube.create(PRIORITY_CLASSES, body)
    return DEFAULT_WARM_PRIORITY_CLASS


async def _placeholders(system: System) -> list[dict[str, Any]]:
    return (
        await system.kube.list(resources.PODS, namespace=system.controller_namespace, label_selector=LABEL_WARM_POOL)
    ).items


def _live(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [pod for pod in pods if not pod["metadata"].get("deletionTimestamp")]


def _running_on(pods: list[dict[str, Any]], nodes: set[str]) -> list[dict[str, Any]]:
    return [p for p in _live(pods) if p["spec"].get("nodeName") in nodes and p["status"].get("phase") == "Running"]


async def _pool_nodes(system: System, cold: ColdNodes) -> set[str]:
    items = (await system.kube.list(resources.NODES, label_selector=cold.pool().selector)).items
    return {node["metadata"]["name"] for node in items}


async def _grow_one(provisioner: NodeProvisioner, clock: FakeClock) -> str:
    """One scan launches a node for the unschedulable placeholders; once the delay passed the next creates it."""
    assert (await provisioner.scan()).launch == 1
    await clock.advance(NODE_DELAY)
    (created,) = (await provisioner.scan()).create
    return created


def _series(metrics: str, family: str, **labels: str) -> float:
    """The sum of the ``family`` samples whose labels include ``labels``."""
    total = 0.0
    for line in metrics.splitlines():
        match = re.match(rf"^{re.escape(family)}\{{(?P<labels>[^}}]*)\}} (?P<value>\S+)$", line)
        if match and all(f'{key}="{value}"' in match["labels"] for key, value in labels.items()):
            total += float(match["value"])
    return total


async def test_runner_pods_preempt_placeholders_at_once_and_the_pool_refills_in_the_background(
    system: System, placeholder_class: str
) -> None:
    run = uuid.uuid4().hex[:6]
    cold = ColdNodes(delay=NODE_DELAY, idle=NODE_DELAY, max_nodes=3, node_size=WARM_RUNNERS, pool_name=f"warm-{run}")
    clock = FakeClock()
    provisioner = NodeProvisioner(system.kube, cold.pool(), clock=clock)
    name = f"warm-{run}"
    secret = await system.create_pat_secret(SCALE_SET_NAMESPACE, name=f"{name}-github-token")
    manifest = scale_sets.autoscaling_runner_set(
        name=name,
        namespace=SCALE_SET_NAMESPACE,
        config_url=system.config_url(),
        secret=secret,
        min_runners=0,
        max_runners=4,
        template=cold.place(scale_sets.runner_template()),
    )
    manifest["spec"]["warmCapacity"] = {"runners": WARM_RUNNERS}
    handle = ScaleSetHandle.tracked(system, namespace=SCALE_SET_NAMESPACE, name=name, min_runners=0)
    await system.kube.create(AUTOSCALING_RUNNER_SETS, manifest, namespace=SCALE_SET_NAMESPACE)
    try:
        # The pool: two placeholders with the runner's requests, waiting for the first node, then on it.
        await eventually(
            lambda: _waiting_for_a_node(system, WARM_RUNNERS), timeout=60, what="two unschedulable placeholders"
        )
        first = await _grow_one(provisioner, clock)

        async def warm() -> bool:
            return len(_running_on(await _placeholders(system), {first})) == WARM_RUNNERS

        await eventually(warm, timeout=60, what=f"both placeholders running on node {first}")
        await handle.wait_ready()

        # A job: its runner pod takes a placeholder's room on the node that exists; no node is added meanwhile.
        await handle.enqueue(1, duration=JOB_SECONDS)

        async def runner_on_first_node() -> dict[str, Any] | None:
            for runner in (await handle.snapshot()).live_runners():
                with contextlib.suppress(NotFound):  # the runner's pod may not exist yet
                    pod = await system.kube.get(resources.PODS, runner.name, namespace=SCALE_SET_NAMESPACE)
                    if pod["spec"].get("nodeName") == first:
                        return pod
            return None

        runner_pod = await eventually(runner_on_first_node, timeout=90, what=f"the runner pod bound to node {first}")
        assert await _pool_nodes(system, cold) == {first}, "the runner waited for no node: none was added"
        assert provisioner.launches == {}

        # The pool refills in the background: the preempted placeholder comes back and asks for the next node.
        await eventually(lambda: _waiting_for_a_node(system, 1), timeout=60, what="the preempted placeholder back")
        second = await _grow_one(provisioner, clock)

        async def refilled() -> bool:
            pods = await _placeholders(system)
            return len(_running_on(pods, {first})) == 1 and len(_running_on(pods, {second})) == 1

        await eventually(refilled, timeout=60, what=f"the pool refilled: one placeholder on {first}, one on {second}")

        # A placeholder is no runner anywhere.
        placeholder_names = {pod["metadata"]["name"] for pod in await _placeholders(system)}
        snapshot = await handle.snapshot()
        runner_names = {runner.name for runner in snapshot.live_runners()}
        assert runner_names == {runner_pod["metadata"]["name"]}
        assert not placeholder_names & {r["name"] for r in await system.sim.runners()}
        assert await handle.registered_runner_names() <= runner_names

        async def counted() -> str | None:
            # The runner counts are metrics (by default not in the status, as in ARC #4557): a placeholder is none.
            text = await system.controller_metrics()
            runners = sum(
                _series(text, f"gha_controller_{phase}_ephemeral_runners", name=name)
                for phase in ("pending", "running", "failed")
            )
            preempted = _series(text, "gha_warm_placeholder_preemptions_total")
            ready = _series(text, "gha_warm_placeholders", state="ready")
            return text if runners == 1 and preempted >= 1 and ready == WARM_RUNNERS else None

        await eventually(counted, timeout=30, what="metrics: one runner, one preemption, two ready placeholders")

        async def told() -> bool:
            ars = await system.kube.get(AUTOSCALING_RUNNER_SETS, name, namespace=SCALE_SET_NAMESPACE)
            conditions = {c["type"]: c for c in ars["status"].get("conditions") or []}
            events = (await system.kube.list(EVENTS, namespace=SCALE_SET_NAMESPACE)).items
            preempted = any(
                e.get("reason") == "WarmPlaceholderPreempted" and (e.get("regarding") or {}).get("name") == name
                for e in events
            )
            warm = conditions.get("WarmCapacity") or {}
            return preempted and warm.get("status") == "True" and warm.get("reason") == "Runners"

        await eventually(told, timeout=30, what="a WarmCapacity condition and a WarmPlaceholderPreempted Event")

        # What a platform engineer reads (`kubectl arc status`, `explain`): the pool, its size and why, and the
        # placeholders runner pods took.
        code, output = await arc(system, "status", name, "-n", SCALE_SET_NAMESPACE, "-o", "json")
        assert code == 0, output
        warm = json.loads(output)["warmCapacity"]
        assert (warm["status"], warm["reason"], warm["asked"]) == ("True", "Runners", {"runners": WARM_RUNNERS})
        assert f"keeps {WARM_RUNNERS} placeholder(s): the largest ask of its members" in warm["message"]
        assert f"this scale set asks for {WARM_RUNNERS}, from warmCapacity.runners" in warm["message"]
        assert warm["preemptionEvents"] >= 1
        code, output = await arc(system, "explain", name, "-n", SCALE_SET_NAMESPACE, "-o", "json")
        assert code == 0, output
        (line,) = [f["line"] for f in json.loads(output)["findings"] if f["rule"] == "warm-capacity"]
        assert line.startswith(warm["message"])
        assert "runner pods took placeholders' room" in line
        await handle.assert_every_job_ran_once(timeout=JOB_SECONDS + 60)
    finally:
        await handle.stop_tracking()
        with contextlib.suppress(Exception):
            await _delete_scale_set_placeholders_and_nodes(system, handle, cold)


async def _waiting_for_a_node(system: System, count: int) -> bool:
    return sum(1 for pod in _live(await _placeholders(system)) if is_unschedulable(pod)) == count


async def _delete_scale_set_placeholders_and_nodes(system: System, handle: ScaleSetHandle, cold: ColdNodes) -> None:
    await handle.delete(timeout=JOB_SECONDS + 60)

    async def no_placeholders() -> bool:
        return not await _placeholders(system)

    # A pool without members goes: the controller deletes its placeholders (while their nodes still exist: kwok
    # finishes a pod's deletion only on a node it manages), then the nodes go.
    await eventually(no_placeholders, timeout=60, what="the placeholders of a pool without members to be deleted")
    for node in await _pool_nodes(system, cold):
        with contextlib.suppress(NotFound):
            await system.kube.delete(resources.NODES, node)
