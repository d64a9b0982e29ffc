"""One backoff for every failed session or poll call: a service that keeps failing is called ever more slowly.

Issue: with a queue answering 404 forever, the listener deleted, recreated and polled its session as fast as
the service answered (5,533 session creations in 60 s); a steady 401 did refresh-poll-refresh the same way.
Here each fault runs for ten minutes of fake time and the calls are counted per minute.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from arc_scaleset.github.errors import (
    FatalError,
    MessageQueueTokenExpired,
    RateLimited,
    SessionConflict,
    SessionNotFound,
    TransientError,
)
from arc_scaleset.listener.errors import RETRY_CAP, RETRY_JITTER, retry_backoff
from tests.unit.listener.fakes import Harness, error

MINUTES = 10


def per_minute(times: Sequence[float], start: float) -> list[int]:
    """How many of ``times`` fall in each minute from ``start``."""
    counts = [0] * MINUTES
    for moment in times:
        minute = int((moment - start) // 60)
        if minute < MINUTES:
            counts[minute] += 1
    return counts


async def run_ten_minutes(h: Harness) -> float:
    start = h.clock.monotonic()
    h.start()
    await h.settle()
    await h.run_for(MINUTES * 60.0, step=1.0)
    return start


def a_handful_per_minute(counts: list[int]) -> None:
    """At most 7 in the first minute (1 + 2 + 4 + ... s), at most 2 in any later one, a dozen in all."""
    assert counts[0] <= 7, counts
    assert max(counts[1:]) <= 2, counts
    assert sum(counts) <= 12, counts


async def test_a_queue_that_answers_404_forever_gets_a_handful_of_new_sessions_per_minute() -> None:
    h = Harness()
    h.actions.poll_forever = error(SessionNotFound, 404)
    start = await run_ten_minutes(h)
    a_handful_per_minute(per_minute(h.actions.calls_at("create_session"), start))
    a_handful_per_minute(per_minute(h.actions.calls_at("poll"), start))
    # Each new session publishes the count once and changes the reported state once: bounded too.
    assert len(h.patcher.ers_patches()) <= 12
    assert len(h.patcher.state_writes()) <= 2 * 12 + 1
    assert h.running()
    await h.stop_and_wait()


async def test_a_queue_token_refused_forever_is_refreshed_a_handful_of_times_per_minute() -> None:
    h = Harness()
    h.actions.poll_forever = error(MessageQueueTokenExpired, 401)
    start = await run_ten_minutes(h)
    a_handful_per_minute(per_minute(h.actions.calls_at("refresh_session"), start))
    a_handful_per_minute(per_minute(h.actions.calls_at("poll"), start))
    assert h.actions.calls_at("create_session") == [start]  # refreshing works, so the session is kept
    assert h.running()
    await h.stop_and_wait()


@pytest.mark.parametrize(
    "fault",
    [
        error(TransientError, 503),
        TransientError(method="GET", url="https://broker.example/queue", detail="connection refused"),
        error(FatalError, 302),
        error(RateLimited, 429, retry_after=None),
        # Retry-After: 0, or an x-ratelimit-reset already past by our clock (GitHub's runs behind): no wait at all.
        error(RateLimited, 429, retry_after=0.0),
        error(TransientError, 200, detail="the queue answered with a body that is not JSON"),
    ],
    ids=[
        "5xx",
        "connection-error",
        "redirect",
        "429-without-retry-after",
        "429-with-a-retry-after-of-0",
        "answer-without-message-id",
    ],
)
async def test_a_poll_that_fails_forever_is_repeated_a_handful_of_times_per_minute(fault: Exception) -> None:
    h = Harness()
    h.actions.poll_forever = fault
    start = await run_ten_minutes(h)
    a_handful_per_minute(per_minute(h.actions.calls_at("poll"), start))
    assert len(h.actions.calls_at("create_session")) == 1
    await h.stop_and_wait()


@pytest.mark.parametrize(
    "fault",
    [
        error(SessionConflict, 409),
        error(TransientError, 200, detail="no usable message session in the answer: the answer has no sessionId"),
        error(RateLimited, 429, retry_after=0.0),
    ],
    ids=["held-by-another-listener", "answer-without-a-usable-session", "429-with-a-retry-after-of-0"],
)
async def test_a_session_that_cannot_be_created_is_asked_for_a_handful_of_times_per_minute(fault: Exception) -> None:
    h = Harness()
    h.actions.create_forever = fault
    start = await run_ten_minutes(h)
    a_handful_per_minute(per_minute(h.actions.calls_at("create_session"), start))
    await h.stop_and_wait()


async def test_the_backoff_starts_over_only_after_a_successful_poll() -> None:
    h = Harness()
    h.actions.poll_script.extend([error(SessionNotFound, 404), error(SessionNotFound, 404), None])
    h.actions.poll_forever = error(SessionNotFound, 404)
    h.start()
    await h.settle()
    await h.run_for(20.0, step=0.25)
    creations = h.actions.calls_at("create_session")
    polls = h.actions.calls_at("poll")
    start = creations[0]
    # 404, +1 s new session, 404, +2 s (creating a session did not reset it), 202: reset, 404, +1 s.
    assert [t - start for t in creations[:4]] == [0.0, 1.0, 3.0, 4.0]
    assert [t - start for t in polls[:4]] == [0.0, 1.0, 3.0, 3.0]
    await h.stop_and_wait()


def test_retry_delays_double_from_one_second_to_two_minutes_stretched_by_at_most_a_fifth() -> None:
    backoff = retry_backoff()
    backoff.rng = random.Random(7)
    delays = [backoff.next_delay() for _ in range(12)]
    floors = [min(2.0**n, RETRY_CAP) for n in range(12)]
    assert all(floor <= delay <= floor * (1 + RETRY_JITTER) for delay, floor in zip(delays, floors, strict=True))
    assert len(set(delays)) == len(delays)  # jittered: listeners that fail together do not retry together
    backoff.reset()
    assert backoff.next_delay() <= 1 + RETRY_JITTER
