"""Waiting on a condition, the one way tests, benchmarks and the demo harness do it: poll with a timeout.

Never a bare sleep: a test that sleeps either waits too long or races. :func:`eventually` polls a check
(plain or async) until it returns something truthy, backing off from ``interval`` to half a second, and
fails naming what it waited for.
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
) -> Any:
    """Poll ``check`` until it returns something truthy and return that; raise ``TimeoutError`` naming
    ``what`` after ``timeout`` seconds. ``check`` may be a plain function or a coroutine function."""
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
        delay = min(delay * 1.5, 0.5)
