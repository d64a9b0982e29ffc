"""Ending background tasks (arc_scaleset/tasks.py): cancelled ones end quietly, a failure is not hidden."""

from __future__ import annotations

import asyncio

import pytest

from arc_scaleset.tasks import cancel_and_wait


async def test_every_task_is_cancelled_and_ended_before_the_call_returns() -> None:
    tasks = [asyncio.create_task(asyncio.Event().wait()) for _ in range(3)]
    await cancel_and_wait(tasks[0], None, *tasks[1:])
    assert all(task.cancelled() for task in tasks)


async def test_a_task_that_had_failed_before_it_was_stopped_raises_its_error() -> None:
    async def fail() -> None:
        raise RuntimeError("lost the watch")

    failed = asyncio.create_task(fail())
    await asyncio.wait([failed])
    with pytest.raises(RuntimeError, match="lost the watch"):
        await cancel_and_wait(failed)
