"""The client's full flow against the simulated service over real HTTP (docs/github.md)."""

from __future__ import annotations

import orjson
import pytest
from aiohttp import web

from arc_scaleset.github import (
    JobAvailable,
    NotFound,
    RunnerExists,
    SessionConflict,
    SessionNotFound,
    is_transient,
)
from arc_scaleset_lab.sim.server import SimulatedGitHub
from tests.http_serving import serving
from tests.integration.github.conftest import InstantClock, client_for, make_client


async def test_full_lifecycle_from_registration_to_session_deletion(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    async with make_client(sim, clock=instant_clock) as client:
        group = await client.get_runner_group_by_name("Default")
        assert await client.get_runner_scale_set(group.id, "arc-runners") is None

        created = await client.create_runner_scale_set(
            name="arc-runners", runner_group_id=group.id, labels=["arc-runners", "gpu"]
        )
        assert created.id > 0
        assert [label.name for label in created.labels] == ["arc-runners", "gpu"]
        assert created.runner_setting.disable_update
        found = await client.get_runner_scale_set(group.id, "arc-runners")
        assert found is not None
        assert found.id == created.id
        assert (await client.get_runner_scale_set_by_id(created.id)).name == "arc-runners"

        renamed = await client.update_runner_scale_set(created.id, name="arc-renamed")
        assert renamed.name == "arc-renamed"
        relabelled = await client.update_runner_scale_set(created.id, labels=["arc-runners", "gpu", "linux"])
        assert [label.name for label in relabelled.labels] == ["arc-runners", "gpu", "linux"]
        assert relabelled.name == "arc-renamed"

        jit = await client.generate_jit_runner_config(created.id, name="arc-renamed-runner-1")
        assert jit.encoded_jit_config
        assert jit.runner.name == "arc-renamed-runner-1"
        assert (await client.get_runner(jit.runner.id)).name == "arc-renamed-runner-1"
        by_name = await client.get_runner_by_name("arc-renamed-runner-1")
        assert by_name is not None
        assert by_name.id == jit.runner.id
        with pytest.raises(RunnerExists):
            await client.generate_jit_runner_config(created.id, name="arc-renamed-runner-1")

        session = await client.create_message_session(created.id, "listener-pod-1")
        assert session.statistics is not None
        with pytest.raises(SessionConflict) as conflict:
            await client.create_message_session(created.id, "listener-pod-2")
        assert is_transient(conflict.value)

        assert await client.get_message(session, 0, max_capacity=10) is None  # 202 after the hold

        request_id = sim.state.enqueue_job(["arc-runners", "gpu"], repository="org/repo", duration=60).request_id
        message = await client.get_message(session, 0, max_capacity=10)
        assert message is not None
        available = [job for job in message.jobs if isinstance(job, JobAvailable)]
        assert [job.runner_request_id for job in available] == [request_id]
        await client.delete_message(session, message.message_id)
        assert await client.acquire_jobs(session, created.id, [request_id]) == [request_id]
        assert await client.get_acquirable_jobs(created.id) == []

        await client.remove_runner(jit.runner.id)
        assert await client.get_runner_by_name("arc-renamed-runner-1") is None
        with pytest.raises(NotFound):
            await client.get_runner(jit.runner.id)

        await client.delete_message_session(created.id, session.session_id)
        with pytest.raises(SessionNotFound):
            await client.get_message(session, message.message_id, max_capacity=10)
        second = await client.create_message_session(created.id, "listener-pod-2")  # the scale set is free again
        await client.delete_message_session(created.id, second.session_id)

        await client.delete_runner_scale_set(created.id)
        with pytest.raises(NotFound):
            await client.get_runner_scale_set_by_id(created.id)

    assert instant_clock.sleeps == []  # nothing failed, so nothing was retried


async def test_requests_carry_the_protocol_headers_and_query(sim: SimulatedGitHub, instant_clock: InstantClock) -> None:
    async with make_client(sim, clock=instant_clock) as client:
        await client.get_runner_scale_set(1, "arc runners")
        scale_set = await client.create_runner_scale_set(name="arc-runners", runner_group_id=1)
        session = await client.create_message_session(scale_set.id, "owner")
        await client.get_message(session, 0, max_capacity=7)
    by_route = {record.route: record for record in sim.requests}
    # The sim logs the decoded query string; the exact wire encoding is pinned by the unit tests.
    assert by_route["get_scale_sets"].query == "api-version=6.0-preview&name=arc runners&runnerGroupId=1"
    assert by_route["get_message"].max_capacity == "7"
    assert "api-version" not in by_route["get_message"].query
    agent = by_route["create_scale_set"].user_agent
    assert agent is not None
    assert orjson.loads(agent)["subsystem"] == "contract-test"


async def test_the_jit_config_of_a_removed_runner_is_no_longer_held(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    async with make_client(sim, clock=instant_clock) as client:
        scale_set = await client.create_runner_scale_set(name="arc-runners", runner_group_id=1)
        held = client._transport.redact  # what the client masks; its size is the memory a busy scale set costs
        before = len(held)
        removed = await client.generate_jit_runner_config(scale_set.id, name="removed")
        gone = await client.generate_jit_runner_config(scale_set.id, name="gone-already")
        busy = await client.generate_jit_runner_config(scale_set.id, name="still-registered")
        assert len(held) == before + 3

        await client.remove_runner(removed.runner.id)
        # An ephemeral runner that ran its job: GitHub removes it itself.
        sim.state.remove_runner(sim.state.runners[gone.runner.id].tenant_id, gone.runner.id)
        await client.remove_runner(gone.runner.id)  # GitHub answers 204 again; forgotten all the same

        assert len(held) == before + 1
        assert busy.encoded_jit_config not in held(busy.encoded_jit_config)


@pytest.mark.parametrize(
    "session_id", ["../../runnerscalesets/8", "5e5510e0-0000-4000-8000-00000000000%2F", "urn:uuid:" + "0" * 32]
)
async def test_a_session_id_that_is_no_uuid_never_reaches_a_request_path(session_id: str) -> None:
    """A successor takes its predecessor's session ID from an annotation a team may write (issue 26)."""

    async def anything(_: web.Request) -> web.StreamResponse:
        return web.json_response({"message": "unexpected"}, status=500)

    async with serving(anything) as (base, seen), client_for(base) as client:
        with pytest.raises(ValueError, match="a message session ID is a UUID"):
            await client.delete_message_session(8, session_id)
        with pytest.raises(ValueError, match="a message session ID is a UUID"):
            await client.refresh_message_session(8, session_id)
    assert seen == []
