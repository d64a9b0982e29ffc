"""The warm pool's pure plan: how many placeholders a pool keeps (the largest member's ask, bounded), and which to
create and delete (deterministic names, shrinking from the top, nothing counted or recreated while it goes)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.controllers.warmcapacity.plan import (
    REASON_CAPPED,
    REASON_FORECAST,
    REASON_IDLE,
    REASON_RUNNERS,
    REASON_SCHEDULE,
    MemberWant,
    Placeholder,
    member_want,
    placeholder_index,
    placeholder_name,
    plan_pool,
    pool_size,
    preempted,
)

POOL = "0123456789abcdef"


def _ready(index: int) -> Placeholder:
    return Placeholder(placeholder_name(POOL, index), bound=True, terminating=False)


def test_a_member_asks_for_the_largest_of_runners_schedule_and_forecast_within_its_bound() -> None:
    assert member_want("a/x", runners=2, scheduled=5, forecast=3, bound=10) == MemberWant("a/x", 5, REASON_SCHEDULE, 10)
    assert member_want("a/x", runners=2, scheduled=0, forecast=0, bound=10).reason == REASON_RUNNERS
    assert member_want("a/x", runners=2, scheduled=4, forecast=4, bound=10).reason == REASON_FORECAST
    assert member_want("a/x", runners=2, scheduled=50, forecast=0, bound=8).wanted == 8


def test_a_member_that_asks_for_nothing_is_idle() -> None:
    assert member_want("a/x", runners=0, scheduled=0, forecast=0, bound=10) == MemberWant("a/x", 0, REASON_IDLE, 10)


def test_the_pool_keeps_the_largest_ask_of_its_members_not_their_sum() -> None:
    wants = [member_want(f"team-{i}/runners", runners=2, scheduled=0, forecast=0, bound=10) for i in range(10)] + [
        member_want("team-x/big", runners=0, scheduled=4, forecast=0, bound=10)
    ]
    size = pool_size(wants, cap=100)
    assert (size.size, size.reason, size.decided_by, size.capped) == (4, REASON_SCHEDULE, "team-x/big", False)


def test_a_tie_is_decided_by_the_first_member_by_name() -> None:
    wants = [member_want(name, runners=3, scheduled=0, forecast=0, bound=5) for name in ("b/y", "a/x", "c/z")]
    assert pool_size(wants, cap=10).decided_by == "a/x"


def test_the_controllers_cap_bounds_the_pool_and_says_so() -> None:
    size = pool_size([member_want("a/x", runners=30, scheduled=0, forecast=0, bound=50)], cap=20)
    assert (size.size, size.reason, size.capped) == (20, REASON_CAPPED, True)


def test_a_pool_without_members_or_asks_shrinks_to_zero() -> None:
    assert pool_size([], cap=10).size == 0
    assert pool_size([member_want("a/x", runners=0, scheduled=0, forecast=0, bound=5)], cap=10).reason == REASON_IDLE


def test_an_empty_pool_creates_every_index_below_its_size() -> None:
    plan = plan_pool(POOL, 3, [])
    assert plan.create == tuple(placeholder_name(POOL, i) for i in range(3))
    assert plan.delete == ()


def test_only_missing_indexes_are_created_and_the_pool_counts_ready_and_waiting() -> None:
    waiting = Placeholder(placeholder_name(POOL, 2), bound=False, terminating=False)
    plan = plan_pool(POOL, 4, [_ready(0), waiting])
    assert plan.create == (placeholder_name(POOL, 1), placeholder_name(POOL, 3))
    assert (plan.ready, plan.waiting, plan.terminating) == (1, 1, 0)


def test_the_pool_shrinks_from_the_top() -> None:
    plan = plan_pool(POOL, 1, [_ready(0), _ready(1), _ready(2)])
    assert plan.create == ()
    assert plan.delete == (placeholder_name(POOL, 1), placeholder_name(POOL, 2))
    assert plan.ready == 1


def test_a_preempted_placeholder_is_not_room_and_not_recreated_until_it_is_gone() -> None:
    going = Placeholder(placeholder_name(POOL, 0), bound=True, terminating=True)
    plan = plan_pool(POOL, 2, [going, _ready(1)])
    assert plan.create == ()  # its name is still taken: the pass its deletion triggers creates it again
    assert plan.delete == ()
    assert (plan.ready, plan.terminating) == (1, 1)
    assert plan_pool(POOL, 2, [_ready(1)]).create == (placeholder_name(POOL, 0),)


def test_a_pod_with_the_pool_label_under_a_foreign_name_is_deleted_never_counted() -> None:
    stray = Placeholder("warm-ffffffffffffffff-0", bound=True, terminating=False)
    odd = Placeholder(f"warm-{POOL}-01", bound=True, terminating=False)
    plan = plan_pool(POOL, 1, [stray, odd])
    assert plan.create == (placeholder_name(POOL, 0),)
    assert set(plan.delete) == {stray.name, odd.name}
    assert plan.ready == 0


def test_placeholder_names_round_trip() -> None:
    assert placeholder_index(POOL, placeholder_name(POOL, 12)) == 12
    assert placeholder_index(POOL, f"warm-{POOL}-x") is None
    assert placeholder_index("fedcba9876543210", placeholder_name(POOL, 0)) is None


@given(size=st.integers(0, 30), present=st.sets(st.integers(0, 40)), going=st.sets(st.integers(0, 40)))
def test_after_the_plan_the_pool_holds_exactly_its_size(size: int, present: set[int], going: set[int]) -> None:
    placeholders = [
        Placeholder(placeholder_name(POOL, i), bound=True, terminating=i in going) for i in sorted(present | going)
    ]
    plan = plan_pool(POOL, size, placeholders)
    remaining = {
        i for i in present | going if placeholder_name(POOL, i) not in plan.delete and (i < size or i in going)
    }
    created = {placeholder_index(POOL, name) for name in plan.create}
    assert not created & remaining
    assert {i for i in range(size)} <= remaining | created | going
    assert all(placeholder_index(POOL, name) not in going for name in plan.delete)


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}, True),
        ({"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}, False),
        ({"type": "PodScheduled", "status": "True"}, False),
    ],
)
def test_a_preemption_is_read_from_the_schedulers_disruption_condition(
    condition: dict[str, Any], expected: bool
) -> None:
    assert preempted({"status": {"conditions": [condition]}}) is expected
