"""The most asyncio tasks alive at once while a block runs: how the bounds tests show that a huge request
makes no task per missing runner.

Counted where tasks are born (the loop's task factory), so the peak is exact rather than sampled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass
class TaskPeak:
    """``peak``: the largest number of unfinished tasks of the loop seen right after a task was created."""

    peak: int


@contextlib.contextmanager
def peak_task_count() -> Iterator[TaskPeak]:
    """Within the block, record the loop's peak task count; the previous task factory is restored after."""
    loop = asyncio.get_running_loop()
    previous = loop.get_task_factory()
    found = TaskPeak(len(asyncio.all_tasks(loop)))

    def counting_factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Future[Any]:
        task: asyncio.Future[Any] = (
            previous(loop, coro, **kwargs) if previous is not None else asyncio.Task(coro, loop=loop, **kwargs)
        )
        found.peak = max(found.peak, len(asyncio.all_tasks(loop)))
        return task

    loop.set_task_factory(counting_factory)
    try:
        yield found
    finally:
        loop.set_task_factory(previous)
