"""minRunnersSchedule in the listener (docs/listener.md, "The scaling rule"): the decision raises the minimum inside
a window, and the loop publishes at a window's edge without waiting for a message."""

from __future__ import annotations

import datetime as dt

import pytest

from arc_scaleset.api.windows import Window
from arc_scaleset.listener.desired_state import DesiredState, ScaleDecision
from tests.unit.listener.fakes import Harness

UTC = dt.UTC
# FakeClock starts at 2026-01-01 00:00 UTC, a Thursday.
TEN_TO_TWENTY = Window(days="*", start="00:10", end="00:20", time_zone="UTC", runners=3)


def at(hour: int, minute: int) -> dt.datetime:
    return dt.datetime(2026, 1, 1, hour, minute, tzinfo=UTC)


def test_inside_a_window_the_minimum_is_the_windows_runners_and_outside_it_min_runners() -> None:
    state = DesiredState(min_runners=1, max_runners=10, schedule=[TEN_TO_TWENTY])
    assert state.decide(0, now=at(0, 5)).target == 1
    assert state.decide(2, now=at(0, 15)).target == 5  # 3 from the window, plus the two assigned jobs
    assert state.decide(0, now=at(0, 25)).target == 1


def test_a_window_never_lowers_min_runners_and_never_exceeds_max_runners() -> None:
    assert DesiredState(min_runners=4, max_runners=10, schedule=[TEN_TO_TWENTY]).min_runners_at(at(0, 15)) == 4
    small = DesiredState(min_runners=0, max_runners=2, schedule=[TEN_TO_TWENTY])
    assert small.min_runners_at(at(0, 15)) == 2


def test_when_a_window_closes_the_target_drops_then_the_next_quiet_decision_forces_the_state() -> None:
    state = DesiredState(min_runners=1, max_runners=10, schedule=[TEN_TO_TWENTY])
    state.decide(0, now=at(0, 15))
    assert state.decide(0, now=at(0, 15)) == ScaleDecision(target=3, patch_id=0)  # at rest inside the window
    closing = state.decide(0, now=at(0, 20))
    assert closing.target == 1
    assert closing.patch_id != 0  # the ERS does not scale down for it...
    assert state.decide(0, now=at(0, 21)) == ScaleDecision(target=1, patch_id=0)  # ...but for this one


def test_a_decision_with_a_schedule_needs_the_time() -> None:
    with pytest.raises(ValueError, match="needs the time"):
        DesiredState(min_runners=0, max_runners=5, schedule=[TEN_TO_TWENTY]).decide(0)


async def test_a_window_opening_raises_the_runner_set_at_once_while_the_long_poll_brings_nothing() -> None:
    h = Harness(min_runners=1, schedule=[TEN_TO_TWENTY])
    h.start()
    await h.settle(lambda: bool(h.calls("poll")))
    assert h.patcher.ers_patches() == [{"patchID": 0, "replicas": 1}]

    await h.clock.advance(10 * 60 + 1.5)  # the poll never answers (a long poll with no message)
    await h.settle(lambda: len(h.patcher.ers_patches()) == 2)
    assert h.patcher.ers_patches()[-1] == {"patchID": 1, "replicas": 3}
    assert len(h.calls("poll")) == 2  # the cut-short poll, then a new one
    assert h.health.ready()[0]

    h.actions.poll_script.append(None)  # the poll after the window closes answers 202
    await h.clock.advance(10 * 60)
    await h.settle(lambda: len(h.patcher.ers_patches()) == 4)
    assert h.patcher.ers_patches()[2:] == [{"patchID": 2, "replicas": 1}, {"patchID": 0, "replicas": 1}]
    await h.stop_and_wait()


async def test_without_a_schedule_the_long_poll_is_never_cut_short() -> None:
    h = Harness(min_runners=1)
    h.start()
    await h.settle(lambda: bool(h.calls("poll")))
    await h.clock.advance(24 * 3600)
    await h.settle()
    assert len(h.calls("poll")) == 1
    assert h.patcher.ers_patches() == [{"patchID": 0, "replicas": 1}]
    await h.stop_and_wait()
