"""Ending a background task: the one idiom every stop path uses."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel each of ``tasks`` (``None`` is skipped), then wait until each has ended.

    A task's ending by its cancellation is what was asked for, so its ``CancelledError`` is not raised; any
    other exception a task ended with is. All are cancelled before the first is awaited, so they wind down
    together.
    """
    for task in tasks:
        if task is not None:
            task.cancel()
    for task in tasks:
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task
