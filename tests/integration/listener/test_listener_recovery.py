"""The listener against the simulated GitHub over real HTTP and the real API server: it scales the
EphemeralRunnerSet and recovers in-process from every fault ARC's users report (ARC #3209, #3210, #3813, #4356)."""

from __future__ import annotations

import collections
import datetime as dt

import pytest

from arc_scaleset.api.constants import EPHEMERAL_RUNNERS
from arc_scaleset.kube.client import KubeClient
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim.faults import FaultRule
from arc_scaleset_lab.sim.state import JobState
from tests.integration.listener.conftest import (
    SCALE_SET_NAME,
    ListenerSim,
    RunningListener,
    StartListener,
    admin_client,
    create_runner,
    listener_config,
    wait_for_replicas,
)

pytestmark = pytest.mark.cluster


def never_acquired_twice(handle: RunningListener) -> None:
    twice = [rid for rid, n in collections.Counter(handle.acquired).items() if n > 1]
    assert twice == [], f"runner requests acquired more than once: {twice}"


def count_requests(env: ListenerSim, route: str, *, status: int | None = None) -> int:
    return sum(1 for r in env.sim.requests if r.route == route and (status is None or r.status == status))


async def enqueue(env: ListenerSim, count: int = 1) -> list[int]:
    return [env.sim.state.enqueue_job(SCALE_SET_NAME, repository="octo-org/hello").request_id for _ in range(count)]


async def all_acquired(env: ListenerSim, ids: list[int]) -> None:
    await env.sim.changes.wait_until(
        lambda: all(env.sim.state.jobs[i].state is JobState.ACQUIRED for i in ids), within=20
    )


async def test_jobs_scale_the_runner_set_to_min_plus_assigned_jobs(
    kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim, start_listener: StartListener
) -> None:
    handle = await start_listener(listener_config(listener_sim, namespace, min_runners=1, max_runners=3))
    await wait_for_replicas(kube, namespace, 1)
    # The force-state patch comes before the first poll: the service knows the capacity only once a poll said it
    # (until then it offers the set every job).
    await listener_sim.sim.changes.wait_until(
        lambda: [s.max_capacity for s in listener_sim.sim.state.sessions.values()] == [3]
    )
    ids = await enqueue(listener_sim, 4)
    # The listener advertises maxRunners (3): the service offers the set 3 of the 4 jobs; the 4th waits.
    await all_acquired(listener_sim, ids[:3])
    assert listener_sim.sim.state.jobs[ids[3]].state is JobState.QUEUED
    await wait_for_replicas(kube, namespace, 3)  # min 1 + 3 assigned, capped at max 3
    assert all(r.max_capacity == "3" for r in listener_sim.sim.requests if r.route == "get_message")
    never_acquired_twice(handle)
    assert not handle.task.done()


async def test_a_session_held_by_another_owner_is_waited_for_and_taken_over_after_release(
    kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim, start_listener: StartListener
) -> None:
    async with admin_client(listener_sim.sim) as other:
        held = await other.create_message_session(listener_sim.scale_set_id, "old-listener-pod")
        handle = await start_listener(listener_config(listener_sim, namespace), owner="new-listener-pod")
        await listener_sim.sim.changes.wait_until(
            lambda: count_requests(listener_sim, "create_session", status=409) >= 2
        )
        assert not handle.task.done()
        assert handle.app.health.ready()[0] is False
        assert handle.app.health.live()[0] is True
        await other.delete_message_session(listener_sim.scale_set_id, held.session_id)
    # The listener's retries of a held session back off (1, 2, 4, 8, 16 s...): the next may be 16 s away.
    await listener_sim.sim.changes.wait_until(
        lambda: [x.owner for x in listener_sim.sim.state.sessions.values()] == ["new-listener-pod"], within=40
    )
    ids = await enqueue(listener_sim)
    await all_acquired(listener_sim, ids)
    await wait_for_replicas(kube, namespace, 1)
    assert handle.app.health.ready()[0] is True
    assert not handle.task.done()


async def test_an_evicted_session_is_recreated_in_process_and_nothing_is_acquired_twice(
    kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim, start_listener: StartListener
) -> None:
    handle = await start_listener(listener_config(listener_sim, namespace))
    first = await enqueue(listener_sim, 2)
    await all_acquired(listener_sim, first)
    await wait_for_replicas(kube, namespace, 2)
    old_session = listener_sim.sim.state.sessions[listener_sim.scale_set_id].id
    listener_sim.sim.state.evict_session(listener_sim.scale_set_id)
    await listener_sim.sim.changes.wait_until(
        lambda: [x.id for x in listener_sim.sim.state.sessions.values()] not in ([], [old_session])
    )
    second = await enqueue(listener_sim, 1)
    await all_acquired(listener_sim, second)
    await wait_for_replicas(kube, namespace, 3)
    assert handle.app.sessions.sessions_created == 2
    never_acquired_twice(handle)
    assert not handle.task.done()


async def test_expired_queue_and_admin_tokens_are_refreshed_in_process(
    kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim, start_listener: StartListener
) -> None:
    handle = await start_listener(listener_config(listener_sim, namespace))
    await listener_sim.sim.changes.wait_until(lambda: bool(listener_sim.sim.state.sessions))
    session_id = listener_sim.sim.state.sessions[listener_sim.scale_set_id].id
    listener_sim.sim.state.expire_queue_tokens()
    listener_sim.sim.credentials.expire_admin_tokens()
    await listener_sim.sim.changes.wait_until(lambda: count_requests(listener_sim, "refresh_session", status=200) >= 1)
    ids = await enqueue(listener_sim, 2)
    await all_acquired(listener_sim, ids)
    await wait_for_replicas(kube, namespace, 2)
    assert [s.id for s in listener_sim.sim.state.sessions.values()] == [session_id]  # refreshed, not replaced
    never_acquired_twice(handle)
    assert not handle.task.done()


async def test_bursts_of_5xx_on_every_queue_call_are_ridden_out(
    kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim, start_listener: StartListener
) -> None:
    handle = await start_listener(listener_config(listener_sim, namespace))
    await listener_sim.sim.changes.wait_until(lambda: bool(listener_sim.sim.state.sessions))
    faults = listener_sim.sim.faults
    faults.add(FaultRule(route="get_message", status=503, count=6))
    faults.add(FaultRule(route="delete_message", status=500, count=2))
    faults.add(FaultRule(route="acquire_jobs", status=502, count=3))
    ids = await enqueue(listener_sim, 3)
    await all_acquired(listener_sim, ids)
    await wait_for_replicas(kube, namespace, 3)
    assert count_requests(listener_sim, "get_message", status=503) == 6
    assert count_requests(listener_sim, "acquire_jobs", status=502) == 3
    never_acquired_twice(handle)
    assert not handle.task.done()


async def test_registration_answers_without_a_token_are_asked_for_again_and_the_listener_carries_on(
    kube: KubeClient,
    namespace: str,
    ers: str,
    listener_sim: ListenerSim,
    start_listener: StartListener,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GitHub accepted the request but its answer carries no token (a proxy's page, a truncated body): the
    listener exited on it (a FatalError) where asking again after the backoff gets a good answer."""
    credentials = listener_sim.sim.credentials
    issue = credentials.issue_registration_token
    unusable = 2

    def without_a_token_at_first(bearer: str | None, scope_path: str) -> tuple[str, dt.datetime]:
        nonlocal unusable
        token, expires = issue(bearer, scope_path)
        if unusable:
            unusable -= 1
            return "", expires
        return token, expires

    monkeypatch.setattr(credentials, "issue_registration_token", without_a_token_at_first)
    handle = await start_listener(listener_config(listener_sim, namespace))
    await listener_sim.sim.changes.wait_until(
        lambda: bool(listener_sim.sim.state.sessions) or handle.task.done(), within=20
    )
    assert not handle.task.done(), "the listener exited"
    assert unusable == 0
    ids = await enqueue(listener_sim)
    await all_acquired(listener_sim, ids)
    await wait_for_replicas(kube, namespace, 1)
    assert not handle.task.done()


async def test_a_job_whose_acquisition_was_given_up_is_acquired_later_on_the_same_session(
    kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim, start_listener: StartListener
) -> None:
    """Every attempt fails for a few seconds: the listener gives the call up but not the job. It keeps its
    session, so the service does not offer the job again (only a new session is): it must ask again itself."""
    handle = await start_listener(listener_config(listener_sim, namespace))
    await listener_sim.sim.changes.wait_until(lambda: bool(listener_sim.sim.state.sessions))
    session = next(iter(listener_sim.sim.state.sessions.values())).id
    # Two tries per call (the client's own retry), three calls: all six fail.
    listener_sim.sim.faults.add(FaultRule(route="acquire_jobs", status=502, count=6))
    ids = await enqueue(listener_sim)
    await all_acquired(listener_sim, ids)
    await wait_for_replicas(kube, namespace, 1)
    assert count_requests(listener_sim, "acquire_jobs", status=502) == 6
    assert [s.id for s in listener_sim.sim.state.sessions.values()] == [session]
    never_acquired_twice(handle)
    assert not handle.task.done()


async def test_a_429_with_retry_after_is_honoured_before_polling_again(
    kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim, start_listener: StartListener
) -> None:
    handle = await start_listener(listener_config(listener_sim, namespace))
    await listener_sim.sim.changes.wait_until(lambda: bool(listener_sim.sim.state.sessions))
    listener_sim.sim.faults.add(FaultRule(route="get_message", status=429, retry_after=2.0, count=2))
    await listener_sim.sim.changes.wait_until(lambda: count_requests(listener_sim, "get_message", status=429) == 2)
    ids = await enqueue(listener_sim)
    await all_acquired(listener_sim, ids)
    await wait_for_replicas(kube, namespace, 1)
    polls = [r for r in listener_sim.sim.requests if r.route == "get_message"]
    limited = [i for i, r in enumerate(polls) if r.status == 429]
    for index in limited:
        # Whoever waited (the client or the loop), nobody polled again before Retry-After had passed.
        assert polls[index + 1].at - polls[index].at >= 2.0
    assert not handle.task.done()


async def test_a_429_on_job_acquisition_does_not_stop_polling_and_the_count_still_reaches_the_ers(
    kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim, start_listener: StartListener
) -> None:
    handle = await start_listener(listener_config(listener_sim, namespace))
    await listener_sim.sim.changes.wait_until(lambda: bool(listener_sim.sim.state.sessions))
    listener_sim.sim.faults.add(FaultRule(route="acquire_jobs", status=429, retry_after=4.0, count=2))
    ids = await enqueue(listener_sim, 2)
    await all_acquired(listener_sim, ids)
    await wait_for_replicas(kube, namespace, 2)
    acquisitions = [r for r in listener_sim.sim.requests if r.route == "acquire_jobs"]
    limited_from = next(r.at for r in acquisitions if r.status == 429)
    acquired_at = next(r.at for r in acquisitions if r.status == 200)
    # Retry-After was honoured (whoever waited, the client or the side call) ...
    assert acquired_at - limited_from >= 4.0
    # ... beside the loop, which went on polling meanwhile (ARC's listener stopped for up to ~45 s).
    polls_meanwhile = [
        r for r in listener_sim.sim.requests if r.route == "get_message" and limited_from < r.at < acquired_at
    ]
    assert len(polls_meanwhile) >= 2
    never_acquired_twice(handle)
    assert not handle.task.done()


async def test_a_slow_service_times_out_the_poll_and_the_listener_carries_on(
    kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim, start_listener: StartListener
) -> None:
    handle = await start_listener(listener_config(listener_sim, namespace))
    await listener_sim.sim.changes.wait_until(lambda: bool(listener_sim.sim.state.sessions))
    # Longer than the client's long-poll timeout (3 s) and the loop's bound (6 s): the poll must be abandoned.
    listener_sim.sim.faults.add(FaultRule(route="get_message", latency=30.0, count=2))
    ids = await enqueue(listener_sim, 2)
    await all_acquired(listener_sim, ids)
    await wait_for_replicas(kube, namespace, 2)
    never_acquired_twice(handle)
    assert not handle.task.done()


async def test_job_started_reaches_the_runners_status(
    kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim, start_listener: StartListener
) -> None:
    runner_name = f"{SCALE_SET_NAME}-runner-x7k2p"
    await create_runner(kube, namespace, listener_sim, runner_name)
    async with admin_client(listener_sim.sim) as client:
        await client.generate_jit_runner_config(listener_sim.scale_set_id, name=runner_name)
    listener_sim.sim.state.runner_online(runner_name)
    await start_listener(listener_config(listener_sim, namespace))
    (request_id,) = await enqueue(listener_sim)
    await listener_sim.sim.changes.wait_until(lambda: listener_sim.sim.state.jobs[request_id].state is JobState.RUNNING)
    job = listener_sim.sim.state.jobs[request_id]

    async def status_recorded() -> dict[str, object] | None:
        runner = await kube.get(EPHEMERAL_RUNNERS, runner_name, namespace=namespace)
        status: dict[str, object] = runner.get("status") or {}
        return status if "jobId" in status else None

    status = await eventually(status_recorded, timeout=20, what="job facts on the EphemeralRunner status")
    assert status["jobRequestId"] == request_id
    assert status["jobId"] == job.job_id
    assert status["jobRepositoryName"] == "octo-org/hello"
    assert status["jobWorkflowRef"] == job.workflow_ref
    assert status["jobDisplayName"] == job.display_name
    assert status["workflowRunId"] == job.workflow_run_id


async def test_a_scale_set_deleted_on_github_ends_the_listener_with_exit_code_1(
    kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim, start_listener: StartListener
) -> None:
    listener_sim.sim.state.delete_scale_set(None, listener_sim.scale_set_id)
    handle = await start_listener(listener_config(listener_sim, namespace))
    assert await handle.task == 1
