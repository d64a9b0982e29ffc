"""The sim's Actions-service side over real HTTP, requests built by hand as docs/github.md describes them."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from arc_scaleset_lab.sim import JobState, SimulatedGitHub, decode_jit_config
from tests.integration.lab.sim.conftest import (
    API_VERSION,
    Tenant,
    acquire_jobs,
    delete_message,
    get_message,
    queue_headers,
    register,
)

STAT_KEYS = {
    "totalAvailableJobs",
    "totalAcquiredJobs",
    "totalAssignedJobs",
    "totalRunningJobs",
    "totalRegisteredRunners",
    "totalBusyRunners",
    "totalIdleRunners",
}


def assert_consistent(stats: dict[str, int]) -> None:
    assert set(stats) == STAT_KEYS
    assert stats["totalAssignedJobs"] == stats["totalAcquiredJobs"] + stats["totalRunningJobs"]
    assert stats["totalRegisteredRunners"] == stats["totalBusyRunners"] + stats["totalIdleRunners"]


async def test_admin_endpoints_require_api_version_and_the_admin_token(
    tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    url = f"{tenant.url}_apis/runtime/runnergroups/?groupName=Default"
    async with http.get(url, headers=tenant.admin_headers()) as response:
        assert response.status == 400
        assert "typeName" in await response.json()
    async with http.get(f"{url}&{API_VERSION}", headers={"Authorization": "Bearer nope"}) as response:
        assert response.status == 401
        assert (await response.json())["typeName"].endswith("Exception")
    async with http.get(f"{url}&{API_VERSION}", headers=tenant.admin_headers()) as response:
        assert response.status == 200
        assert await response.json() == {
            "count": 1,
            "value": [{"id": 1, "name": "Default", "size": 0, "isDefaultGroup": True}],
        }


async def test_admin_token_of_one_tenant_is_refused_by_another(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    other = await register(http, sim, sim.config_url("org", "repo"), "repos/org/repo")
    assert other.url != tenant.url
    other.token = tenant.token
    status, _ = await other.call("GET", "_apis/runtime/runnergroups/")
    assert status == 401


async def test_expired_admin_tokens_are_refused_until_registration_is_repeated(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    sim.credentials.expire_admin_tokens()
    status, _ = await tenant.call("GET", "_apis/runtime/runnergroups/")
    assert status == 401
    fresh = await register(http, sim, sim.config_url("org"), "orgs/org")
    assert fresh.url == tenant.url
    status, _ = await fresh.call("GET", "_apis/runtime/runnergroups/")
    assert status == 200


async def test_scale_set_create_get_by_name_update_delete(tenant: Tenant) -> None:
    created = await tenant.create_scale_set("arc-runners", ["arc-runners", "gpu"])
    assert created["labels"] == [{"type": "System", "name": "arc-runners"}, {"type": "System", "name": "gpu"}]
    assert created["RunnerSetting"] == {"disableUpdate": True}
    assert created["runnerGroupName"] == "Default"
    assert created["runnerJitConfigUrl"].startswith(tenant.url)
    assert_consistent(created["statistics"])

    status, found = await tenant.call("GET", "_apis/runtime/runnerscalesets", query="name=arc-runners&runnerGroupId=1")
    assert (status, found["count"], found["value"][0]["id"]) == (200, 1, created["id"])
    status, none = await tenant.call("GET", "_apis/runtime/runnerscalesets", query="name=other&runnerGroupId=1")
    assert (status, none) == (200, {"count": 0, "value": []})

    status, by_id = await tenant.call("GET", f"_apis/runtime/runnerscalesets/{created['id']}")
    assert (status, by_id["name"]) == (200, "arc-runners")

    # As Go serialises ARC's update: only the changed field, plus RunnerSetting {} and the zero createdOn.
    sim_group = await tenant.call("GET", "_apis/runtime/runnergroups/", query="groupName=Default")
    assert sim_group[0] == 200
    status, renamed = await tenant.call(
        "PATCH",
        f"_apis/runtime/runnerscalesets/{created['id']}",
        {"name": "renamed", "RunnerSetting": {}, "createdOn": "0001-01-01T00:00:00Z"},
    )
    assert (status, renamed["name"], renamed["labels"]) == (200, "renamed", created["labels"])
    assert renamed["RunnerSetting"] == {"disableUpdate": True}

    status, _ = await tenant.call("DELETE", f"_apis/runtime/runnerscalesets/{created['id']}")
    assert status == 204
    status, missing = await tenant.call("GET", f"_apis/runtime/runnerscalesets/{created['id']}")
    assert status == 404
    assert "RunnerScaleSetNotFoundException" in missing["typeName"]


async def test_update_moves_a_scale_set_to_another_runner_group(sim: SimulatedGitHub, tenant: Tenant) -> None:
    group_id = sim.state.add_runner_group("special").id
    created = await tenant.create_scale_set()
    status, moved = await tenant.call(
        "PATCH",
        f"_apis/runtime/runnerscalesets/{created['id']}",
        {"runnerGroupId": group_id, "RunnerSetting": {}, "createdOn": "0001-01-01T00:00:00Z"},
    )
    assert (status, moved["runnerGroupId"], moved["runnerGroupName"]) == (200, group_id, "special")
    status, groups = await tenant.call("GET", "_apis/runtime/runnergroups/", query="groupName=special")
    assert groups["value"][0]["size"] == 1


async def test_jit_config_runner_lookup_and_removal(tenant: Tenant) -> None:
    scale_set = await tenant.create_scale_set()
    status, jit = await tenant.jit(scale_set["id"], "runner-a")
    assert status == 200
    assert set(jit) == {"runner", "encodedJITConfig"}
    runner = jit["runner"]
    assert (runner["name"], runner["runnerScaleSetId"]) == ("runner-a", scale_set["id"])
    assert decode_jit_config(jit["encodedJITConfig"])["agentId"] == runner["id"]

    status, taken = await tenant.jit(scale_set["id"], "runner-a")
    assert status == 409
    assert "AgentExistsException" in taken["typeName"]

    status, by_id = await tenant.call("GET", f"_apis/distributedtask/pools/0/agents/{runner['id']}")
    assert (status, by_id["id"], by_id["name"], by_id["runnerScaleSetId"]) == (
        200,
        runner["id"],
        "runner-a",
        scale_set["id"],
    )
    status, by_name = await tenant.call("GET", "_apis/distributedtask/pools/0/agents", query="agentName=runner-a")
    assert (status, by_name["count"]) == (200, 1)
    status, none = await tenant.call("GET", "_apis/distributedtask/pools/0/agents", query="agentName=nobody")
    assert (status, none["count"]) == (200, 0)

    status, _ = await tenant.call("DELETE", f"_apis/distributedtask/pools/0/agents/{runner['id']}")
    assert status == 204
    status, _ = await tenant.call("DELETE", f"_apis/distributedtask/pools/0/agents/{runner['id']}")
    assert status == 204, "removing a removed runner again succeeds, as on GitHub"
    status, gone = await tenant.call("GET", f"_apis/distributedtask/pools/0/agents/{runner['id']}")
    assert status == 404
    assert "AgentNotFoundException" in gone["typeName"]


async def test_a_busy_runner_cannot_be_removed(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    scale_set = await tenant.create_scale_set()
    _, session = await tenant.create_session(scale_set["id"])
    _, jit = await tenant.jit(scale_set["id"], "busy-runner")
    job = sim.state.enqueue_job("arc-runners", duration=600).request_id
    await acquire_jobs(http, tenant, session, [job])
    sim.state.runner_online("busy-runner")
    status, body = await tenant.call("DELETE", f"_apis/distributedtask/pools/0/agents/{jit['runner']['id']}")
    assert status == 400
    assert "JobStillRunningException" in body["typeName"]


async def test_one_session_per_scale_set_until_deleted(tenant: Tenant, http: aiohttp.ClientSession) -> None:
    scale_set = await tenant.create_scale_set()
    status, session = await tenant.create_session(scale_set["id"], owner="pod-1")
    assert status == 200
    assert set(session) == {
        "sessionId",
        "ownerName",
        "runnerScaleSet",
        "messageQueueUrl",
        "messageQueueAccessToken",
        "statistics",
    }
    assert session["ownerName"] == "pod-1"
    assert session["runnerScaleSet"]["id"] == scale_set["id"]
    assert_consistent(session["statistics"])

    status, conflict = await tenant.create_session(scale_set["id"], owner="pod-2")
    assert status == 409
    assert "TaskAgentSessionConflictException" in conflict["typeName"]

    path = f"_apis/runtime/runnerscalesets/{scale_set['id']}/sessions/{session['sessionId']}"
    status, _ = await tenant.call("DELETE", path)
    assert status == 204
    status, _ = await tenant.call("DELETE", path)
    assert status == 404
    status, _ = await tenant.create_session(scale_set["id"], owner="pod-2")
    assert status == 200


async def test_refresh_replaces_the_queue_token(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    scale_set = await tenant.create_scale_set()
    _, session = await tenant.create_session(scale_set["id"])
    sim.state.expire_queue_tokens()
    status, _ = await get_message(http, session)
    assert status == 401
    status, refreshed = await tenant.call(
        "PATCH", f"_apis/runtime/runnerscalesets/{scale_set['id']}/sessions/{session['sessionId']}"
    )
    assert status == 200
    assert refreshed["sessionId"] == session["sessionId"]
    assert refreshed["messageQueueAccessToken"] != session["messageQueueAccessToken"]
    status, _ = await get_message(http, refreshed)
    assert status == 202


async def test_an_evicted_session_answers_404_on_the_queue(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    scale_set = await tenant.create_scale_set()
    _, session = await tenant.create_session(scale_set["id"])
    assert sim.state.evict_session(scale_set["id"])
    status, body = await get_message(http, session)
    assert status == 404
    assert "TaskAgentSessionExpiredException" in body["typeName"]


async def test_long_poll_returns_202_after_the_hold_and_records_max_capacity(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    scale_set = await tenant.create_scale_set()
    _, session = await tenant.create_session(scale_set["id"])
    status, body = await get_message(http, session)
    assert (status, body) == (202, None)
    assert sim.state.sessions[scale_set["id"]].max_capacity == 10
    record = next(r for r in reversed(sim.requests) if r.route == "get_message")
    assert "api-version" not in record.query
    assert record.max_capacity == "10"


@pytest.mark.parametrize("sim", [{"long_poll_seconds": 120}], indirect=True)
async def test_long_poll_wakes_as_soon_as_a_job_arrives(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    scale_set = await tenant.create_scale_set()
    _, session = await tenant.create_session(scale_set["id"])
    poll = asyncio.create_task(get_message(http, session))
    await sim.changes.wait_until(lambda: sim.state.sessions[scale_set["id"]].polls_in_flight == 1, within=10)
    sim.state.enqueue_job("arc-runners")
    status, message = await asyncio.wait_for(poll, 10)
    assert status == 200
    assert [item["messageType"] for item in json.loads(message["body"])] == ["JobAvailable"]


async def test_message_queue_requires_the_accept_api_version(tenant: Tenant, http: aiohttp.ClientSession) -> None:
    scale_set = await tenant.create_scale_set()
    _, session = await tenant.create_session(scale_set["id"])
    headers = {**queue_headers(session), "Accept": "application/json"}
    async with http.get(session["messageQueueUrl"], headers=headers) as response:
        assert response.status == 400


async def test_a_job_flows_through_every_message_type_with_consistent_statistics(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    scale_set = await tenant.create_scale_set("arc-runners", ["arc-runners", "gpu"])
    _, session = await tenant.create_session(scale_set["id"])
    await tenant.jit(scale_set["id"], "runner-x")
    job_id = sim.state.enqueue_job(
        ["arc-runners", "gpu"], repository="org/repo", duration=0.3, event_name="pull_request"
    ).request_id

    seen: list[dict[str, Any]] = []
    last = 0
    while not any(item["messageType"] == "JobCompleted" for item in seen):
        status, message = await get_message(http, session, last)
        if status == 202:
            continue
        assert status == 200
        assert set(message) == {"messageId", "messageType", "body", "statistics"}
        assert message["messageType"] == "RunnerScaleSetJobMessages"
        assert isinstance(message["body"], str)
        assert_consistent(message["statistics"])
        last = message["messageId"]
        assert await delete_message(http, session, last) == 204
        batch = json.loads(message["body"])
        seen += batch
        if any(item["messageType"] == "JobAvailable" for item in batch):
            status, acquired = await acquire_jobs(http, tenant, session, [job_id])
            assert (status, acquired) == (200, {"count": 1, "value": [job_id]})
            sim.state.runner_online("runner-x")

    assert [item["messageType"] for item in seen] == ["JobAvailable", "JobAssigned", "JobStarted", "JobCompleted"]
    available, _, started, completed = seen
    assert available["acquireJobUrl"]
    assert (available["ownerName"], available["repositoryName"], available["eventName"]) == (
        "org",
        "repo",
        "pull_request",
    )
    assert available["requestLabels"] == ["arc-runners", "gpu"]
    assert (started["runnerName"], completed["runnerName"]) == ("runner-x", "runner-x")
    assert completed["result"] == "succeeded"
    job = sim.state.jobs[job_id]
    assert (job.state, job.run_count, job.runner_name) == (JobState.COMPLETED, 1, "runner-x")
    assert job.enqueued_at
    assert job.started_at
    assert job.finished_at
    assert job.enqueued_at <= job.started_at <= job.finished_at
    assert [(e.runner_name, e.exit_code) for e in sim.state.runner_events] == [("runner-x", 0)]


async def test_concurrent_acquires_hand_each_job_out_exactly_once(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    scale_set = await tenant.create_scale_set()
    _, session = await tenant.create_session(scale_set["id"])
    jobs = [sim.state.enqueue_job("arc-runners").request_id for _ in range(25)]
    results = await asyncio.gather(*(acquire_jobs(http, tenant, session, jobs) for _ in range(8)))
    acquired = [job for status, body in results for job in body["value"] if status == 200]
    assert sorted(acquired) == sorted(jobs)
    assert sum(body["count"] for _, body in results) == len(jobs)
    for index in range(3):
        await tenant.jit(scale_set["id"], f"r{index}")
        sim.state.runner_online(f"r{index}")
    assert sum(1 for j in sim.state.jobs.values() if j.state == JobState.RUNNING) == 3
    assert all(j.run_count <= 1 for j in sim.state.jobs.values())


async def test_acquire_jobs_takes_the_queue_token_not_the_admin_token(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    scale_set = await tenant.create_scale_set()
    _, session = await tenant.create_session(scale_set["id"])
    job = sim.state.enqueue_job("arc-runners").request_id
    url = f"{tenant.url}_apis/runtime/runnerscalesets/{scale_set['id']}/acquirejobs?{API_VERSION}"
    async with http.post(url, data=json.dumps([job]), headers=tenant.admin_headers()) as response:
        assert response.status == 401
    status, acquirable = await tenant.call("GET", f"_apis/runtime/runnerscalesets/{scale_set['id']}/acquirablejobs")
    assert (status, [j["runnerRequestId"] for j in acquirable["value"]]) == (200, [job])
    status, _ = await acquire_jobs(http, tenant, session, [job])
    assert status == 200
