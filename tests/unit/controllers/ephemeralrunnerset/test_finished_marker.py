"""The finished-runner marker in memory (controllers/ephemeralrunnerset/finished_marker.py): written at once before
the set's own deletions, else riding the set's next status write."""

from __future__ import annotations

from arc_scaleset.controllers.ephemeralrunnerset.finished_marker import MARKER_FIELD, FinishedMarker


def test_a_marker_before_the_sets_own_deletions_is_written_at_once_and_nothing_is_left_pending() -> None:
    marker = FinishedMarker(stored=2)
    assert marker.record(3, set_deletes=True)
    marker.stored_as(3)
    assert (marker.stored, marker.pending, marker.known) == (3, None, 3)
    assert marker.changes({MARKER_FIELD: 2}) == {}


def test_a_marker_left_to_the_runners_own_deletion_waits_for_the_status_write_and_decisions_see_it_at_once() -> None:
    marker = FinishedMarker(stored=2)
    assert not marker.record(3, set_deletes=False)
    assert marker.known == 3, "a scale-up under patch 3 must be held back before the write"
    changes = marker.changes({MARKER_FIELD: 2, "currentReplicas": 1})
    assert changes == {MARKER_FIELD: 3}
    marker.written({"currentReplicas": 0, **changes})
    assert (marker.stored, marker.pending) == (3, None)
    assert marker.changes({MARKER_FIELD: 3}) == {}


def test_a_marker_already_known_is_neither_pending_nor_written() -> None:
    marker = FinishedMarker(stored=3)
    assert not marker.record(3, set_deletes=False)
    assert marker.pending is None
    assert marker.changes({}) == {}


def test_a_new_process_compares_the_pending_marker_with_the_status_the_cache_shows() -> None:
    marker = FinishedMarker()
    assert not marker.record(4, set_deletes=False)
    assert marker.changes({MARKER_FIELD: 4}) == {}
    assert (marker.stored, marker.pending) == (4, None)

    fresh = FinishedMarker()
    fresh.record(4, set_deletes=False)
    assert fresh.changes({}) == {MARKER_FIELD: 4}
    assert fresh.changes({MARKER_FIELD: 0}) == {MARKER_FIELD: 4}


def test_a_pending_marker_stays_until_a_write_carries_it() -> None:
    marker = FinishedMarker(stored=0)
    marker.record(5, set_deletes=False)
    marker.written({"currentReplicas": 0})  # a write without it (it was held back, or failed before)
    assert marker.pending == 5
    assert marker.changes({MARKER_FIELD: 0}) == {MARKER_FIELD: 5}


def test_the_revisions_reset_supersedes_a_pending_marker() -> None:
    marker = FinishedMarker(stored=2)
    marker.record(3, set_deletes=False)
    marker.stored_as(0)
    assert (marker.stored, marker.pending, marker.known) == (0, None, 0)
    assert marker.changes({MARKER_FIELD: 0}) == {}


def test_a_writes_answer_tells_a_process_that_did_not_know_the_marker() -> None:
    marker = FinishedMarker()
    marker.answered({"metadata": {"name": "set"}, "status": {MARKER_FIELD: 6}})
    assert marker.known == 6, "no read of the set is needed to judge a scale-up under patch 6"

    new_set = FinishedMarker()
    new_set.answered({"metadata": {"name": "set"}})
    assert new_set.known == 0


def test_a_writes_answer_never_overrides_what_this_process_knows_or_recorded() -> None:
    marker = FinishedMarker(stored=3)
    marker.answered({"status": {MARKER_FIELD: 1}})  # what this process knows moves by its own writes and reads
    assert marker.stored == 3

    pending = FinishedMarker()
    pending.record(7, set_deletes=False)
    pending.answered({"status": {MARKER_FIELD: 5}})
    assert (pending.stored, pending.known) == (5, 7)
    assert pending.changes({MARKER_FIELD: 5}) == {MARKER_FIELD: 7}
    pending.answered({"status": {MARKER_FIELD: 7}})
    assert pending.changes({MARKER_FIELD: 5}) == {MARKER_FIELD: 7}
