"""A standby listener's admin token, kept fresh while it stands by (listener/standby_token.py; docs/listener.md,
"Standby listener"): against the simulated service, on a clock the test moves, for an hour of six token lives."""

from __future__ import annotations

import asyncio

import pytest

from arc_scaleset.clock import FakeClock
from arc_scaleset.listener.standby_token import REFRESH_AHEAD, keep_admin_token_fresh
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim.faults import FaultRule
from arc_scaleset_lab.sim.middleware import RequestRecord
from arc_scaleset_lab.sim.server import SimulatedGitHub
from arc_scaleset_lab.sim.state import SimConfig
from tests.integration.github.conftest import PAT, make_client

TTL = 600.0
STEP = 100.0


def routes(sim: SimulatedGitHub) -> list[RequestRecord]:
    return [r for r in sim.requests if r.route == "runner_registration"]


def exchanges(sim: SimulatedGitHub) -> int:
    return sum(1 for r in routes(sim) if r.status == 200)


async def test_a_standby_replaces_its_token_once_per_life_and_a_takeover_always_finds_one_to_use_as_it_is() -> None:
    clock = FakeClock()
    async with await SimulatedGitHub.start(config=SimConfig(admin_token_ttl=TTL), clock=clock) as sim:
        sim.credentials.add_token(PAT)
        async with make_client(sim, clock=clock) as client:
            expires_at = (await client.admin_connection()).expires_at
            keeper = asyncio.create_task(keep_admin_token_fresh(client, clock, expires_at))
            try:
                for _ in range(int(3600 / STEP)):
                    await eventually(lambda: clock.sleepers == 1, timeout=10, what="the keeper to wait")
                    await clock.advance(STEP)
                    await eventually(lambda: clock.sleepers == 1, timeout=10, what="the keeper to wait again")
                    # What a takeover would do now: use the token, which the client finds fresh.
                    before = exchanges(sim)
                    await client.get_runner_group_by_name("Default")
                    assert exchanges(sim) == before
            finally:
                keeper.cancel()
                await asyncio.gather(keeper, return_exceptions=True)
    # The warm-up's token and one per token life since: replaced REFRESH_AHEAD before each expiry.
    assert exchanges(sim) == 1 + int(3600 // (TTL - REFRESH_AHEAD))


async def test_a_failed_refresh_is_tried_again_ever_more_slowly_until_one_succeeds() -> None:
    clock = FakeClock()
    async with await SimulatedGitHub.start(config=SimConfig(admin_token_ttl=TTL), clock=clock) as sim:
        sim.credentials.add_token(PAT)
        async with make_client(sim, clock=clock) as client:
            expires_at = (await client.admin_connection()).expires_at
            sim.faults.add(FaultRule(route="runner_registration", status=400, count=3))
            keeper = asyncio.create_task(keep_admin_token_fresh(client, clock, expires_at))
            try:
                waits: list[float] = []
                for _ in range(4):  # the first refresh and its three retries
                    await eventually(lambda: clock.sleepers == 1, timeout=10, what="the keeper to wait")
                    started = clock.monotonic()
                    attempts = len(routes(sim))
                    while len(routes(sim)) == attempts:
                        await clock.advance(1)
                        await eventually(lambda: clock.sleepers == 1, timeout=10, what="the keeper to wait again")
                    waits.append(clock.monotonic() - started)
            finally:
                keeper.cancel()
                await asyncio.gather(keeper, return_exceptions=True)
    assert [r.status for r in routes(sim)] == [200, 400, 400, 400, 200]
    first, *retries = waits
    assert first == pytest.approx(TTL - REFRESH_AHEAD, abs=1)
    # 10 s, 20 s, 40 s, each stretched by up to 20 % of jitter (give or take this test's 1 s steps).
    for wait, base in zip(retries, (10.0, 20.0, 40.0), strict=True):
        assert base <= wait <= base * 1.2 + 1
