"""When an EphemeralRunner's status write waits in memory instead of in the client's rate limit (the pure
decision), and when a pass with held changes comes back."""

from __future__ import annotations

from typing import Any, cast

import pytest

from arc_scaleset.api.views import EphemeralRunnerView
from arc_scaleset.clock import FakeClock
from arc_scaleset.controllers.ephemeralrunner.memory import RunnerMemory
from arc_scaleset.controllers.ephemeralrunner.scope import RunnerPass
from arc_scaleset.controllers.ephemeralrunner.status_hold import MAX_HOLD, RECHECK_DUE, status_hold
from arc_scaleset.kube.controller import Request, Result


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


async def test_a_pass_comes_back_when_held_changes_come_due_and_shortly_for_those_due_already() -> None:
    clock = FakeClock()
    slot = RunnerMemory(clock=clock)
    # requeue_for_deferred reads the slot only: the context and the GitHub clients are never touched.
    scope = RunnerPass(Request("ns", "r"), EphemeralRunnerView({"metadata": {"name": "r"}}), None, slot,
                       ctx=cast(Any, None), clients=cast(Any, None))  # fmt: skip
    assert scope.requeue_for_deferred(Result()) == Result()  # nothing held
    slot.hold_status({"phase": "Running"}, for_seconds=2.0)
    assert scope.requeue_for_deferred(Result()) == Result(requeue_after=2.0)
    assert scope.requeue_for_deferred(Result(requeue_after=1.0)) == Result(requeue_after=1.0)  # sooner anyway
    slot.hold_status({"phase": "Running"}, for_seconds=0.001)
    await clock.advance(0.01)  # the rest of the pass took longer than the hold
    assert scope.requeue_for_deferred(Result()) == Result(requeue_after=RECHECK_DUE)  # not forgotten
