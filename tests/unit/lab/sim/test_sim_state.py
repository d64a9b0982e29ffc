"""The simulated Actions service's model as pure logic: jobs, runners, sessions, messages, statistics."""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson
import pytest

from arc_scaleset.clock import FakeClock
from arc_scaleset_lab.sim import errors
from arc_scaleset_lab.sim.state import JobState, Message, SimConfig, SimState, Statistics, decode_jit_config

URL = "http://sim/tenant/1/"


def make_state(**config: Any) -> tuple[SimState, FakeClock, int, int]:
    """A state with one org tenant and one scale set labelled ``arc`` and ``linux``."""
    clock = FakeClock()
    state = SimState(clock=clock, config=SimConfig(**config))
    tenant = state.tenant_for_scope("org")
    scale_set = state.create_scale_set(
        tenant.id,
        name="arc",
        runner_group_id=1,
        labels=[{"type": "System", "name": "arc"}, {"type": "", "name": "linux"}],
        disable_update=True,
    )
    return state, clock, tenant.id, scale_set.id


def items(message: Message | None) -> list[dict[str, Any]]:
    assert message is not None
    body: list[dict[str, Any]] = orjson.loads(message.to_json()["body"])
    return body


def types(message: Message | None) -> list[str]:
    return [item["messageType"] for item in items(message)]


def assert_consistent(stats: Statistics) -> None:
    assert stats.total_assigned_jobs == stats.total_acquired_jobs + stats.total_running_jobs
    assert stats.total_registered_runners == stats.total_busy_runners + stats.total_idle_runners
    assert stats.total_busy_runners == stats.total_running_jobs


async def test_a_job_flows_through_available_acquired_running_completed() -> None:
    state, clock, tenant, ss = make_state()
    session = state.create_session(tenant, ss, owner="listener")
    state.generate_jit_config(tenant, ss, name="runner-a", work_folder="", service_url=URL)
    job = state.enqueue_job("arc", duration=30)

    first = state.next_message(ss, last_message_id=0)
    assert types(first) == ["JobAvailable"]
    assert first is not None
    assert first.statistics.total_available_jobs == 1
    state.ack_message(ss, first.id)

    assert state.acquire_jobs(ss, [job.request_id]) == [job.request_id]
    assert state.statistics(ss).total_acquired_jobs == 1
    assert state.statistics(ss).total_assigned_jobs == 1

    state.runner_online("runner-a")
    second = state.next_message(ss, last_message_id=first.id)
    assert types(second) == ["JobAssigned", "JobStarted"]
    started = items(second)[1]
    assert started["runnerName"] == "runner-a"
    assert started["runnerId"] == job.runner_id
    assert job.state == JobState.RUNNING
    assert second is not None
    assert second.statistics.total_running_jobs == 1

    await clock.advance(29)
    assert state.complete_due_jobs() == []
    await clock.advance(1)
    assert state.complete_due_jobs() == [job]
    third = state.next_message(ss, last_message_id=second.id)
    assert types(third) == ["JobCompleted"]
    assert items(third)[0]["result"] == "succeeded"
    assert items(third)[0]["finishTime"] != "0001-01-01T00:00:00Z"
    assert job.run_count == 1
    assert job.queue_latency() == 0.0
    assert session.id == state.sessions[ss].id


async def test_finished_runner_is_deregistered_and_its_pod_asked_to_exit_zero() -> None:
    state, clock, tenant, ss = make_state()
    state.generate_jit_config(tenant, ss, name="runner-a", work_folder="", service_url=URL)
    job = state.enqueue_job("arc", duration=5)
    state.acquire_jobs(ss, [job.request_id])
    state.runner_online("runner-a")
    await clock.advance(5)
    state.complete_due_jobs()
    assert state.runners_named(None, "runner-a") == []
    assert [(e.runner_name, e.exit_code) for e in state.runner_events_after(0)] == [("runner-a", 0)]
    assert state.statistics(ss) == Statistics()


async def test_a_job_is_assigned_once_even_with_many_idle_runners_and_repeated_acquires() -> None:
    state, _, tenant, ss = make_state()
    for name in ("r1", "r2", "r3"):
        state.generate_jit_config(tenant, ss, name=name, work_folder="", service_url=URL)
        state.runner_online(name)
    job = state.enqueue_job(["arc", "linux"])
    assert state.acquire_jobs(ss, [job.request_id]) == [job.request_id]
    assert state.acquire_jobs(ss, [job.request_id]) == []
    busy = [r for r in state.runners.values() if r.busy]
    assert len(busy) == 1
    assert job.run_count == 1
    assert job.runner_name == "r1"  # the longest-online runner takes the oldest job
    assert_consistent(state.statistics(ss))


async def test_jobs_wait_acquired_until_a_runner_comes_online() -> None:
    state, _, tenant, ss = make_state()
    jobs = [state.enqueue_job("arc") for _ in range(3)]
    state.acquire_jobs(ss, [j.request_id for j in jobs])
    state.generate_jit_config(tenant, ss, name="r1", work_folder="", service_url=URL)
    stats = state.statistics(ss)
    assert (stats.total_acquired_jobs, stats.total_assigned_jobs, stats.total_idle_runners) == (3, 3, 1)
    state.runner_online("r1")
    assert [j.state for j in jobs] == [JobState.RUNNING, JobState.ACQUIRED, JobState.ACQUIRED]
    assert_consistent(state.statistics(ss))


async def test_unmatched_labels_stay_queued_until_a_matching_scale_set_exists() -> None:
    state, _, tenant, _ = make_state()
    job = state.enqueue_job(["gpu"])
    assert job.state == JobState.QUEUED
    gpu = state.create_scale_set(
        tenant, name="gpu-set", runner_group_id=0, labels=[{"type": "System", "name": "GPU"}], disable_update=False
    )
    assert (job.state, job.scale_set_id) == (JobState.AVAILABLE, gpu.id)


async def test_jobs_route_only_to_tenants_that_cover_their_repository() -> None:
    state, _, _, _ = make_state()
    other = state.tenant_for_scope("other-org/only-repo")
    scoped = state.create_scale_set(
        other.id, name="scoped", runner_group_id=1, labels=[{"type": "System", "name": "x"}], disable_update=False
    )
    assert state.enqueue_job("x", repository="org/repo").state == JobState.QUEUED
    assert state.enqueue_job("x", repository="other-org/only-repo").scale_set_id == scoped.id


async def test_last_message_id_acks_earlier_messages_and_unacked_messages_are_redelivered() -> None:
    state, _, tenant, ss = make_state()
    state.create_session(tenant, ss, owner="l")
    state.enqueue_job("arc")
    first = state.next_message(ss, last_message_id=0)
    assert state.next_message(ss, last_message_id=0) is first  # not acked: delivered again
    state.enqueue_job("arc")
    assert state.next_message(ss, last_message_id=0) is first
    assert first is not None
    second = state.next_message(ss, last_message_id=first.id)
    assert second is not None
    assert second.id == first.id + 1
    state.ack_message(ss, second.id)
    assert state.next_message(ss, last_message_id=first.id) is None


async def test_a_second_session_conflicts_until_the_first_is_deleted_or_idle_too_long() -> None:
    state, clock, tenant, ss = make_state(session_timeout=60)
    first = state.create_session(tenant, ss, owner="old")
    with pytest.raises(errors.ActionsError) as conflict:
        state.create_session(tenant, ss, owner="new")
    assert conflict.value.status == 409
    assert "TaskAgentSessionConflictException" in conflict.value.type_name
    state.delete_session(tenant, ss, first.id)
    second = state.create_session(tenant, ss, owner="new")
    await clock.advance(61)
    third = state.create_session(tenant, ss, owner="newer")
    assert third.id != second.id


async def test_a_session_being_polled_never_expires() -> None:
    state, clock, tenant, ss = make_state(session_timeout=60)
    session = state.create_session(tenant, ss, owner="old")
    session.polls_in_flight = 1
    await clock.advance(600)
    with pytest.raises(errors.ActionsError):
        state.create_session(tenant, ss, owner="new")


async def test_a_new_session_is_offered_every_job_still_waiting_to_be_acquired() -> None:
    state, _, tenant, ss = make_state()
    old = state.create_session(tenant, ss, owner="old")
    waiting = state.enqueue_job("arc")
    taken = state.enqueue_job("arc")
    message = state.next_message(ss, last_message_id=0)
    assert message is not None
    state.ack_message(ss, message.id)
    state.acquire_jobs(ss, [taken.request_id])
    state.delete_session(tenant, ss, old.id)
    state.create_session(tenant, ss, owner="new")
    offered = items(state.next_message(ss, last_message_id=0))
    available = [i["runnerRequestId"] for i in offered if i["messageType"] == "JobAvailable"]
    assert available == [waiting.request_id]


async def test_queue_tokens_expire_and_refresh_issues_a_new_one() -> None:
    state, clock, tenant, ss = make_state(queue_token_ttl=100)
    session = state.create_session(tenant, ss, owner="l")
    old_token = session.queue_token
    state.authorize_queue(ss, session.id, old_token)
    await clock.advance(100)
    with pytest.raises(errors.ActionsError) as expired:
        state.authorize_queue(ss, session.id, old_token)
    assert expired.value.status == 401
    refreshed = state.refresh_session(tenant, ss, session.id)
    assert state.authorize_queue(ss, session.id, refreshed.queue_token) is session
    with pytest.raises(errors.ActionsError):
        state.authorize_queue(ss, session.id, old_token)


async def test_an_evicted_session_answers_not_found() -> None:
    state, _, tenant, ss = make_state()
    session = state.create_session(tenant, ss, owner="l")
    assert state.evict_session(ss)
    with pytest.raises(errors.ActionsError) as gone:
        state.authorize_queue(ss, session.id, session.queue_token)
    assert gone.value.status == 404


async def test_jit_config_names_are_unique_per_tenant_free_again_once_removed_and_decode_to_the_runner() -> None:
    state, _, tenant, ss = make_state()
    runner, encoded = state.generate_jit_config(tenant, ss, name="r1", work_folder="/w", service_url=URL)
    decoded = decode_jit_config(encoded)
    assert (decoded["agentId"], decoded["agentName"], decoded["runnerScaleSetId"]) == (runner.id, "r1", ss)
    with pytest.raises(errors.ActionsError) as exists:
        state.generate_jit_config(tenant, ss, name="R1", work_folder="", service_url=URL)
    assert (exists.value.status, "AgentExistsException" in exists.value.type_name) == (409, True)
    state.remove_runner(tenant, runner.id)
    again, _ = state.generate_jit_config(tenant, ss, name="R1", work_folder="", service_url=URL)
    assert again.id != runner.id, "a removed runner's name is free again"
    assert state.runners_named(tenant, "r1") == [again]


async def test_a_busy_runner_cannot_be_removed_a_removed_one_can_again_and_an_unknown_one_is_not_found() -> None:
    state, _, tenant, ss = make_state()
    runner, _ = state.generate_jit_config(tenant, ss, name="r1", work_folder="", service_url=URL)
    job = state.enqueue_job("arc")
    state.acquire_jobs(ss, [job.request_id])
    state.runner_online("r1")
    with pytest.raises(errors.ActionsError) as busy:
        state.remove_runner(tenant, runner.id)
    assert "JobStillRunningException" in busy.value.type_name
    idle, _ = state.generate_jit_config(tenant, ss, name="r2", work_folder="", service_url=URL)
    state.remove_runner(tenant, idle.id)
    version = state.version
    state.remove_runner(tenant, idle.id)  # as on GitHub: ARC removes each idle runner twice on scale-down
    assert state.version == version, "a repeated removal changes nothing"
    with pytest.raises(errors.ActionsError) as missing:
        state.remove_runner(tenant, idle.id + 100)
    assert (missing.value.status, "AgentNotFoundException" in missing.value.type_name) == (404, True)


async def test_a_runner_that_exits_mid_job_fails_the_job_without_an_exit_request() -> None:
    state, _, tenant, ss = make_state()
    state.generate_jit_config(tenant, ss, name="r1", work_folder="", service_url=URL)
    job = state.enqueue_job("arc", duration=100)
    state.acquire_jobs(ss, [job.request_id])
    state.runner_online("r1")
    state.runner_exit("r1", exit_code=137)
    assert (job.state, job.final_result, job.run_count) == (JobState.COMPLETED, "failed", 1)
    assert state.runner_events_after(0) == []
    assert state.next_deadline() is None


async def test_fail_runner_asks_the_pod_to_exit_with_the_code_and_takes_the_runner_offline() -> None:
    state, _, tenant, ss = make_state()
    state.generate_jit_config(tenant, ss, name="r1", work_folder="", service_url=URL)
    state.runner_online("r1")
    event = state.request_runner_exit("r1", exit_code=7, reason="outdated")
    assert (event.seq, event.exit_code) == (1, 7)
    assert not state.runners_named(None, "r1")[0].online
    job = state.enqueue_job("arc")
    state.acquire_jobs(ss, [job.request_id])
    assert job.state == JobState.ACQUIRED  # an offline runner takes no job


async def test_deleting_a_scale_set_requeues_its_unstarted_jobs_for_a_new_one() -> None:
    state, _, tenant, ss = make_state()
    session = state.create_session(tenant, ss, owner="l")
    job = state.enqueue_job("arc")
    state.acquire_jobs(ss, [job.request_id])
    state.delete_scale_set(None, ss)
    assert job.state == JobState.QUEUED
    assert ss not in state.sessions
    with pytest.raises(errors.ActionsError):
        state.authorize_queue(ss, session.id, session.queue_token)
    again = state.create_scale_set(
        tenant, name="arc", runner_group_id=1, labels=[{"type": "System", "name": "arc"}], disable_update=True
    )
    assert (job.state, job.scale_set_id) == (JobState.AVAILABLE, again.id)


async def test_duplicate_scale_set_names_in_a_group_are_refused() -> None:
    state, _, tenant, _ = make_state()
    with pytest.raises(errors.ActionsError) as exists:
        state.create_scale_set(tenant, name="ARC", runner_group_id=1, labels=[], disable_update=False)
    assert exists.value.status == 409


async def test_empty_labels_default_to_the_scale_set_name() -> None:
    state, _, tenant, _ = make_state()
    created = state.create_scale_set(tenant, name="plain", runner_group_id=1, labels=[], disable_update=False)
    assert created.labels == [{"type": "System", "name": "plain"}]


async def test_message_times_are_rfc3339_utc_and_zero_when_unset() -> None:
    state, _, tenant, ss = make_state()
    state.create_session(tenant, ss, owner="l")
    state.enqueue_job("arc")
    item = items(state.next_message(ss, last_message_id=0))[0]
    assert item["scaleSetAssignTime"] == "0001-01-01T00:00:00Z"
    assert item["queueTime"].endswith("Z")
    assert dt.datetime.fromisoformat(item["queueTime"]).tzinfo is not None


async def test_a_resumed_session_gets_its_unacked_messages_again_and_a_new_session_gets_only_fresh_offers() -> None:
    state, _, tenant, ss = make_state()
    session = state.create_session(tenant, ss, owner="l")
    job = state.enqueue_job("arc")
    delivered = state.next_message(ss, last_message_id=0)
    assert types(delivered) == ["JobAvailable"]
    # The listener is killed before it acts: a successor refreshing the same session is delivered it again.
    state.refresh_session(tenant, ss, session.id)
    assert state.next_message(ss, last_message_id=0) is delivered
    # A new session instead: the old session's queue goes with it; the waiting job is offered afresh.
    state.delete_session(tenant, ss, session.id)
    state.create_session(tenant, ss, owner="l")
    fresh = state.next_message(ss, last_message_id=0)
    assert fresh is not None
    assert delivered is not None
    assert fresh.id > delivered.id
    assert [item["runnerRequestId"] for item in items(fresh)] == [job.request_id]
