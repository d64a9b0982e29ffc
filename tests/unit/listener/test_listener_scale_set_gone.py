"""A listener that finds its scale set gone on GitHub says so on its EphemeralRunnerSet before it stops, so the
controller registers the scale set again at once instead of at its 5-minute check (issue 15, item 8)."""

from __future__ import annotations

import asyncio

from arc_scaleset.api.listener_state import SCALE_SET_NOT_FOUND, ListenerPhase
from arc_scaleset.github.errors import NotFound, SessionNotFound
from tests.unit.listener.fakes import SCALE_SET_ID, Harness, error


async def test_a_scale_set_deleted_on_github_is_recorded_as_stopped_with_scale_set_not_found() -> None:
    h = Harness()
    # The scale set is deleted: its session goes with it, and creating a new one says the scale set is unknown.
    h.actions.poll_script.append(error(SessionNotFound, 404))
    run = asyncio.create_task(h.app().run())
    await h.settle(lambda: bool(h.calls("poll")))
    h.actions.create_forever = error(NotFound, 404)
    for _ in range(10):
        if run.done():
            break
        await h.clock.advance(1.0)
        await h.settle(run.done)
    assert await asyncio.wait_for(run, timeout=5) == 1, "the listener stops: the controller must act"
    final = h.patcher.state_writes()[-1]
    assert (final.state, final.last_error_class, final.scale_set_id) == (
        ListenerPhase.STOPPED,
        SCALE_SET_NOT_FOUND,
        SCALE_SET_ID,
    )
