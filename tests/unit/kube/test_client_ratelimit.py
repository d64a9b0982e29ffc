"""The client-side qps/burst limiter, on a fake clock."""

from __future__ import annotations

import asyncio

import pytest

from arc_scaleset.clock import FakeClock
from arc_scaleset.kube.client import _TokenBucket


async def test_burst_passes_at_once_then_requests_are_spaced_by_one_over_qps() -> None:
    clock = FakeClock()
    bucket = _TokenBucket(qps=10.0, burst=2, clock=clock)
    finished: list[float] = []

    async def request() -> None:
        await bucket.acquire()
        finished.append(round(clock.monotonic() - 1000.0, 6))

    tasks = [asyncio.ensure_future(request()) for _ in range(4)]
    for _ in range(10):
        await asyncio.sleep(0)
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
    await asyncio.sleep(0)
    assert clock.sleepers == 1
    await clock.advance(1)
    await pending


def test_qps_must_be_positive() -> None:
    from arc_scaleset.kube.client import KubeClient
    from arc_scaleset.kube.credentials import ConnectionConfig

    with pytest.raises(ValueError, match="qps must be positive"):
        KubeClient(ConnectionConfig(server="http://127.0.0.1:1"), qps=0)
