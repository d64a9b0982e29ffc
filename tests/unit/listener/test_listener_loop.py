"""The listener loop and its session keeper, against in-memory fakes of the GitHub client and the ERS patcher.

The fakes (tests/unit/listener/fakes.py) prove the loop's own decisions: order of calls, reactions to each
failure, backoff timing on a fake clock. The real client, simulator and API server are exercised by
tests/integration/listener.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from arc_scaleset.github.errors import (
    FatalError,
    MessageQueueTokenExpired,
    NotFound,
    RateLimited,
    SessionConflict,
    SessionNotFound,
    TransientError,
    Unauthorized,
)
from arc_scaleset.github.models import JobAvailable
from arc_scaleset.kube import errors as kube_errors
from arc_scaleset.listener.errors import FatalListenerError
from arc_scaleset.listener.loop import BOOKKEEPING_CONCURRENCY
from tests.unit.fakes import session
from tests.unit.listener.fakes import MAX_RUNNERS, SCALE_SET_ID, Harness, error, message, started, stats


async def test_startup_creates_a_session_owned_by_the_pod_and_publishes_the_sessions_statistics() -> None:
    h = Harness(min_runners=1)
    h.actions.session_stats = stats(2)
    h.start()
    await h.settle(lambda: bool(h.calls("poll")))
    assert h.calls("create_session") == [("create_session", SCALE_SET_ID, "pod-a")]
    assert h.patcher.ers_patches() == [{"patchID": 0, "replicas": 3}]
    assert h.calls("poll") == [("poll", session(1), 0, MAX_RUNNERS)]
    await h.stop_and_wait()


async def test_a_message_is_acked_and_its_jobs_acquired_and_the_ers_patched_before_runner_bookkeeping() -> None:
    h = Harness()
    h.actions.poll_script.append(
        message(5, JobAvailable(runner_request_id=11), started(10, "runner-x"), assigned=2),
    )
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 2)
    order = [
        entry[0]
        for entry in h.log
        if entry[0] in ("ack", "acquire", "er") or (entry[0] == "ers" and "spec" in entry[3])
    ]
    # The first "ers" is the startup publish; the message's count is published before any bookkeeping.
    assert order[:2] == ["ers", "ers"]
    assert sorted(order[2:]) == ["ack", "acquire", "er"]
    assert order.index("er") > order.index("ers", 1)
    assert h.calls("ack") == [("ack", 5)]
    assert h.calls("acquire") == [("acquire", [11])]
    assert h.patcher.ers_patches()[-1] == {"patchID": 1, "replicas": 2}
    assert h.calls("poll")[-1] == ("poll", session(1), 5, MAX_RUNNERS)
    await h.stop_and_wait()


async def test_a_burst_of_started_jobs_is_recorded_on_every_runner_a_few_patches_at_a_time() -> None:
    h = Harness()
    h.patcher.runner_gate = asyncio.Event()
    runners = [f"runner-{index}" for index in range(50)]
    h.actions.poll_script.append(message(1, *(started(100 + i, name) for i, name in enumerate(runners)), assigned=5))
    h.start()
    await h.settle(lambda: h.patcher.runners_waiting == BOOKKEEPING_CONCURRENCY)
    assert h.patcher.runners_waiting == BOOKKEEPING_CONCURRENCY
    assert h.patcher.ers_patches()[-1] == {"patchID": 1, "replicas": 5}  # the decision did not wait for them
    h.patcher.runner_gate.set()
    await h.settle(lambda: len(h.calls("er")) == len(runners))
    assert sorted(entry[1] for entry in h.calls("er")) == sorted(runners)
    await h.stop_and_wait()


async def test_started_jobs_still_unrecorded_at_shutdown_do_not_hold_it_up() -> None:
    h = Harness()
    h.patcher.runner_gate = asyncio.Event()  # never opened: the API server does not answer
    h.actions.poll_script.append(message(1, *(started(100 + i, f"runner-{i}") for i in range(20)), assigned=20))
    h.start()
    await h.settle(lambda: h.patcher.runners_waiting == BOOKKEEPING_CONCURRENCY)
    await h.stop_and_wait()
    assert h.patcher.runners_waiting == 0
    assert h.calls("er") == []


async def test_job_started_patches_the_runner_status_with_only_non_empty_job_facts_and_its_timeline() -> None:
    h = Harness()
    job = started(10, "runner-x")
    job.workflow_run_id = 0
    job.queue_time = dt.datetime(2025, 12, 31, 23, 59, 0, tzinfo=dt.UTC)
    h.actions.poll_script.append(message(1, job, assigned=1))
    h.start()
    await h.settle(lambda: bool(h.calls("er")))
    assert h.calls("er") == [
        (
            "er",
            "runner-x",
            "status",
            {
                "status": {
                    "jobRequestId": 10,
                    "jobRepositoryName": "octo/hello",
                    "jobId": "job-10",
                    "jobWorkflowRef": "octo/hello/.github/workflows/ci.yml@refs/heads/main",
                    "jobDisplayName": "build",
                    # GitHub's times that the message carries, and when the listener learned the job started.
                    "jobTimeline": {"queued": "2025-12-31T23:59:00Z", "started": "2026-01-01T00:00:00Z"},
                }
            },
        )
    ]
    await h.stop_and_wait()


async def test_a_started_job_records_when_the_listener_was_first_offered_it() -> None:
    h = Harness()
    h.actions.poll_script.extend([message(1, JobAvailable(runner_request_id=10)), message(2, started(10, "r"))])
    h.start()
    await h.settle(lambda: bool(h.calls("er")))
    (call,) = h.calls("er")
    assert call[3]["status"]["jobTimeline"] == {"offered": "2026-01-01T00:00:00Z", "started": "2026-01-01T00:00:00Z"}
    assert len(h.listener.offers) == 0  # forgotten once recorded
    await h.stop_and_wait()


async def test_a_started_job_whose_runner_is_gone_is_ignored() -> None:
    h = Harness()
    h.patcher.missing_runners.add("runner-gone")
    h.actions.poll_script.extend([message(1, started(10, "runner-gone"), assigned=1), None])
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 3)
    assert h.calls("er") == []
    assert h.running()
    await h.stop_and_wait()


async def test_an_empty_poll_publishes_the_latest_count_again() -> None:
    h = Harness()
    h.actions.poll_script.extend([message(1, assigned=3), None, None])
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 4)
    assert [p["replicas"] for p in h.patcher.ers_patches()] == [None, 3, 3, 3]
    await h.stop_and_wait()


async def test_a_target_of_zero_is_sent_as_null_replicas() -> None:
    h = Harness()
    h.start()
    await h.settle(lambda: bool(h.calls("poll")))
    assert h.patcher.ers_patches() == [{"patchID": 0, "replicas": None}]
    await h.stop_and_wait()


async def test_a_job_offered_again_is_never_acquired_twice() -> None:
    h = Harness()
    h.actions.poll_script.extend(
        [
            message(1, JobAvailable(runner_request_id=11), JobAvailable(runner_request_id=11)),
            message(2, JobAvailable(runner_request_id=11), JobAvailable(runner_request_id=12)),
        ]
    )
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 3)
    assert h.calls("acquire") == [("acquire", [11]), ("acquire", [12])]
    await h.stop_and_wait()


async def test_a_redelivered_message_is_acked_again_but_not_handled_twice() -> None:
    h = Harness()
    h.actions.poll_script.extend([message(1, started(10, "runner-x"), assigned=1), message(1, started(10, "runner-x"))])
    h.start()
    await h.run_for(2.0)  # the redelivery is a failed poll: the next one waits for the backoff (1 s)
    assert len(h.calls("poll")) == 3
    assert len(h.calls("ack")) == 2
    assert len(h.calls("er")) == 1
    await h.stop_and_wait()


async def test_a_held_session_is_waited_out_with_backoff_and_taken_over_without_exiting() -> None:
    h = Harness()
    h.actions.create_script.extend([error(SessionConflict, 409)] * 3)
    h.start()
    await h.settle()
    assert len(h.calls("create_session")) == 1
    for delay in (1.0, 2.0, 4.0):
        await h.clock.advance(delay - 0.001)
        attempts = len(h.calls("create_session"))
        await h.clock.advance(0.001)
        await h.settle()
        assert len(h.calls("create_session")) == attempts + 1
    await h.settle(lambda: bool(h.calls("poll")))
    assert len(h.calls("create_session")) == 4
    assert h.sessions.held
    assert h.running()
    await h.stop_and_wait()


async def test_a_scale_set_that_does_not_exist_is_fatal_with_a_clear_message() -> None:
    h = Harness()
    h.actions.create_script.append(error(NotFound, 404))
    with pytest.raises(FatalListenerError, match="runner scale set 7 does not exist"):
        await asyncio.wait_for(h.listener.run(), timeout=5)
    await h.close()


async def test_credentials_refused_once_are_retried_and_refused_twice_are_fatal() -> None:
    h = Harness()
    h.actions.create_script.extend([error(Unauthorized, 401), error(Unauthorized, 401)])
    task = h.start()
    await h.settle()
    assert not task.done()
    await h.clock.advance(1.0)
    await h.settle(task.done)
    with pytest.raises(FatalListenerError, match="refused the credentials 2 times in a row"):
        await task
    await h.close()


async def test_a_refused_then_accepted_credential_resets_the_count() -> None:
    h = Harness()
    h.actions.create_script.append(error(Unauthorized, 401))
    h.actions.poll_script.append(error(Unauthorized, 401))
    h.start()
    await h.settle()
    await h.clock.advance(1.0)
    await h.settle(lambda: len(h.calls("poll")) == 1)
    # Creating the session did not reset the backoff (only a successful poll does): the next delay is 2 s.
    await h.clock.advance(1.0)
    await h.settle()
    assert len(h.calls("poll")) == 1
    await h.clock.advance(1.0)
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert h.running()
    await h.stop_and_wait()


async def test_an_evicted_session_is_replaced_in_process_after_the_backoff_and_polling_starts_over() -> None:
    h = Harness()
    h.actions.poll_script.extend([message(4, assigned=1), error(SessionNotFound, 404)])
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert len(h.calls("create_session")) == 1
    await h.clock.advance(1.0)
    await h.settle(lambda: len(h.calls("poll")) == 3)
    assert [c[1] for c in h.calls("poll")] == [session(1), session(1), session(2)]
    assert h.calls("poll")[-1][2] == 0  # lastMessageId starts over with the new session
    assert h.actions.deleted_sessions == [session(1)]
    assert h.sessions.sessions_created == 2
    await h.stop_and_wait()


async def test_a_refused_queue_token_refreshes_the_session() -> None:
    h = Harness()
    h.actions.poll_script.append(error(MessageQueueTokenExpired, 401))
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 1)
    await h.clock.advance(1.0)
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert h.calls("refresh_session") == [("refresh_session", session(1))]
    assert h.sessions.current().message_queue_access_token == "queue-token-2"
    assert h.sessions.sessions_created == 1
    await h.stop_and_wait()


async def test_a_session_that_cannot_be_refreshed_is_replaced() -> None:
    h = Harness()
    h.actions.poll_script.append(error(MessageQueueTokenExpired, 401))
    h.actions.refresh_script.append(error(SessionNotFound, 404))
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 1)
    await h.clock.advance(1.0)
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert h.calls("poll")[-1][1] == session(2)
    await h.stop_and_wait()


async def test_transient_poll_failures_back_off_exponentially_up_to_two_minutes() -> None:
    h = Harness()
    h.actions.poll_script.extend([error(TransientError, 503)] * 9)
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 1)
    for delay in (1, 2, 4, 8, 16, 32, 64, 120, 120):
        polls = len(h.calls("poll"))
        await h.clock.advance(delay - 0.01)
        await h.settle()
        assert len(h.calls("poll")) == polls, f"polled before {delay}s passed"
        await h.clock.advance(0.01)
        await h.settle()
        assert len(h.calls("poll")) == polls + 1
    assert h.running()
    await h.stop_and_wait()


async def test_a_rate_limited_poll_waits_exactly_retry_after() -> None:
    h = Harness()
    h.actions.poll_script.append(error(RateLimited, 429, retry_after=42.0))
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 1)
    await h.clock.advance(41.9)
    await h.settle()
    assert len(h.calls("poll")) == 1
    await h.clock.advance(0.1)
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert len(h.calls("poll")) == 2
    await h.stop_and_wait()


async def test_an_unexpected_answer_to_the_poll_such_as_a_redirect_is_retried_after_the_backoff_not_fatal() -> None:
    h = Harness()
    h.actions.poll_script.append(error(FatalError, 302))
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 1)
    await h.clock.advance(1.0)
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert len(h.calls("poll")) == 2
    await h.stop_and_wait()


async def test_a_failed_ers_patch_is_retried_until_it_lands_keeping_the_dirty_flag() -> None:
    h = Harness()
    h.actions.poll_script.append(message(1, started(10, "runner-x"), assigned=0))
    h.start()
    await h.settle(lambda: len(h.patcher.ers_patches()) == 1)
    h.patcher.fail.extend([kube_errors.ServerError(503, "ServiceUnavailable", "etcd")] * 2)
    await h.settle(lambda: h.clock.sleepers > 0)
    await h.clock.advance(1.0)
    await h.settle()
    await h.clock.advance(2.0)
    await h.settle(lambda: len(h.patcher.ers_patches()) == 2)
    # Same target (0) at min: without the job event it would be a forced 0; the failed attempts must not
    # have consumed the dirty flag.
    assert h.patcher.ers_patches()[-1]["patchID"] != 0
    await h.stop_and_wait()


async def test_a_session_lost_during_ack_is_left_to_the_next_poll_to_replace_and_the_count_still_published() -> None:
    h = Harness()
    h.actions.poll_script.extend(
        [message(3, JobAvailable(runner_request_id=11), assigned=1), error(SessionNotFound, 404)]
    )
    h.actions.ack_script.append(error(SessionNotFound, 404))
    h.actions.acquire_script.append(error(SessionNotFound, 404))
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert h.patcher.ers_patches()[1] == {"patchID": 1, "replicas": 1}
    assert len(h.calls("ack")) == len(h.calls("acquire")) == 1  # the session is gone: no retries
    assert 11 not in h.listener.side_calls.acquired  # acquired when the service offers it again
    await h.clock.advance(1.0)
    await h.settle(lambda: len(h.calls("poll")) == 3)
    assert h.calls("poll")[-1][1] == session(2)
    await h.stop_and_wait()


async def test_a_failed_acquisition_is_retried_then_again_after_a_backoff_until_the_job_is_acquired() -> None:
    h = Harness()
    h.actions.poll_script.append(message(1, JobAvailable(runner_request_id=11)))
    h.actions.acquire_script.extend([error(TransientError, 502)] * 3)
    h.start()
    await h.settle(lambda: len(h.calls("acquire")) == 1)
    await h.clock.advance(1.0)
    await h.settle(lambda: len(h.calls("acquire")) == 2)
    await h.clock.advance(2.0)
    await h.settle(lambda: len(h.calls("acquire")) == 3)
    await h.run_for(4.0)
    assert len(h.calls("acquire")) == 3, "given up: the next try waits out the retry backoff (5 s)"
    await h.run_for(60.0)
    # The listener keeps its session (ARC's would exit and be offered the job again by its next session).
    assert h.calls("acquire") == [("acquire", [11])] * 4
    assert 11 in h.listener.side_calls.acquired
    await h.stop_and_wait()


async def test_shutdown_interrupts_the_long_poll_and_run_returns() -> None:
    h = Harness()
    h.start()
    await h.settle(lambda: bool(h.calls("poll")))
    await h.stop_and_wait()
    assert h.task is not None
    assert h.task.result() is None
    assert await h.sessions.close(within=1.0)
    assert h.actions.deleted_sessions == [session(1)]


async def test_shutdown_while_waiting_for_a_held_session_returns_without_a_session() -> None:
    h = Harness()
    h.actions.create_script.extend([error(SessionConflict, 409)] * 100)
    h.start()
    await h.settle()
    await h.stop_and_wait()
    assert not h.sessions.held
    assert await h.sessions.close(within=1.0)
    assert h.actions.deleted_sessions == []


async def test_liveness_fails_after_the_window_without_a_successful_poll_and_readiness_follows_the_session() -> None:
    h = Harness()
    assert h.health.ready() == (False, "no message session held")
    h.actions.poll_script.extend([None, error(TransientError, 503)] + [error(TransientError, 503)] * 20)
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert h.health.ready()[0]
    assert h.health.live()[0]
    await h.clock.advance(150.5)
    assert h.health.live()[0] is False
    await h.stop_and_wait()


async def test_liveness_holds_within_the_window_while_waiting_for_a_held_session_and_fails_after_it() -> None:
    h = Harness(liveness_window=150.0)
    h.actions.create_forever = error(SessionConflict, 409)
    h.start()
    await h.settle()
    await h.run_for(150.0, step=10.0)
    assert h.health.live()[0]
    assert h.health.ready()[0] is False
    await h.run_for(10.0, step=10.0)
    assert h.health.live() == (False, "no successful poll for 160s (window 150s)")
    await h.stop_and_wait()
