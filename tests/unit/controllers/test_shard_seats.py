"""A seat in a shared-listener shard is held from a set's choice until the cache shows its listener, its set
chooses again, or it expires (controllers/shard_seats.py)."""

from __future__ import annotations

from arc_scaleset.controllers.shard_seats import SEAT_TTL_SECONDS, ShardSeats


def test_a_seat_counts_in_its_group_until_the_cache_shows_its_listener() -> None:
    seats = ShardSeats()
    seats.take("listener-a", "group-0", now=0.0)
    assert seats.holders("group-0", cached=set(), now=1.0) == {"listener-a"}
    assert seats.holders("group-1", cached=set(), now=1.0) == frozenset()
    assert seats.holders("group-0", cached={"listener-a"}, now=2.0) == frozenset()
    assert len(seats) == 0, "shown by the cache: it counts there as a member, the seat is given back"


def test_a_set_that_chooses_again_holds_one_seat_only() -> None:
    seats = ShardSeats()
    seats.take("listener-a", "group-0", now=0.0)
    seats.take("listener-a", "group-1", now=1.0)
    assert seats.holders("group-0", cached=set(), now=2.0) == frozenset()
    assert seats.holders("group-1", cached=set(), now=2.0) == {"listener-a"}


def test_a_seat_whose_listener_never_appears_is_given_back_after_its_time() -> None:
    seats = ShardSeats()
    seats.take("listener-a", "group-0", now=0.0)
    seats.take("listener-b", "group-1", now=30.0)
    assert seats.holders("group-0", cached=set(), now=SEAT_TTL_SECONDS - 0.1) == {"listener-a"}
    assert seats.holders("group-0", cached=set(), now=SEAT_TTL_SECONDS) == frozenset()
    assert len(seats) == 1, "every expired seat is forgotten, whichever group was asked about"
