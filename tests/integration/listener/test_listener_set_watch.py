"""The listener watches its EphemeralRunnerSet and patches it only when something changed (docs/listener.md, "Only
what changed"; issue 30): against the real control plane and the simulated GitHub.

- the listener Role's grant is exactly its set: its ServiceAccount lists and watches it by name, and is refused
  any other set, and any list without the name;
- an idle listener polling empty sends no patch after its first; it still learns a new capacity the controller
  writes (from the watch) and advertises it; a job still scales the set up and back down to the force-state.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from arc_scaleset.api.constants import EPHEMERAL_RUNNER_SETS
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import Forbidden
from arc_scaleset.listener.app import build_listener
from arc_scaleset.listener.set_watch import SetWatch
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim.state import JobState
from tests.integration.listener.conftest import (
    FAST,
    SCALE_SET_NAME,
    ListenerSim,
    admin_client,
    create_runner,
    ers_spec,
    listener_config,
    runner_spec,
    wait_for_replicas,
)
from tests.integration.listener.test_listener_writes_no_files import listener_kubeconfig

pytestmark = pytest.mark.cluster

OTHER_SET = "another-team"
ERS_PATCH = ("patch", "ephemeralrunnersets")


@pytest.fixture
async def listener_kube(cluster: TestCluster) -> AsyncIterator[KubeClient]:
    """The listener's own client, so its requests are counted apart from the test's."""
    client = KubeClient.from_kubeconfig(cluster.kubeconfig)
    yield client
    await client.close()


async def test_the_listeners_service_account_watches_its_own_set_by_name_and_no_other(
    tmp_path: Path, cluster: TestCluster, kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim
) -> None:
    other = {"metadata": {"name": OTHER_SET}, "spec": {"patchID": 0, "ephemeralRunnerSpec": runner_spec(listener_sim)}}
    await kube.create(EPHEMERAL_RUNNER_SETS, other, namespace=namespace)
    kubeconfig = await listener_kubeconfig(kube, cluster, namespace, tmp_path)
    client = KubeClient.from_kubeconfig(kubeconfig)
    watch = SetWatch(client, namespace=namespace, name=SCALE_SET_NAME)
    watch.start()
    try:
        await eventually(lambda: watch.live, "the listener's watch of its set to list it")
        await kube.patch(EPHEMERAL_RUNNER_SETS, SCALE_SET_NAME, {"status": {"advertisedCapacity": 2}},
                         namespace=namespace, subresource="status")  # fmt: skip
        await eventually(lambda: watch.capacity() == 2, "the watch to bring the controller's capacity")
        assert (await client.get(EPHEMERAL_RUNNER_SETS, SCALE_SET_NAME, namespace=namespace))["metadata"]["name"]

        with pytest.raises(Forbidden):
            await client.get(EPHEMERAL_RUNNER_SETS, OTHER_SET, namespace=namespace)
        with pytest.raises(Forbidden):
            await client.list(EPHEMERAL_RUNNER_SETS, namespace=namespace, field_selector=f"metadata.name={OTHER_SET}")
        with pytest.raises(Forbidden):
            await client.list(EPHEMERAL_RUNNER_SETS, namespace=namespace)
        other_watch = SetWatch(client, namespace=namespace, name=OTHER_SET)
        other_watch.start()
        await eventually(lambda: other_watch.refused is not None, "the other set's watch to be refused")
        assert other_watch.content() is None
        await other_watch.stop()
    finally:
        await watch.stop()
        await client.close()


async def test_an_idle_listener_patches_its_set_once_learns_a_new_capacity_and_still_scales_for_a_job(
    kube: KubeClient, listener_kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim
) -> None:
    sim = listener_sim.sim
    runner = f"{SCALE_SET_NAME}-runner-w4tch"
    await create_runner(kube, namespace, listener_sim, runner)
    async with admin_client(sim) as client:
        await client.generate_jit_runner_config(listener_sim.scale_set_id, name=runner)
    sim.state.runner_online(runner)

    def polls() -> int:
        return sum(1 for r in sim.requests if r.route == "get_message")

    app = build_listener(listener_config(listener_sim, namespace, min_runners=1, max_runners=5), kube=listener_kube,
                         owner="listener-pod-0", timing=FAST)  # fmt: skip
    task = asyncio.create_task(app.run())
    try:
        await wait_for_replicas(kube, namespace, 1)
        assert app.set_watch is not None
        await eventually(lambda: app.set_watch is not None and app.set_watch.live, "the watch of the set")
        start = polls()
        await sim.changes.wait_until(lambda: polls() >= start + 2, within=20)
        patches = listener_kube.request_counts[ERS_PATCH]
        skipped = app.listener.scaler.skipped

        # Idle: six empty long polls, no patch (ARC's listener, and this one before, sent one after each).
        await sim.changes.wait_until(lambda: polls() >= start + 8, within=30)
        assert listener_kube.request_counts[ERS_PATCH] == patches
        assert app.listener.scaler.skipped >= skipped + 5

        # The controller publishes a smaller capacity: the listener advertises it without a patch of its own.
        await kube.patch(EPHEMERAL_RUNNER_SETS, SCALE_SET_NAME, {"status": {"advertisedCapacity": 2}},
                         namespace=namespace, subresource="status")  # fmt: skip
        await sim.changes.wait_until(
            lambda: any(r.max_capacity == "2" for r in sim.requests if r.route == "get_message"), within=20
        )
        assert listener_kube.request_counts[ERS_PATCH] == patches

        # A job scales the set up, and once it completed, back to the minimum under the force-state patch ID 0.
        request_id = sim.state.enqueue_job(SCALE_SET_NAME, repository="octo-org/hello", duration=0.5).request_id
        await wait_for_replicas(kube, namespace, 2)
        await sim.changes.wait_until(lambda: sim.state.jobs[request_id].state is JobState.COMPLETED, within=20)

        async def at_rest() -> bool:
            spec = await ers_spec(kube, namespace)
            return spec.get("replicas") == 1 and spec.get("patchID") == 0

        await eventually(at_rest, "the set back at its minimum under patch ID 0")
        assert listener_kube.request_counts[ERS_PATCH] > patches
    finally:
        app.stop.set()
        await asyncio.wait_for(task, timeout=30)
        await app.aclose()
