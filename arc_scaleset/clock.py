"""An injectable clock, so that backoff, leases, timeouts and token expiry can be tested exactly.

Production code takes a :class:`Clock` (default :data:`REAL_CLOCK`) instead of calling ``time`` or
``asyncio.sleep`` directly. Tests pass a :class:`FakeClock` and move time with :meth:`FakeClock.advance`:
sleepers wake in deadline order, and no test waits for real time to pass.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic time for intervals, wall time for timestamps, and a sleep that honours both."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards; only differences are meaningful."""
        ...

    def now(self) -> dt.datetime:
        """The current wall-clock time, timezone-aware (UTC)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the caller for ``seconds`` of this clock's time (``<= 0`` yields once)."""
        ...


class RealClock:
    """The process's real clocks."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


REAL_CLOCK: Clock = RealClock()


class FakeClock:
    """A clock that moves only when a test calls :meth:`advance`.

    ``sleep`` registers a deadline and waits; ``advance(dt)`` moves time forward and wakes every sleeper
    whose deadline has passed, in deadline order, letting each run before the next one wakes.
    """

    def __init__(self, *, start: dt.datetime | None = None) -> None:
        self._monotonic = 1000.0
        self._wall = start or dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        return self._monotonic

    def now(self) -> dt.datetime:
        return self._wall

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._monotonic + seconds, next(self._order), future))
        await future

    @property
    def sleepers(self) -> int:
        """How many coroutines are currently sleeping on this clock (cancelled ones excluded)."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking due sleepers one deadline at a time."""
        target = self._monotonic + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, future = heapq.heappop(self._sleepers)
            self._set(deadline)
            if not future.done():
                future.set_result(None)
            # Let the woken coroutine (and whatever it schedules) run before time moves on.
            for _ in range(5):
                await asyncio.sleep(0)
        self._set(target)
        await asyncio.sleep(0)

    def _set(self, monotonic: float) -> None:
        self._wall += dt.timedelta(seconds=monotonic - self._monotonic)
        self._monotonic = monotonic
