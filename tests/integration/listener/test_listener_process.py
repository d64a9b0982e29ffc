"""``arc-scaleset listener`` as a pod runs it: a subprocess configured only by ``LISTENER_CONFIG_PATH``."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from arc_scaleset.kube.client import KubeClient
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.sim.state import JobState
from tests.integration.listener.conftest import (
    GRACE_PERIOD,
    SCALE_SET_NAME,
    ListenerSim,
    admin_client,
    create_runner,
    listener_process,
)

pytestmark = pytest.mark.cluster


async def test_sigterm_deletes_the_session_within_the_grace_period(
    tmp_path: Path, cluster: TestCluster, kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim
) -> None:
    sim = listener_sim.sim
    async with listener_process(tmp_path, cluster, listener_sim, namespace) as listener:
        await listener.read_until("message session created")
        assert [s.owner for s in sim.state.sessions.values()] != []
        listener.process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(listener.process.wait(), timeout=GRACE_PERIOD)
    assert code == 0
    assert not sim.state.sessions
    assert any(r.route == "delete_session" and r.status == 204 for r in sim.requests)


async def test_the_metrics_endpoint_serves_arcs_names_and_labels_after_a_job_runs(
    tmp_path: Path, cluster: TestCluster, kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim
) -> None:
    sim = listener_sim.sim
    runner = f"{SCALE_SET_NAME}-runner-m3tr1"
    await create_runner(kube, namespace, listener_sim, runner)
    async with admin_client(sim) as client:
        await client.generate_jit_runner_config(listener_sim.scale_set_id, name=runner)
    sim.state.runner_online(runner)
    async with listener_process(tmp_path, cluster, listener_sim, namespace) as listener:
        started = await listener.read_until("listener starting")
        port = started["ports"][0]
        await listener.read_until("message session created")
        request_id = sim.state.enqueue_job(
            SCALE_SET_NAME, repository="octo-org/hello", display_name="build", duration=0.2
        ).request_id
        await sim.changes.wait_until(lambda: sim.state.jobs[request_id].state is JobState.COMPLETED, within=20)
        await listener.read_until("job completed")
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
                assert response.status == 200
                text = await response.text()
            async with http.get(f"http://127.0.0.1:{port}/healthz") as response:
                assert response.status == 200
            async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                assert response.status == 200
        listener.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(listener.process.wait(), timeout=GRACE_PERIOD) == 0

    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    scale_set = (
        ("enterprise", ""),
        ("name", SCALE_SET_NAME),
        ("namespace", namespace),
        ("organization", "octo-org"),
        ("repository", ""),
    )
    for gauge in ("gha_assigned_jobs", "gha_running_jobs", "gha_registered_runners", "gha_busy_runners",
                  "gha_idle_runners", "gha_desired_runners"):  # fmt: skip
        assert (gauge, scale_set) in samples, gauge
    assert samples[("gha_min_runners", scale_set)] == 0
    assert samples[("gha_max_runners", scale_set)] == 5
    job = (("enterprise", ""), ("event_name", "push"), ("job_name", "build"), ("organization", "octo-org"),
           ("repository", "hello"))  # fmt: skip
    assert samples[("gha_started_jobs_total", job)] == 1
    assert samples[("gha_completed_jobs_total", tuple(sorted((*job, ("job_result", "succeeded")))))] == 1
    assert samples[("gha_job_startup_duration_seconds_count", job)] == 1
    assert samples[("gha_job_queue_duration_seconds_count", job)] == 1
    assert not any(name.endswith("_created") for name, _ in samples)
