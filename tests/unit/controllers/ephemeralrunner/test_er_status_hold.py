"""When an EphemeralRunner's status write waits in memory instead of in the client's rate limit (pure)."""

from __future__ import annotations

import pytest

from arc_scaleset.controllers.ephemeralrunner.status_hold import MAX_HOLD, status_hold


def test_a_write_with_a_token_to_spare_goes_at_once() -> None:
    assert status_hold(rate_limit_delay=0.0, held_for=0.0, follow_ups=False, done=False) == 0.0


def test_a_write_that_would_wait_is_held_until_the_token_would_be_there() -> None:
    assert status_hold(rate_limit_delay=2.5, held_for=0.0, follow_ups=False, done=False) == 2.5


@pytest.mark.parametrize(("follow_ups", "done"), [(True, False), (False, True), (True, True)])
def test_a_write_that_records_a_decision_or_a_done_phase_is_never_held(follow_ups: bool, done: bool) -> None:
    assert status_hold(rate_limit_delay=2.5, held_for=0.0, follow_ups=follow_ups, done=done) == 0.0


def test_changes_are_held_for_at_most_max_hold_in_all() -> None:
    assert status_hold(rate_limit_delay=40.0, held_for=0.0, follow_ups=False, done=False) == MAX_HOLD
    assert status_hold(rate_limit_delay=2.5, held_for=MAX_HOLD - 1.0, follow_ups=False, done=False) == 1.0
    assert status_hold(rate_limit_delay=2.5, held_for=MAX_HOLD, follow_ups=False, done=False) == 0.0
    assert status_hold(rate_limit_delay=2.5, held_for=MAX_HOLD + 7.0, follow_ups=False, done=False) == 0.0
