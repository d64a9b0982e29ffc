"""The listener records its state on its EphemeralRunnerSet, and a successor ends the session it left behind.

Issue: a listener killed with SIGKILL was replaced in 5 s, but the new one waited about 120 s for the old
session to expire; and while it held no session, or failed every poll, nothing outside its log said so.
"""

from __future__ import annotations

import asyncio

import orjson
import pytest

from arc_scaleset.api.keys import ANNOTATION_LISTENER_STATE
from arc_scaleset.api.listener_state import ListenerPhase, ListenerState
from arc_scaleset.github.errors import SessionConflict, SessionNotFound, TransientError
from arc_scaleset.listener.errors import RETRY_CAP, RETRY_JITTER
from arc_scaleset.listener.health import DEFAULT_LIVENESS_WINDOW, POLL_BOUND
from tests.unit.fakes import session
from tests.unit.listener.fakes import KILLED_POD_SESSION, SCALE_SET_ID, Harness, error, message


def recorded(h: Harness) -> ListenerState | None:
    return ListenerState.from_annotation(h.patcher.ers_annotations.get(ANNOTATION_LISTENER_STATE))


def predecessor_record(session_id: str, *, scale_set_id: int = SCALE_SET_ID) -> dict[str, object]:
    return {
        "scaleSetId": scale_set_id,
        "owner": "pod-a",
        "sessionId": session_id,
        "state": "Polling",
        "since": "2026-01-01T00:00:00Z",
        "lastSuccessfulPoll": "2026-01-01T00:00:00Z",
        "lastErrorClass": "",
    }


# ---- taking over from a predecessor --------------------------------------------------------------------------


async def test_a_409_ends_the_session_the_predecessor_recorded_and_takes_the_scale_set_at_once() -> None:
    h = Harness()
    h.patcher.record_state(predecessor_record(KILLED_POD_SESSION))
    h.actions.create_script.append(error(SessionConflict, 409))
    run = asyncio.create_task(h.app().run())
    await h.settle(lambda: bool(h.calls("poll")))
    assert h.actions.deleted_sessions == [KILLED_POD_SESSION]
    assert [entry[0] for entry in h.log if entry[0] in ("create_session", "delete_session")] == [
        "create_session",
        "delete_session",
        "create_session",
    ]
    assert h.clock.monotonic() == 1000.0  # no time passed: no waiting for the service to expire it
    assert h.health.ready()[0]
    state = recorded(h)
    assert state is not None
    assert (state.session_id, state.state) == (session(1), ListenerPhase.POLLING)
    h.stop.set()
    assert await run == 0


async def test_the_predecessors_record_is_read_while_the_admin_connection_is_made() -> None:
    """Issue 30: a replacement's way to its first poll is time nobody takes the scale set's jobs, so the two
    start-up requests that do not depend on each other are made together; a connection that fails is the
    session's to retry."""
    h = Harness()
    h.patcher.record_state(predecessor_record(KILLED_POD_SESSION))
    connected = asyncio.Event()

    async def admin_connection() -> object:
        await connected.wait()
        raise error(TransientError, 503)

    h.actions.admin_connection = admin_connection  # type: ignore[method-assign]
    preparing = asyncio.create_task(h.app().prepare())
    await h.settle(lambda: h.sessions.predecessor is not None)
    assert h.sessions.predecessor == KILLED_POD_SESSION  # read while the connection is still being made
    assert not preparing.done()
    connected.set()
    await preparing  # the failure is not prepare's


async def test_the_recorded_session_of_another_scale_set_id_is_left_alone() -> None:
    h = Harness()
    h.patcher.record_state(predecessor_record("0da00000-0000-4000-8000-000000000002", scale_set_id=SCALE_SET_ID + 1))
    h.actions.create_script.append(error(SessionConflict, 409))
    app = h.app()
    await app.take_over_from_predecessor()
    assert h.sessions.predecessor is None
    h.start()
    await h.settle()
    assert h.actions.deleted_sessions == []
    assert len(h.calls("create_session")) == 1  # waiting for the backoff, not deleting
    await h.stop_and_wait()


@pytest.mark.parametrize(
    "session_id",
    ["../../runnerscalesets/8/sessions/x", "{5e5510e0-0000-4000-8000-000000000001}", "5e5510e0%2F..", ""],
)
async def test_a_recorded_session_id_that_is_no_uuid_is_never_taken_over(session_id: str) -> None:
    """The annotation is on an object the scale set's team may write: only a UUID goes into a request path."""
    h = Harness()
    h.patcher.record_state(predecessor_record(session_id))
    h.actions.create_script.append(error(SessionConflict, 409))
    app = h.app()
    await app.take_over_from_predecessor()
    assert h.sessions.predecessor is None
    h.start()
    await h.settle()
    assert h.actions.deleted_sessions == []
    await h.stop_and_wait()


def test_the_rest_of_a_state_with_a_session_id_that_is_no_uuid_is_still_read() -> None:
    state = ListenerState.from_annotation(orjson.dumps(predecessor_record("x/../y")).decode())
    assert state is not None
    assert (state.session_id, state.owner, state.state) == (None, "pod-a", ListenerPhase.POLLING)
    uuid_state = ListenerState.from_annotation(orjson.dumps(predecessor_record(KILLED_POD_SESSION)).decode())
    assert uuid_state is not None
    assert uuid_state.session_id == KILLED_POD_SESSION


async def test_a_predecessor_session_that_cannot_be_deleted_yet_is_tried_again_at_the_next_409() -> None:
    h = Harness()
    h.sessions.predecessor = KILLED_POD_SESSION
    h.actions.create_script.extend([error(SessionConflict, 409)] * 2)
    h.actions.delete_session_script.append(error(TransientError, 503))
    h.start()
    await h.settle()
    assert h.actions.deleted_sessions == []
    await h.clock.advance(1.0)
    await h.settle(lambda: bool(h.calls("poll")))
    assert h.actions.deleted_sessions == [KILLED_POD_SESSION]
    assert h.sessions.held
    await h.stop_and_wait()


async def test_a_listener_that_lost_its_session_never_takes_the_scale_set_back_from_a_successor() -> None:
    h = Harness()
    h.sessions.predecessor = KILLED_POD_SESSION
    h.actions.poll_script.append(error(SessionNotFound, 404))  # a successor took over and deleted ours
    h.start()
    await h.settle(lambda: bool(h.calls("poll")))
    assert h.sessions.predecessor is None  # our own session replaced the predecessor's
    h.actions.create_forever = error(SessionConflict, 409)
    await h.run_for(30.0)
    assert h.actions.deleted_sessions == [session(1)]  # only our own lost one, best effort
    assert not h.sessions.held
    await h.stop_and_wait()


# ---- the recorded state ----------------------------------------------------------------------------------------


async def test_a_new_session_is_recorded_and_a_clean_shutdown_records_that_it_ended() -> None:
    h = Harness()
    run = asyncio.create_task(h.app().run())
    await h.settle(lambda: bool(h.calls("poll")))
    await h.settle(lambda: recorded(h) is not None)
    state = recorded(h)
    assert state is not None
    assert (state.scale_set_id, state.owner, state.session_id) == (SCALE_SET_ID, "pod-a", session(1))
    h.stop.set()
    assert await run == 0
    state = recorded(h)
    assert state is not None
    assert (state.state, state.session_id) == (ListenerPhase.STOPPED, None)  # deleted: nothing to end


async def test_the_state_is_written_when_it_changes_never_per_poll() -> None:
    h = Harness()
    h.actions.poll_script.extend([None] * 20 + [error(TransientError, 503)] * 3 + [None] * 20 + [message(1)] * 1)
    h.start()
    await h.run_for(30.0)
    phases = [(s.state, s.last_error_class) for s in h.patcher.state_writes()]
    assert phases == [
        (ListenerPhase.POLLING, ""),
        (ListenerPhase.FAILING, "TransientError"),
        (ListenerPhase.POLLING, ""),
    ]
    failing = h.patcher.state_writes()[1]
    assert failing.last_successful_poll is not None
    assert failing.last_successful_poll <= failing.since
    await h.stop_and_wait()


async def test_waiting_for_a_held_session_is_recorded_with_the_reason() -> None:
    h = Harness()
    h.actions.create_forever = error(SessionConflict, 409)
    h.start()
    await h.run_for(5.0)
    states = h.patcher.state_writes()
    assert [(s.state, s.session_id, s.last_error_class) for s in states] == [
        (ListenerPhase.WAITING_FOR_SESSION, None, "SessionConflict")
    ]
    assert not h.health.ready()[0]
    await h.stop_and_wait()


async def test_a_state_write_that_fails_is_retried_beside_the_loop_and_a_superseded_state_never_written() -> None:
    h = Harness()
    h.patcher.refused_state_writes["Failing"] = 2
    h.actions.poll_script.extend([None, error(TransientError, 503), None])
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 2)
    await h.clock.advance(1.0)
    await h.settle()
    # The loop polled again on schedule while the write of "Failing" was being refused ...
    assert len(h.calls("poll")) == 4
    await h.run_for(10.0)
    # ... and by the time a write could land the listener was polling again: that is what was written.
    assert [s.state for s in h.patcher.state_writes()] == [ListenerPhase.POLLING, ListenerPhase.POLLING]
    assert h.reporter.written is not None
    assert h.reporter.written.state is ListenerPhase.POLLING
    await h.stop_and_wait()


# ---- liveness ----------------------------------------------------------------------------------------------


def test_the_liveness_window_outlasts_the_longest_backoff_delay_and_two_polls() -> None:
    assert DEFAULT_LIVENESS_WINDOW == 360.0
    assert DEFAULT_LIVENESS_WINDOW >= 2 * POLL_BOUND + RETRY_CAP * (1 + RETRY_JITTER)


async def test_healthz_fails_after_the_documented_window_without_a_successful_poll_and_recovers_with_one() -> None:
    h = Harness(liveness_window=DEFAULT_LIVENESS_WINDOW)
    h.actions.poll_script.append(None)
    h.actions.poll_forever = error(TransientError, 503)
    h.start()
    await h.settle(lambda: len(h.calls("poll")) >= 2)
    await h.run_for(DEFAULT_LIVENESS_WINDOW - 1.0, step=1.0)
    assert h.health.live()[0]
    await h.run_for(2.0, step=1.0)
    ok, why = h.health.live()
    assert not ok
    assert why.startswith("no successful poll for 36")
    h.actions.poll_forever = None
    h.actions.poll_script.append(None)
    await h.run_for(RETRY_CAP + 1.0, step=1.0)
    assert h.health.live()[0]
    await h.stop_and_wait()
