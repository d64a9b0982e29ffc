"""Acknowledgements and acquisitions are made beside the loop: a slow or rate-limited one never stops it.

Issue: a 429 with Retry-After on job acquisition stopped the whole listener loop (no polls, no scale-down)
for up to about 45 s, because its retries were nested inside message handling.
"""

from __future__ import annotations

from arc_scaleset.github.errors import RateLimited, TransientError
from arc_scaleset.github.models import JobAvailable
from tests.unit.listener.fakes import Harness, error, message


async def test_a_rate_limited_acquisition_does_not_stop_polling_or_publishing_the_desired_count() -> None:
    h = Harness()
    h.actions.acquire_forever = error(RateLimited, 429, retry_after=30.0)
    h.actions.poll_script.extend(
        [message(1, JobAvailable(runner_request_id=11), assigned=1), None, message(2, assigned=2), None]
    )
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 5)
    # No time has passed: every scripted poll was made and each count published while the acquisition
    # waits out its Retry-After beside the loop.
    assert len(h.calls("poll")) == 5
    assert [p["replicas"] for p in h.patcher.ers_patches()] == [None, 1, 1, 2, 2]
    assert len(h.calls("acquire")) == 1
    await h.stop_and_wait()


async def test_a_rate_limited_acquisition_is_tried_again_never_sooner_than_retry_after_says() -> None:
    h = Harness()
    h.actions.acquire_forever = error(RateLimited, 429, retry_after=30.0)
    h.actions.poll_script.append(message(1, JobAvailable(runner_request_id=11), assigned=1))
    h.start()
    await h.settle(lambda: bool(h.calls("acquire")))
    await h.run_for(300.0, step=1.0)
    times = h.actions.calls_at("acquire")
    # Given up after 3 attempts, then tried again while the service says a job is available, each call the
    # Retry-After the service asked for after the one before.
    assert [round(t - times[0]) for t in times] == list(range(0, 301, 30))
    assert 11 not in h.listener.side_calls.acquired
    await h.stop_and_wait()


async def test_a_given_up_acquisition_is_not_tried_again_once_no_job_is_available() -> None:
    h = Harness()
    h.actions.acquire_script.extend([error(TransientError, 502)] * 3)
    h.actions.poll_script.append(message(1, JobAvailable(runner_request_id=11)))
    h.start()
    await h.settle(lambda: bool(h.calls("acquire")))
    await h.run_for(4.0)  # attempts 1 and 2 s apart, with jitter
    assert len(h.calls("acquire")) == 3
    assert h.listener.side_calls.idle  # given up, to be tried again
    # The job went elsewhere (cancelled, or another listener took it): the next message's count says so.
    await h.listener.handle(message(2, available=0))
    await h.run_for(120.0, step=1.0)
    assert len(h.calls("acquire")) == 3
    await h.stop_and_wait()


async def test_a_retry_after_longer_than_a_minute_gives_the_acquisition_up_at_once() -> None:
    h = Harness()
    h.actions.acquire_forever = error(RateLimited, 429, retry_after=600.0)
    h.actions.poll_script.extend(
        [message(1, JobAvailable(runner_request_id=11)), message(2, JobAvailable(runner_request_id=12))]
    )
    h.start()
    await h.settle(lambda: len(h.calls("acquire")) == 2)
    # Not parked for ten minutes: the next offer is acquired (tried) at once.
    assert h.calls("acquire") == [("acquire", [11]), ("acquire", [12])]
    await h.stop_and_wait()


async def test_jobs_offered_while_an_acquisition_waits_are_acquired_together_and_never_twice() -> None:
    h = Harness()
    h.actions.acquire_script.append(error(TransientError, 502))
    h.actions.poll_script.extend(
        [
            message(1, JobAvailable(runner_request_id=11)),
            message(2, JobAvailable(runner_request_id=11), JobAvailable(runner_request_id=12)),
            message(3, JobAvailable(runner_request_id=13)),
        ]
    )
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 4)
    await h.run_for(5.0)
    # 11 failed once and is retried (it was in flight when offered again, so not asked for twice); 12 and
    # 13, offered meanwhile, go together in the next call.
    assert h.calls("acquire") == [("acquire", [11]), ("acquire", [11]), ("acquire", [12, 13])]
    assert all(request_id in h.listener.side_calls.acquired for request_id in (11, 12, 13))
    await h.stop_and_wait()


async def test_a_slow_acknowledgement_does_not_hold_up_the_next_poll() -> None:
    h = Harness()
    h.actions.ack_script.extend([error(RateLimited, 429, retry_after=20.0)] * 2)
    h.actions.poll_script.extend([message(1, assigned=1), message(2, assigned=2)])
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 3)
    assert [p["replicas"] for p in h.patcher.ers_patches()] == [None, 1, 2]
    await h.run_for(60.0, step=1.0)
    assert [entry[1] for entry in h.calls("ack")] == [1, 1, 1, 2]
    await h.stop_and_wait()


async def test_pending_acknowledgements_of_a_replaced_session_are_dropped() -> None:
    h = Harness()
    h.actions.ack_script.append(error(RateLimited, 429, retry_after=5.0))
    h.actions.poll_script.extend([message(1), message(2)])
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 3)
    # The session is replaced while acknowledgements wait (e.g. the service evicted it).
    await h.sessions.replace()
    await h.run_for(20.0)
    assert [entry[1] for entry in h.calls("ack")] == [1]  # 1 of the old session was not retried, 2 never sent
    await h.stop_and_wait()
