"""A status write that would wait for the client's rate limit is held in memory, and the worker goes on
registering runners (docs/controllers.md, "A status write yields to a busy rate limit"), on the real control
plane with a real client-side limit.

The EphemeralRunners' bucket is taken by other requests (what a scale-up's creates do). The controller's one
worker first meets a runner whose status must change, then two new runners: it holds the first one's write
and registers the other two and creates their pods meanwhile (a write waiting in the limiter held the worker
until the bucket had a token again, 40 s here). Once the bucket has tokens again, every held status is
written, none lost.
"""

from __future__ import annotations

import asyncio

import pytest

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.controllers.ephemeralrunnerset.builders import desired_ephemeral_runner, with_runner_instance
from arc_scaleset.kube.client import KubeClient, PatchType
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.runner_harness import harness

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

QPS = 2.0
BUSY_REQUESTS = 80
"""Requests the test queues on the runners' bucket: 40 s of it at ``QPS``, longer than the test waits."""


async def test_a_busy_bucket_holds_a_status_write_while_the_one_worker_registers_new_runners(
    cluster: TestCluster, kube: KubeClient, namespace: str, crds_installed: list[str]
) -> None:
    limited = KubeClient.from_kubeconfig(cluster.kubeconfig, qps=QPS, burst=5)
    busy: list[asyncio.Future[object]] = []
    try:
        async with harness(limited, namespace) as h:
            await h.start(runner_max_concurrent_reconciles=1)
            ers = await h.create_ers(replicas=1, patch_id=0)
            (first,) = await h.wait_running(1)
            await h.stop()
            name = first["metadata"]["name"]
            # Its status says Pending while its pod runs: the runner's next pass must write Running.
            await kube.patch(EPHEMERAL_RUNNERS, name, {"status": {"phase": "Pending"}}, namespace=namespace,
                             subresource="status", patch_type=PatchType.MERGE)  # fmt: skip
            # The runners' bucket (gets and writes of EphemeralRunners) is taken for the next 40 s.
            busy = [
                asyncio.ensure_future(limited.get(EPHEMERAL_RUNNERS, name, namespace=namespace))
                for _ in range(BUSY_REQUESTS)
            ]
            await h.start("EphemeralRunner", runner_max_concurrent_reconciles=1)
            # Two new runners, created (on a client of its own) after the first one is queued.
            body = desired_ephemeral_runner(ers)
            created = [await kube.create(EPHEMERAL_RUNNERS, with_runner_instance(body), namespace=namespace)
                       for _ in range(2)]  # fmt: skip
            new = {runner["metadata"]["name"] for runner in created}

            await eventually(lambda: new <= h.registered(), "the new runners registered by the one worker", timeout=20)

            async def pods_created() -> bool:
                return new <= {pod["metadata"]["name"] for pod in await h.pods()}

            await eventually(pods_created, "the new runners' pods", timeout=20)
            # Meanwhile no status was written: a write would have waited for the bucket, and held the worker.
            listed = (await kube.list(EPHEMERAL_RUNNERS, namespace=namespace)).items
            statuses = {r["metadata"]["name"]: r.get("status") or {} for r in listed}
            assert statuses[name].get("phase") == "Pending"
            assert not [n for n in new if statuses[n].get("runnerId")]

            await asyncio.gather(*busy)
            running = await h.wait_running(3, timeout=60)
            ids = {runner.name: runner.id for runner in h.sim.state.runners.values()}
            assert {r["metadata"]["name"]: r["status"]["runnerId"] for r in running} == {
                n: ids[n] for n in new | {name}
            }
    finally:
        for request in busy:
            request.cancel()
        await limited.close()
