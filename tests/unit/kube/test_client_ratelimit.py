"""The client-side qps/burst limiter, on a fake clock."""

from __future__ import annotations

import asyncio

import pytest

from arc_scaleset.clock import FakeClock
from arc_scaleset.kube.client import _RateLimits, _TokenBucket, rate_limit_key
from arc_scaleset.kube.resources import CONFIG_MAPS, PODS, SECRETS, Resource
from arc_scaleset_lab.harness.waiting import eventually


async def _until_waiting(clock: FakeClock, requests: int = 1) -> None:
    """Until ``requests`` requests wait on ``clock`` for their tokens (its time stands still meanwhile)."""
    await eventually(lambda: clock.sleepers == requests, timeout=5, what=f"{requests} requests waiting for tokens")


async def test_burst_passes_at_once_then_requests_are_spaced_by_one_over_qps() -> None:
    clock = FakeClock()
    bucket = _TokenBucket(qps=10.0, burst=2, clock=clock)
    finished: list[float] = []

    async def request() -> None:
        await bucket.acquire()
        finished.append(round(clock.monotonic() - 1000.0, 6))

    tasks = [asyncio.ensure_future(request()) for _ in range(4)]
    await _until_waiting(clock, requests=2)  # the two beyond the burst
    assert finished == [0.0, 0.0]
    await clock.advance(0.1)
    assert finished == [0.0, 0.0, 0.1]
    await clock.advance(0.1)
    await asyncio.gather(*tasks)
    assert finished == [0.0, 0.0, 0.1, 0.2]


async def test_idle_time_refills_the_bucket_up_to_the_burst() -> None:
    clock = FakeClock()
    bucket = _TokenBucket(qps=1.0, burst=3, clock=clock)
    for _ in range(3):
        await bucket.acquire()
    await clock.advance(100)
    for _ in range(3):
        await asyncio.wait_for(bucket.acquire(), timeout=1)  # no waiting: refilled to 3, not 100
    assert clock.sleepers == 0
    pending = asyncio.ensure_future(bucket.acquire())
    await _until_waiting(clock)
    await clock.advance(1)
    await pending


def test_qps_must_be_positive() -> None:
    from arc_scaleset.kube.client import KubeClient
    from arc_scaleset.kube.credentials import ConnectionConfig

    with pytest.raises(ValueError, match="qps must be positive"):
        KubeClient(ConnectionConfig(server="http://127.0.0.1:1"), qps=0)


def test_each_resource_has_its_own_bucket_for_writes_and_one_for_lists_and_watches() -> None:
    assert rate_limit_key(PODS, "create") == rate_limit_key(PODS, "patch") == rate_limit_key(PODS, "get")
    assert rate_limit_key(PODS, "list") == rate_limit_key(PODS, "watch")
    keys = {rate_limit_key(resource, verb) for resource in (PODS, SECRETS, CONFIG_MAPS) for verb in ("get", "list")}
    assert len(keys) == 6
    assert rate_limit_key(None, "get") == rate_limit_key(None, "post")  # raw paths: one bucket


def test_same_plural_in_another_group_is_another_bucket() -> None:
    core_events = Resource("", "v1", "events", "Event")
    events_api = Resource("events.k8s.io", "v1", "events", "Event")
    assert rate_limit_key(core_events, "create") != rate_limit_key(events_api, "create")


async def test_a_resource_whose_bucket_is_empty_does_not_delay_another() -> None:
    clock = FakeClock()
    limits = _RateLimits(qps=1.0, burst=1, clock=clock)
    await limits.acquire(PODS, "create")
    pods = asyncio.ensure_future(limits.acquire(PODS, "create"))
    await _until_waiting(clock)  # the second pod waits for its token
    await asyncio.wait_for(limits.acquire(SECRETS, "create"), timeout=1)  # Secrets: a bucket of their own
    await asyncio.wait_for(limits.acquire(PODS, "watch"), timeout=1)  # the pods' watch: one of its own too
    assert not pods.done()
    await clock.advance(1)
    await pods


async def test_with_rate_limit_draws_every_request_from_one_bucket() -> None:
    from arc_scaleset.kube.client import KubeClient
    from arc_scaleset.kube.credentials import ConnectionConfig

    clock = FakeClock()
    limited = KubeClient(ConnectionConfig(server="http://127.0.0.1:1"), clock=clock).with_rate_limit(1.0, 1)
    limits = limited._limiter
    assert limits is not None
    await limits.acquire(SECRETS, "list")
    blocked = asyncio.ensure_future(limits.acquire(CONFIG_MAPS, "list"))
    await _until_waiting(clock)
    await clock.advance(1)
    await blocked


async def test_delay_says_how_long_a_request_made_now_would_wait_and_reserves_nothing() -> None:
    clock = FakeClock()
    bucket = _TokenBucket(qps=10.0, burst=2, clock=clock)
    assert bucket.delay() == 0.0
    await bucket.acquire()
    assert bucket.delay() == 0.0  # one token left
    await bucket.acquire()
    assert bucket.delay() == pytest.approx(0.1)
    assert bucket.delay() == pytest.approx(0.1)  # asking took no token
    waiting = [asyncio.ensure_future(bucket.acquire()) for _ in range(3)]  # queued: 0.1, 0.2 and 0.3 s
    await _until_waiting(clock, requests=3)
    assert bucket.delay() == pytest.approx(0.4)  # behind the three in line
    await clock.advance(0.4)
    await asyncio.gather(*waiting)
    assert bucket.delay() == pytest.approx(0.0)


async def test_rate_limit_delay_is_per_bucket_and_zero_without_a_limit() -> None:
    from arc_scaleset.kube.client import KubeClient
    from arc_scaleset.kube.credentials import ConnectionConfig

    clock = FakeClock()
    config = ConnectionConfig(server="http://127.0.0.1:1")
    assert KubeClient(config, clock=clock).rate_limit_delay(PODS, "patch") == 0.0
    limited = KubeClient(config, qps=1.0, burst=1, clock=clock)
    assert limited._limiter is not None
    await limited._limiter.acquire(PODS, "create")
    assert limited.rate_limit_delay(PODS, "patch") == pytest.approx(1.0)  # the pods' bucket: empty
    assert limited.rate_limit_delay(PODS, "list") == 0.0  # the pods' list/watch bucket
    assert limited.rate_limit_delay(SECRETS, "patch") == 0.0
