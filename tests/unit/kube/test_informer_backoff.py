"""An informer whose API server cannot be reached backs off (no busy loop) and logs one line per failure.

The "server" is a closed port on loopback, not a fake API: every attempt fails to connect for real.
Time is a fake clock, so the backoff schedule is checked exactly and instantly.
"""

from __future__ import annotations

import logging
import socket

import pytest

from arc_scaleset.backoff import Backoff
from arc_scaleset.clock import FakeClock
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.credentials import ConnectionConfig
from arc_scaleset.kube.informer import Informer
from arc_scaleset.kube.resources import CONFIG_MAPS
from arc_scaleset_lab.harness.waiting import eventually


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_an_unreachable_api_is_retried_with_growing_delays_and_one_log_line_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    client = KubeClient(ConnectionConfig(server=f"http://127.0.0.1:{closed_port()}"), retries=0, clock=clock)
    informer = Informer(client, CONFIG_MAPS, clock=clock, backoff=Backoff(base=1.0, cap=8.0, jitter=0.0))

    def failures() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "arc_scaleset.kube.informer"]

    with caplog.at_level(logging.WARNING, logger="arc_scaleset.kube.informer"):
        informer.start()
        try:
            await eventually(lambda: len(failures()) == 1 and clock.sleepers == 1)
            for attempt, delay in enumerate([1.0, 2.0, 4.0, 8.0, 8.0], start=2):
                await clock.advance(delay - 0.01)
                assert len(failures()) == attempt - 1, "retried before the backoff delay"
                await clock.advance(0.01)
                await eventually(lambda n=attempt: len(failures()) == n and clock.sleepers == 1)  # type: ignore[misc]
        finally:
            await informer.stop()
            await client.close()

    lines = failures()
    assert [line.rsplit("retrying in ", 1)[1] for line in lines] == ["1.0s", "2.0s", "4.0s", "8.0s", "8.0s", "8.0s"]
    assert all("list failed" in line and "\n" not in line for line in lines)
    assert client.request_counts[("list", "configmaps")] == 6
    assert not informer.has_synced


async def test_an_api_unreachable_for_more_than_a_thousand_attempts_is_still_retried_at_the_cap() -> None:
    # A backoff of 2**attempts overflowed a float after 1024 failures in a row (under nine hours at a 30 s cap):
    # the informer's task died with OverflowError and the controller never heard of that resource again.
    clock = FakeClock()
    client = KubeClient(ConnectionConfig(server=f"http://127.0.0.1:{closed_port()}"), retries=0, clock=clock)
    backoff = Backoff(base=1.0, cap=8.0, jitter=0.0, attempts=1100)  # as after 1100 failures in a row
    informer = Informer(client, CONFIG_MAPS, clock=clock, backoff=backoff)
    informer.start()
    try:
        for attempt in (1, 2):
            await eventually(
                lambda n=attempt: client.request_counts[("list", "configmaps")] == n and clock.sleepers == 1  # type: ignore[misc]
            )
            await clock.advance(8.0)
    finally:
        await informer.stop()
        await client.close()
    assert not informer.has_synced
