"""``arc-scaleset listener`` as a pod runs it: a subprocess configured only by ``LISTENER_CONFIG_PATH``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from arc_scaleset.kube.client import KubeClient
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.sim.state import JobState
from tests.integration.listener.conftest import (
    PAT,
    SCALE_SET_NAME,
    ListenerSim,
    admin_client,
    create_runner,
)

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[3]
GRACE_PERIOD = 60.0  # terminationGracePeriodSeconds of ARC's listener pod


class ListenerProcess:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[dict[str, Any]] = []

    async def read_until(self, message: str, *, within: float = 30.0) -> dict[str, Any]:
        """Read JSON log lines until one with ``msg == message``; return it."""
        assert self.process.stdout is not None
        async with asyncio.timeout(within):
            while True:
                raw = await self.process.stdout.readline()
                if not raw:
                    raise AssertionError(f"listener exited before logging {message!r}: {self.lines[-5:]}")
                try:
                    line = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                self.lines.append(line)
                if line.get("msg") == message:
                    return dict(line)


@contextlib.asynccontextmanager
async def listener_process(
    tmp_path: Path, cluster: TestCluster, env: ListenerSim, namespace: str
) -> AsyncIterator[ListenerProcess]:
    config = {
        "configure_url": env.config_url,
        "vault_type": "",
        "github_token": PAT,
        "ephemeral_runner_set_namespace": namespace,
        "ephemeral_runner_set_name": SCALE_SET_NAME,
        "max_runners": 5,
        "min_runners": 0,
        "runner_scale_set_id": env.scale_set_id,
        "runner_scale_set_name": SCALE_SET_NAME,
        "server_root_ca": "",
        "log_level": "info",
        "log_format": "json",
        "metrics_addr": "127.0.0.1:0",
        "metrics_endpoint": "/metrics",
        "metrics": None,
    }
    path = tmp_path / "config.json"
    path.write_bytes(orjson.dumps(config))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "arc_scaleset.cli",
        "listener",
        env={**os.environ, "LISTENER_CONFIG_PATH": str(path), "KUBECONFIG": str(cluster.kubeconfig)},
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
    )
    handle = ListenerProcess(process)
    try:
        yield handle
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


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
