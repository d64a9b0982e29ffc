"""Fault injection on the wire, the /_sim admin API (through SimAdminClient) and the `arc-scaleset sim` command."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from arc_scaleset_lab.sim import FaultRule, JobState, SimAdminClient, SimulatedGitHub
from tests.integration.lab.sim.conftest import PAT, Tenant, acquire_jobs, get_message, register


async def test_injected_5xx_and_429_answer_in_the_routes_dialect_then_stop(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    sim.faults.add(FaultRule(route="get_runner_groups", status=503, count=2))
    sim.faults.add(FaultRule(route="registration_token", status=429, retry_after=7, count=1))
    for _ in range(2):
        status, body = await tenant.call("GET", "_apis/runtime/runnergroups/")
        assert status == 503
        assert set(body) == {"typeName", "message"}
    status, _ = await tenant.call("GET", "_apis/runtime/runnergroups/")
    assert status == 200
    async with http.post(
        f"{sim.api_url}/orgs/org/actions/runners/registration-token", headers={"Authorization": f"Bearer {PAT}"}
    ) as response:
        assert response.status == 429
        assert response.headers["Retry-After"] == "7"
        assert "message" in await response.json()
    faulted = [r for r in sim.requests if r.fault]
    assert [r.route for r in faulted] == ["get_runner_groups", "get_runner_groups", "registration_token"]


async def test_injected_401_on_the_queue_and_dropped_connections(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    scale_set = await tenant.create_scale_set()
    _, session = await tenant.create_session(scale_set["id"])
    sim.faults.add(FaultRule(route="get_message", status=401, count=1))
    status, _ = await get_message(http, session)
    assert status == 401
    # aiohttp retries a request once when a kept-alive connection drops, so drop two.
    sim.faults.add(FaultRule(route="get_message", drop_connection=True, count=2))
    with pytest.raises(aiohttp.ClientError):
        await get_message(http, session)
    status, _ = await get_message(http, session)
    assert status == 202


async def test_latency_longer_than_the_client_timeout_times_the_client_out(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    sim.faults.add(FaultRule(route="get_runner_groups", latency=30, count=1))
    url = f"{tenant.url}_apis/runtime/runnergroups/?api-version=6.0-preview"
    with pytest.raises(TimeoutError):
        async with http.get(url, headers=tenant.admin_headers(), timeout=aiohttp.ClientTimeout(total=0.3)):
            pass


async def test_deleting_the_scale_set_behind_the_clients_back(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    scale_set = await tenant.create_scale_set()
    _, session = await tenant.create_session(scale_set["id"])
    sim.state.delete_scale_set(None, scale_set["id"])
    status, _ = await tenant.call("GET", f"_apis/runtime/runnerscalesets/{scale_set['id']}")
    assert status == 404
    status, _ = await get_message(http, session)
    assert status == 404


async def test_admin_api_drives_jobs_runners_and_faults(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    scale_set = await tenant.create_scale_set()
    _, session = await tenant.create_session(scale_set["id"])
    await tenant.jit(scale_set["id"], "runner-1")
    async with SimAdminClient(sim.url) as admin:
        [job_id] = await admin.enqueue_job("arc-runners", duration=0.2)
        status, _ = await acquire_jobs(http, tenant, session, [job_id])
        assert status == 200
        assert (await admin.runner_online("runner-1"))["busy"] is True
        events = await admin.next_runner_events(after=0, wait_seconds=10)
        assert [(e.runner_name, e.exit_code) for e in events] == [("runner-1", 0)]
        jobs = await admin.jobs()
        assert (jobs[0]["state"], jobs[0]["runCount"], jobs[0]["runnerName"]) == ("completed", 1, "runner-1")
        stats = await admin.stats()
        assert stats["jobs"] == {"completed": 1}
        assert (await admin.scale_sets())[0]["statistics"]["totalAssignedJobs"] == 0
        assert (await admin.sessions())[0]["scaleSetId"] == scale_set["id"]

        await admin.add_fault(FaultRule(route="get_message", status=500, count=1))
        before = time.monotonic()
        status, _ = await get_message(http, session)
        assert status == 500
        polls = await admin.requests(route="get_message", scale_set_id=scale_set["id"], after=before)
        assert [(r["method"], r["status"]) for r in polls] == [("GET", 500)]
        assert before < polls[0]["at"] <= time.monotonic()  # the clock every process of this machine shares
        assert await admin.requests(route="get_message", scale_set_id=scale_set["id"] + 1, after=before) == []
        assert await admin.requests(route="acquire_jobs", after=polls[0]["at"]) == []
        await admin.add_token("ghp_from_admin")
        fresh = await admin.create_app(app_id=5, installation_id=50)
        assert "PRIVATE KEY" in fresh["privateKeyPem"]
        assert await admin.evict_session(scale_set["id"]) is True
    assert sim.state.jobs[job_id].state == JobState.COMPLETED
    other = await register_with(http, sim, "ghp_from_admin")
    assert other.url == tenant.url


async def register_with(http: aiohttp.ClientSession, sim: SimulatedGitHub, token: str) -> Tenant:
    async with http.post(
        f"{sim.api_url}/orgs/org/actions/runners/registration-token", headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert response.status == 201
    return await register(http, sim, sim.config_url("org"), "orgs/org")


async def test_sim_command_serves_until_sigterm(tmp_path: Path) -> None:
    state_file = tmp_path / "sim.json"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "arc_scaleset.cli",
        "sim",
        "--port",
        "0",
        "--state-file",
        str(state_file),
        "--token",
        "ghp_cli=admin:org",
        "--long-poll-seconds",
        "0.2",
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        url = (await asyncio.wait_for(process.stdout.readline(), 30)).decode().strip()
        assert url.startswith("http://127.0.0.1:")
        assert json.loads(state_file.read_text())["url"] == url
        async with aiohttp.ClientSession() as http:
            async with http.post(
                f"{url}/api/v3/orgs/org/actions/runners/registration-token",
                headers={"Authorization": "Bearer ghp_cli"},
            ) as response:
                assert response.status == 201
            async with http.post(
                f"{url}/api/v3/repos/org/repo/actions/runners/registration-token",
                headers={"Authorization": "Bearer ghp_cli"},
            ) as response:
                assert response.status == 403  # the flag gave only admin:org
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
