"""The workqueue's contract, step by step, on a fake clock (no real time passes)."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from arc_scaleset.clock import FakeClock
from arc_scaleset.kube.runtime_metrics import RuntimeMetrics
from arc_scaleset.kube.workqueue import (
    BucketRateLimiter,
    ItemExponentialRateLimiter,
    MaxOfRateLimiter,
    ShutDown,
    WorkQueue,
    bucket_rate_limiter,
)


def test_a_key_added_twice_before_it_is_taken_is_queued_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("b")
    queue.add("a")
    assert len(queue) == 2
    assert queue.try_get() == "a"
    assert queue.try_get() == "b"
    assert queue.try_get() is None


def test_a_key_added_while_processing_is_handed_out_again_only_after_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    assert queue.try_get() == "a"
    queue.add("a")
    queue.add("a")
    assert queue.try_get() is None, "must not be handed out while it is processing"
    queue.done("a")
    assert queue.try_get() == "a"
    queue.done("a")
    assert queue.try_get() is None


def test_keys_added_at_low_priority_wait_behind_every_normal_key_in_their_own_order() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("old-1", "old-2", "old-3"):
        queue.add(key, low_priority=True)
    queue.add("new-1")
    queue.add("old-2")  # a change to an object of the backlog: it moves up, behind new-1
    queue.add("new-2")
    queue.add("new-1", low_priority=True)  # never lowers a key already queued at normal priority
    assert len(queue) == 5
    assert [queue.try_get() for _ in range(6)] == ["new-1", "old-2", "new-2", "old-1", "old-3", None]
    assert len(queue) == 0


def test_a_low_priority_key_added_while_processing_comes_back_low_unless_raised_meanwhile() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("b")
    assert queue.try_get() == "a"
    assert queue.try_get() == "b"
    queue.add("a", low_priority=True)
    queue.add("b", low_priority=True)
    queue.add("b")
    queue.add("c")
    queue.done("a")
    queue.done("b")
    assert [queue.try_get() for _ in range(4)] == ["c", "b", "a", None]


def test_done_for_a_key_not_processing_is_refused() -> None:
    queue: WorkQueue[str] = WorkQueue()
    with pytest.raises(ValueError, match="not being processed"):
        queue.done("a")


async def test_get_waits_for_an_add() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not getter.done()
    queue.add("a")
    assert await asyncio.wait_for(getter, 1) == "a"


async def test_a_cancelled_getter_does_not_swallow_the_wakeup_of_another() -> None:
    queue: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.add("a")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it runs: the wake-up must pass to `second`.
    assert await asyncio.wait_for(second, 1) == "a"


async def test_add_after_adds_once_the_delay_has_passed_on_the_clock() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 5.0)
    assert len(queue) == 0
    await clock.advance(4.999)
    assert len(queue) == 0
    await clock.advance(0.001)
    assert queue.try_get() == "a"


async def test_add_after_keeps_the_earliest_deadline_for_a_key() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 10.0)
    queue.add_after("a", 2.0)
    queue.add_after("a", 7.0)
    assert queue.waiting == 1
    await clock.advance(2.0)
    assert queue.try_get() == "a"
    queue.done("a")
    await clock.advance(20.0)
    assert queue.try_get() is None, "the later deadlines were folded into the earliest one"


async def test_add_after_with_no_delay_adds_at_once() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=FakeClock())
    queue.add_after("a", 0)
    assert queue.try_get() == "a"


async def test_rate_limited_adds_back_off_exponentially_until_forgotten() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, rate_limiter=ItemExponentialRateLimiter(base=1.0, cap=8.0))
    expected_delays = [1.0, 2.0, 4.0, 8.0, 8.0]
    for attempt, delay in enumerate(expected_delays):
        queue.add_rate_limited("a")
        assert queue.num_requeues("a") == attempt + 1
        await clock.advance(delay - 0.01)
        assert queue.try_get() is None, f"attempt {attempt} came before its {delay}s delay"
        await clock.advance(0.01)
        assert queue.try_get() == "a"
        queue.done("a")
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    queue.add_rate_limited("a")
    await clock.advance(1.0)
    assert queue.try_get() == "a"


def test_the_default_backoff_runs_from_5ms_to_1000s() -> None:
    limiter = ItemExponentialRateLimiter()
    delays = [limiter.when("k") for _ in range(30)]
    assert delays[0] == pytest.approx(0.005)
    assert delays[1] == pytest.approx(0.010)
    assert delays[-1] == 1000.0
    assert max(delays) == 1000.0
    assert limiter.when("other") == pytest.approx(0.005), "backoff is per key"


def test_the_exponential_backoff_survives_a_huge_number_of_failures() -> None:
    limiter = ItemExponentialRateLimiter()
    for _ in range(5000):
        delay = limiter.when("k")
    assert delay == 1000.0


def test_the_token_bucket_spreads_a_storm_at_its_rate() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=10.0, burst=3, clock=clock)
    assert [bucket.when(i) for i in range(5)] == pytest.approx([0.0, 0.0, 0.0, 0.1, 0.2])


async def test_the_token_bucket_refills_with_time() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=10.0, burst=2, clock=clock)
    bucket.when(1)
    bucket.when(2)
    await clock.advance(0.1)
    assert bucket.when(3) == 0.0
    assert bucket.when(4) == pytest.approx(0.1)


def test_max_of_limiters_takes_the_longest_delay_and_forgets_in_all() -> None:
    clock = FakeClock()
    limiter = MaxOfRateLimiter(
        ItemExponentialRateLimiter(base=1.0, cap=100.0), BucketRateLimiter(qps=1.0, burst=1, clock=clock)
    )
    assert limiter.when("a") == 1.0
    assert limiter.when("a") == 2.0
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert bucket_rate_limiter(clock=clock).when("x") == pytest.approx(0.005)


async def test_shutdown_wakes_waiting_getters_with_shutdown() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    await queue.shutdown()
    with pytest.raises(ShutDown):
        await asyncio.wait_for(getter, 1)


async def test_shutdown_with_drain_waits_for_work_in_flight_and_ignores_new_adds() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    queue.add("b")
    queue.add_after("c", 1.0)
    assert queue.try_get() == "a"
    stopping = asyncio.create_task(queue.shutdown(drain=True))
    await asyncio.sleep(0)
    assert not stopping.done(), "'a' is still being processed"
    queue.add("d")
    await clock.advance(5.0)
    with pytest.raises(ShutDown):
        await queue.get()
    queue.done("a")
    await asyncio.wait_for(stopping, 1)
    assert len(queue) == 0
    assert queue.waiting == 0


async def test_shutdown_without_drain_returns_at_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    assert queue.try_get() == "a"
    await asyncio.wait_for(queue.shutdown(drain=False), 1)
    assert queue.processing == 1


async def test_metrics_follow_controller_runtime_names_and_count_adds_after_dedup() -> None:
    clock = FakeClock()
    registry = CollectorRegistry()
    queue: WorkQueue[str] = WorkQueue(name="demo", clock=clock, metrics=RuntimeMetrics(registry))
    labels = {"name": "demo", "controller": "demo"}
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert registry.get_sample_value("workqueue_adds_total", labels) == 2
    assert registry.get_sample_value("workqueue_depth", labels) == 2
    await clock.advance(3.0)
    assert queue.try_get() == "a"
    assert registry.get_sample_value("workqueue_depth", labels) == 1
    assert registry.get_sample_value("workqueue_queue_duration_seconds_sum", labels) == pytest.approx(3.0)
    await clock.advance(2.0)
    queue.done("a")
    assert registry.get_sample_value("workqueue_work_duration_seconds_sum", labels) == pytest.approx(2.0)
    queue.add_rate_limited("a")
    assert registry.get_sample_value("workqueue_retries_total", labels) == 1
    await queue.shutdown()
    assert registry.get_sample_value("workqueue_depth", labels) == 0
