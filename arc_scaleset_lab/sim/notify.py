"""Wake-ups on state change: long polls, the job timer and test waits all sleep on one broadcast."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TypeVar

from arc_scaleset.clock import Clock

_T = TypeVar("_T")

# How often wait_until re-checks even without a change: some conditions are on things that never notify
# (the request log).
_RECHECK_SECONDS = 0.05


class ChangeNotifier:
    """``notify()`` wakes every current waiter; a waiter captures the generation before it sleeps.

    Check-then-wait is race-free on one loop as long as no ``await`` separates the check from
    :meth:`wait`'s capture of the current event, which is the case for all callers.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, seconds: float | None, *, clock: Clock | None = None) -> bool:
        """Sleep until the next change or for ``seconds`` (on ``clock``; real time when None). True = changed."""
        event = self._event
        if seconds is None:
            await event.wait()
            return True
        if seconds <= 0:
            return False
        if clock is None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await event.wait()
            return event.is_set()
        waiter = asyncio.ensure_future(event.wait())
        sleeper = asyncio.ensure_future(clock.sleep(seconds))
        try:
            await asyncio.wait({waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            sleeper.cancel()
        return event.is_set()

    async def poll_until(self, query: Callable[[], _T], *, within: float) -> _T:
        """``query()`` now and after every change until its result is truthy or ``within`` seconds (real time)
        pass; returns the last result (falsy when time ran out)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while not (result := query()):
            if not await self.wait(deadline - loop.time()):
                return query()
        return result

    async def wait_until(self, predicate: Callable[[], bool], *, within: float = 10.0) -> None:
        """Return once ``predicate()`` holds; TimeoutError after ``within`` seconds (real time).

        Re-checks on every change, and at least every 50 ms, for conditions on things that do not notify.
        """
        async with asyncio.timeout(within):
            while not predicate():
                await self.wait(_RECHECK_SECONDS)
