"""The pod player against the real local control plane: kwok runs the pod, the player plays its runner."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.node.runner_pods import InProcessRunnerService, PodPlayer
from arc_scaleset_lab.sim import JobState, SimConfig, SimulatedGitHub

pytestmark = pytest.mark.cluster


def runner_pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"actions-ephemeral-runner": "True"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "runner", "image": "runner:latest"}],
            # What is tested is the player, not scheduling: do not wait for the node lifecycle controller
            # to lift the kwok node's initial not-ready taint.
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


async def phase(kube: KubeClient, namespace: str, name: str) -> str | None:
    pod = await kube.get(resources.PODS, name, namespace=namespace)
    value: str | None = pod.get("status", {}).get("phase")
    return value


async def test_a_running_pod_takes_a_job_and_ends_succeeded_with_exit_zero(kube: KubeClient, namespace: str) -> None:
    async with await SimulatedGitHub.start(config=SimConfig(long_poll_seconds=0.2)) as sim:
        tenant = sim.state.tenant_for_scope("org")
        scale_set = sim.state.create_scale_set(tenant.id, name="arc", runner_group_id=1, labels=[], disable_update=True)
        for name in ("runner-ok", "runner-bad"):
            sim.state.generate_jit_config(tenant.id, scale_set.id, name=name, work_folder="", service_url="x")
        job = sim.state.enqueue_job("arc", duration=0.5).request_id
        sim.state.acquire_jobs(scale_set.id, [job])

        player = PodPlayer(kube, InProcessRunnerService(sim.state, sim.changes), namespace=namespace, poll_timeout=1.0)
        task = asyncio.create_task(player.run())
        try:
            await kube.create(resources.PODS, runner_pod("runner-ok"), namespace=namespace)
            await sim.changes.wait_until(lambda: sim.state.jobs[job].state == JobState.COMPLETED, within=60)
            assert sim.state.jobs[job].runner_name == "runner-ok"

            async def succeeded() -> bool:
                return await phase(kube, namespace, "runner-ok") == "Succeeded"

            await eventually(succeeded, timeout=30, what="runner-ok to succeed")
            pod = await kube.get(resources.PODS, "runner-ok", namespace=namespace)
            [runner] = pod["status"]["containerStatuses"]
            assert runner["state"]["terminated"]["exitCode"] == 0

            await kube.create(resources.PODS, runner_pod("runner-bad"), namespace=namespace)
            await sim.changes.wait_until(
                lambda: any(r.name == "runner-bad" and r.online for r in sim.state.runners.values()), within=60
            )
            sim.state.request_runner_exit("runner-bad", exit_code=7, reason="requested")

            async def failed() -> bool:
                return await phase(kube, namespace, "runner-bad") == "Failed"

            await eventually(failed, timeout=30, what="runner-bad to fail")
            pod = await kube.get(resources.PODS, "runner-bad", namespace=namespace)
            assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 7
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
