"""Cooperative shutdown: waits that end early, and only where ending early is safe.

The listener never cancels itself in the middle of handling a message (an acknowledged message whose
jobs were not acquired would be lost). Instead, every place where it *waits* (the long poll, a backoff
delay) goes through :class:`StopSignal`, which raises :class:`~arc_scaleset.listener.errors.Stopping` as
soon as shutdown is requested; the caller unwinds from there.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import TypeVar

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.listener.errors import Stopping

T = TypeVar("T")


class StopSignal:
    """A shutdown request, and waits (on the injected clock) that give way to it."""

    def __init__(self, *, clock: Clock = REAL_CLOCK) -> None:
        self.clock = clock
        self._event = asyncio.Event()

    def set(self) -> None:
        """Request shutdown; every current and future :meth:`sleep`/:meth:`race` raises Stopping."""
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()

    def check(self) -> None:
        """Raise :class:`Stopping` if shutdown was requested."""
        if self._event.is_set():
            raise Stopping()

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` on the clock, or raise :class:`Stopping` as soon as shutdown is requested."""
        await self.race(self.clock.sleep(seconds))

    async def race(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable``; if shutdown is requested first, cancel it and raise :class:`Stopping`."""
        if self._event.is_set():
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never started: close it rather than leave it "never awaited"
            raise Stopping()
        work = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not work.done():
                work.cancel()
                # Let the cancelled call unwind (close its connection) before we go on.
                await asyncio.gather(work, return_exceptions=True)
        if work.cancelled() or not work.done():
            raise Stopping()
        return work.result()
