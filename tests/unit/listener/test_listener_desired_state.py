"""The scaler's decisions (docs/listener.md): ARC's worked examples, one test each, plus the sequence's edges."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.listener.desired_state import MAX_INT32, DesiredState, ScaleDecision


def unbounded() -> DesiredState:
    return DesiredState(min_runners=0, max_runners=MAX_INT32)


def test_first_call_with_no_jobs_targets_zero_under_patch_zero() -> None:
    assert unbounded().decide(0) == ScaleDecision(target=0, patch_id=0)


def test_first_call_with_one_job_targets_one_under_patch_zero() -> None:
    assert unbounded().decide(1) == ScaleDecision(target=1, patch_id=0)


def test_a_dirty_drop_to_zero_after_one_job_gets_patch_one() -> None:
    state = unbounded()
    state.decide(1)
    state.mark_dirty()
    assert state.decide(0) == ScaleDecision(target=0, patch_id=1)


def test_the_same_count_twice_above_min_gets_a_fresh_patch_id() -> None:
    state = unbounded()
    assert state.decide(1) == ScaleDecision(target=1, patch_id=0)
    assert state.decide(1) == ScaleDecision(target=1, patch_id=1)


def test_min_one_three_jobs_targets_four_under_patch_zero() -> None:
    state = DesiredState(min_runners=1, max_runners=MAX_INT32)
    assert state.decide(3) == ScaleDecision(target=4, patch_id=0)


def test_min_one_dirty_drop_to_zero_jobs_targets_min_under_patch_one() -> None:
    state = DesiredState(min_runners=1, max_runners=MAX_INT32)
    state.decide(3)
    state.mark_dirty()
    assert state.decide(0) == ScaleDecision(target=1, patch_id=1)


def test_min_one_clean_repeat_at_min_forces_state_with_patch_zero() -> None:
    state = DesiredState(min_runners=1, max_runners=MAX_INT32)
    state.decide(3)
    state.mark_dirty()
    state.decide(0)
    assert state.decide(0) == ScaleDecision(target=1, patch_id=0)
    assert state.patch_seq == 2


def test_max_five_caps_six_jobs_at_five() -> None:
    state = DesiredState(min_runners=0, max_runners=5)
    assert state.decide(6).target == 5


def test_min_one_max_three_caps_four_jobs_at_three() -> None:
    state = DesiredState(min_runners=1, max_runners=3)
    assert state.decide(4).target == 3


def test_a_clean_repeat_at_min_after_a_change_forces_state_again() -> None:
    state = unbounded()
    state.decide(0)
    assert state.decide(0) == ScaleDecision(target=0, patch_id=0)
    assert state.decide(0) == ScaleDecision(target=0, patch_id=0)


def test_a_dirty_repeat_at_min_is_not_forced() -> None:
    state = unbounded()
    state.decide(0)
    state.mark_dirty()
    assert state.decide(0) == ScaleDecision(target=0, patch_id=1)


def test_reaching_min_from_above_without_jobs_events_is_not_forced_until_it_repeats() -> None:
    state = unbounded()
    state.decide(2)
    assert state.decide(0) == ScaleDecision(target=0, patch_id=1)
    assert state.decide(0) == ScaleDecision(target=0, patch_id=0)


def test_the_sequence_wraps_from_max_int32_past_zero() -> None:
    state = unbounded()
    state.patch_seq = MAX_INT32 - 1
    state.target = 5
    assert state.decide(7) == ScaleDecision(target=7, patch_id=MAX_INT32)
    assert state.decide(8) == ScaleDecision(target=8, patch_id=1)


def test_decide_clears_the_dirty_flag() -> None:
    state = unbounded()
    state.mark_dirty()
    state.decide(0)
    assert not state.dirty


@pytest.mark.parametrize(("minimum", "maximum"), [(-1, 3), (4, 3)])
def test_impossible_bounds_are_refused(minimum: int, maximum: int) -> None:
    with pytest.raises(ValueError, match="min_runners"):
        DesiredState(min_runners=minimum, max_runners=maximum)


@given(
    bounds=st.tuples(st.integers(0, 50), st.integers(0, 50)).map(sorted),
    counts=st.lists(st.tuples(st.integers(-5, 100), st.booleans()), min_size=1, max_size=30),
)
def test_target_is_always_min_plus_jobs_capped_never_below_min_and_nonzero_ids_never_repeat_in_a_row(
    bounds: list[int], counts: list[tuple[int, bool]]
) -> None:
    minimum, maximum = bounds
    state = DesiredState(min_runners=minimum, max_runners=maximum)
    previous_id = -1
    for index, (count, dirty) in enumerate(counts):
        if dirty:
            state.mark_dirty()
        decision = state.decide(count)
        # A negative count (a malformed answer: the service never sends one) counts as no jobs.
        assert decision.target == min(minimum + max(count, 0), maximum)
        assert minimum <= decision.target <= maximum
        if index == 0:
            assert decision.patch_id == 0
        elif decision.patch_id != 0:
            assert decision.patch_id == index
            assert decision.patch_id != previous_id
        previous_id = decision.patch_id
