"""The warm pool's words (docs/capacity.md, "What it says"): the pool's size and why, whose ask decided it and from
which input, and what capped this scale set's own ask."""

from __future__ import annotations

from arc_scaleset.api.warm_capacity import WarmCapacity
from arc_scaleset.controllers.warmcapacity.plan import PoolSize, member_want, pool_size
from arc_scaleset.controllers.warmcapacity.report import bound_source, resized_note, size_message


def test_the_message_names_the_pool_whose_ask_sized_it_and_what_capped_this_sets_ask() -> None:
    mine = member_want("team-a/linux", runners=2, scheduled=10, forecast=0, bound=4)
    other = member_want("team-b/linux", runners=1, scheduled=0, forecast=6, bound=8)
    size = pool_size([mine, other], cap=100)
    message = size_message("8a8c", "cpu=1, image runner", 2, size, mine, "warmCapacity.max")
    assert message == (
        "warm pool 8a8c (cpu=1, image runner, shared by 2 scale sets) keeps 6 placeholder(s): the largest ask of its"
        " members, team-b/linux's, from the forecast: jobs came at this time of day on earlier days; this scale set"
        " asks for 4: a warmCapacity.schedule window open now asks for 10, capped at 4 by warmCapacity.max"
    )


def test_a_pool_capped_by_the_controller_and_an_idle_pool_say_so() -> None:
    big = member_want("team-a/linux", runners=30, scheduled=0, forecast=0, bound=50)
    capped = size_message("p", "cpu=1", 1, pool_size([big], cap=20), big, "maxRunners")
    assert "keeps 20 placeholder(s): team-a/linux asks for more, and the controller's --warm-pool-max-placeholders" in (
        capped
    )
    assert capped.endswith("this scale set asks for 30, from warmCapacity.runners")
    idle = member_want("team-a/linux", runners=0, scheduled=0, forecast=0, bound=10)
    assert size_message("p", "cpu=1", 1, pool_size([idle], cap=20), idle, "maxRunners").endswith(
        "keeps 0 placeholder(s): no member asks for any now (warmCapacity.runners 0, no schedule window open, no "
        "forecast); this scale set asks for none now"
    )


def test_the_bound_is_named_as_the_spec_names_it() -> None:
    assert bound_source(WarmCapacity(max=3), 10) == "warmCapacity.max"
    assert bound_source(WarmCapacity(), 10) == "maxRunners"
    assert bound_source(WarmCapacity(), None).startswith("the default bound of 10")


def test_the_resize_note_says_from_what_to_what_and_why() -> None:
    note = resized_note("p", PoolSize(0, "Idle", None), PoolSize(3, "Runners", "team-a/linux"))
    assert note == (
        "warm pool p now keeps 3 placeholder(s), was 0: the largest ask of its members, team-a/linux's, from "
        "warmCapacity.runners"
    )
