"""Waiting on a condition, the one way tests, benchmarks and the demo harness do it: poll with a timeout.

Never a bare sleep: a test that sleeps either waits too long or races. :func:`eventually` polls a check
(plain or async) until it returns something truthy, backing off from ``interval`` to half a second, and
fails naming what it waited for; :func:`wait_until` is the same for synchronous start-up code.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def eventually(
    check: Callable[[], Any] | Callable[[], Awaitable[Any]],
    what: str = "the condition",
    *,
    timeout: float = 30.0,
    interval: float = 0.02,
    max_interval: float = 0.5,
) -> Any:
    """Poll ``check`` until it returns something truthy and return that; raise ``TimeoutError`` naming
    ``what`` after ``timeout`` seconds. ``check`` may be a plain function or a coroutine function. The pause
    between polls grows from ``interval`` to ``max_interval`` (a benchmark that times the wait keeps it small)."""
    deadline = time.monotonic() + timeout
    delay = interval
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(delay)
        delay = min(delay * 1.5, max_interval)


def wait_until(check: Callable[[], Any], what: str = "the condition", *, timeout: float = 30.0) -> Any:
    """:func:`eventually` for code that cannot await (a helper process started from synchronous code): poll
    the plain function ``check`` until it returns something truthy and return that."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while not (result := check()):
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    return result
