"""Fixtures for contract tests of the GitHub client against the simulated service over real loopback HTTP."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from arc_scaleset.clock import REAL_CLOCK, Clock, FakeClock
from arc_scaleset.github import (
    ActionsClient,
    Credentials,
    PersonalAccessToken,
    SystemInfo,
    TransportOptions,
    parse_config_url,
)
from arc_scaleset_lab.sim.server import SimulatedGitHub
from arc_scaleset_lab.sim.state import SimConfig

PAT = "ghp_contract_test_token_0123456789"


class InstantClock(FakeClock):
    """A fake clock whose ``sleep`` returns at once, moving time forward by the requested amount.

    ``sleeps`` records every requested duration, so a test can check *what* the client waited for without
    waiting for it.
    """

    def __init__(self) -> None:
        # Start at the real time, so that a sim on the real clock accepts the JWTs this clock dates.
        super().__init__(start=dt.datetime.now(dt.UTC))
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if seconds > 0:
            self._set(self.monotonic() + seconds)
        await asyncio.sleep(0)


SimFactory = Callable[..., AbstractAsyncContextManager[SimulatedGitHub]]


@pytest.fixture
def start_sim() -> SimFactory:
    """``async with start_sim(clock=..., **SimConfig fields) as sim``: a sim with the PAT already accepted."""

    @asynccontextmanager
    async def start(*, clock: Clock = REAL_CLOCK, tls: bool = False, **config: Any) -> AsyncIterator[SimulatedGitHub]:
        settings = SimConfig(**{"long_poll_seconds": 0.2, **config})
        async with await SimulatedGitHub.start(config=settings, clock=clock, tls=tls) as sim:
            sim.credentials.add_token(PAT)
            yield sim

    return start


@pytest.fixture
async def sim(start_sim: SimFactory) -> AsyncIterator[SimulatedGitHub]:
    async with start_sim() as running:
        yield running


@pytest.fixture
def instant_clock() -> InstantClock:
    return InstantClock()


def make_client(
    sim: SimulatedGitHub, *, clock: Clock, org: str = "org", credentials: Credentials | None = None, **transport: Any
) -> ActionsClient:
    """A client for ``org`` on ``sim`` (a GHES-style config URL; a PAT unless ``credentials`` are given), with
    a 10 s request timeout unless ``transport`` (:class:`TransportOptions` fields) says otherwise."""
    return ActionsClient(
        parse_config_url(sim.config_url(org)),
        credentials or PersonalAccessToken(PAT),
        system_info=SystemInfo(subsystem="contract-test", scale_set_id=0),
        transport=TransportOptions(**{"request_timeout": 10.0, **transport}),
        clock=clock,
        long_poll_timeout=10.0,
    )


def client_for(base: str, **transport: Any) -> ActionsClient:
    """A PAT client for ``{base}/org``, with a 10 s request timeout unless ``transport`` (:class:`TransportOptions`
    fields) says otherwise."""
    return ActionsClient(
        parse_config_url(f"{base}/org"),
        PersonalAccessToken(PAT),
        system_info=SystemInfo(subsystem="contract-test"),
        transport=TransportOptions(**{"request_timeout": 10.0, **transport}),
        clock=InstantClock(),
    )
