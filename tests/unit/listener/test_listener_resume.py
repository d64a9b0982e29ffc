"""A listener leaves no gap (docs/listener.md, "Leaving no gap"): every decision records the session, the last
message acted on and the unconfirmed acquisitions on the EphemeralRunnerSet; a successor resumes that session
from there instead of starting a new one."""

from __future__ import annotations

import asyncio
import datetime as dt

from arc_scaleset.api.keys import ANNOTATION_LISTENER_CURSOR
from arc_scaleset.api.listener_cursor import MAX_RECORDED_REQUESTS, ListenerCursor, resumable
from arc_scaleset.api.listener_state import ListenerPhase, ListenerState
from arc_scaleset.github.errors import SessionConflict, SessionNotFound
from arc_scaleset.github.models import JobAvailable
from tests.unit.listener.fakes import KILLED_POD_SESSION, MAX_RUNNERS, SCALE_SET_ID, Harness, error, message, stats
from tests.unit.listener.test_listener_state import predecessor_record


def cursor(h: Harness) -> ListenerCursor | None:
    return ListenerCursor.from_annotation(h.patcher.ers_annotations.get(ANNOTATION_LISTENER_CURSOR))


def predecessor_cursor(last_message_id: int, *acquiring: int, session_id: str = KILLED_POD_SESSION) -> str:
    return ListenerCursor(
        scale_set_id=SCALE_SET_ID, session_id=session_id, last_message_id=last_message_id, acquiring=acquiring
    ).to_annotation()


# ---- the record ------------------------------------------------------------------------------------------------


def test_the_cursor_is_read_strictly() -> None:
    good = predecessor_cursor(4, 11, 12)
    assert ListenerCursor.from_annotation(good) == ListenerCursor(
        scale_set_id=SCALE_SET_ID, session_id=KILLED_POD_SESSION, last_message_id=4, acquiring=(11, 12)
    )
    base = f'"scaleSetId":{SCALE_SET_ID},"sessionId":"{KILLED_POD_SESSION}"'
    for bad in (
        None,
        "",
        "not json",
        '{"scaleSetId":7,"sessionId":"../../sessions","lastMessageId":1}',  # not the service's form of an ID
        "{" + base + ',"lastMessageId":-1}',
        "{" + base + ',"lastMessageId":1,"acquiring":[0]}',
        "{" + base + ',"lastMessageId":1,"acquiring":' + str(list(range(1, MAX_RECORDED_REQUESTS + 2))) + "}",
    ):
        assert ListenerCursor.from_annotation(bad) is None, bad


def test_only_the_session_the_recorded_state_still_names_is_resumable() -> None:
    record = ListenerState.from_annotation(
        ListenerState(
            scale_set_id=SCALE_SET_ID,
            session_id=KILLED_POD_SESSION,
            state=ListenerPhase.POLLING,
            since=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        ).to_annotation()
    )
    mine = ListenerCursor.from_annotation(predecessor_cursor(3))
    assert resumable(mine, record, scale_set_id=SCALE_SET_ID)
    assert not resumable(mine, record, scale_set_id=SCALE_SET_ID + 1)  # the set was registered again
    assert not resumable(None, record, scale_set_id=SCALE_SET_ID)
    assert not resumable(mine, None, scale_set_id=SCALE_SET_ID)
    other = ListenerCursor.from_annotation(predecessor_cursor(3, session_id="0da00000-0000-4000-8000-000000000002"))
    assert not resumable(other, record, scale_set_id=SCALE_SET_ID)  # an older session than the state names


async def test_each_decision_records_the_session_the_message_and_the_unconfirmed_acquisitions() -> None:
    h = Harness()
    h.actions.acquire_forever = error(SessionNotFound, 404)  # never confirmed: stays in the record
    h.actions.poll_script.append(message(5, JobAvailable(runner_request_id=11), assigned=0, available=1))
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 2)
    recorded = cursor(h)
    assert recorded is not None
    assert (recorded.session_id, recorded.last_message_id) == (h.sessions.current().session_id, 5)
    assert recorded.acquiring == (11,)
    await h.stop_and_wait()


async def test_a_message_is_acknowledged_only_after_its_decision_is_recorded() -> None:
    h = Harness()
    h.actions.poll_script.append(message(5, assigned=2))
    h.start()
    await h.settle(lambda: bool(h.calls("ack")))
    order = [entry[0] for entry in h.log if entry[0] == "ack" or (entry[0] == "ers" and "spec" in entry[3])]
    assert order == ["ers", "ers", "ack"]  # the start-up decision, the message's, then its acknowledgement
    await h.stop_and_wait()


# ---- the successor -----------------------------------------------------------------------------------------------


async def test_a_successor_resumes_the_recorded_session_from_the_last_message_acted_on() -> None:
    h = Harness(min_runners=1)
    h.patcher.record_state(predecessor_record(KILLED_POD_SESSION))
    h.patcher.ers_annotations[ANNOTATION_LISTENER_CURSOR] = predecessor_cursor(41, 11, 12)
    h.actions.session_stats = stats(2)
    run = asyncio.create_task(h.app().run())
    await h.settle(lambda: bool(h.calls("poll")))
    assert h.calls("refresh_session") == [("refresh_session", KILLED_POD_SESSION)]
    assert h.calls("create_session") == []
    assert h.actions.deleted_sessions == []
    assert h.calls("poll")[0] == ("poll", KILLED_POD_SESSION, 41, MAX_RUNNERS)  # nothing acted on comes again
    await h.settle(lambda: bool(h.calls("acquire")))
    assert h.calls("acquire") == [("acquire", [11, 12])]  # the predecessor's unconfirmed acquisitions
    assert h.patcher.ers_patches()[0] == {"patchID": 0, "replicas": 3}  # the statistics of the session now
    h.stop.set()
    assert await run == 0


async def test_a_session_that_cannot_be_resumed_is_taken_over_as_before() -> None:
    h = Harness()
    h.patcher.record_state(predecessor_record(KILLED_POD_SESSION))
    h.patcher.ers_annotations[ANNOTATION_LISTENER_CURSOR] = predecessor_cursor(41)
    h.actions.refresh_script.append(error(SessionNotFound, 404))
    h.actions.create_script.append(error(SessionConflict, 409))
    run = asyncio.create_task(h.app().run())
    await h.settle(lambda: bool(h.calls("poll")))
    assert [entry[0] for entry in h.log if entry[0].endswith("_session")] == [
        "refresh_session",
        "create_session",
        "delete_session",
        "create_session",
    ]
    assert h.calls("poll")[0][2] == 0  # a new session numbers its messages afresh
    h.stop.set()
    assert await run == 0


async def test_a_cursor_without_a_recorded_session_is_not_resumed() -> None:
    h = Harness()
    record = predecessor_record(KILLED_POD_SESSION)
    record["sessionId"] = None  # the predecessor deleted its session at shutdown
    h.patcher.record_state(record)
    h.patcher.ers_annotations[ANNOTATION_LISTENER_CURSOR] = predecessor_cursor(41)
    run = asyncio.create_task(h.app().run())
    await h.settle(lambda: bool(h.calls("poll")))
    assert h.calls("refresh_session") == []
    assert len(h.calls("create_session")) == 1
    h.stop.set()
    assert await run == 0
