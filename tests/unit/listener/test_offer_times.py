"""When the listener was first offered each job: the first time stays, taken once, bounded."""

from __future__ import annotations

import datetime as dt

from arc_scaleset.listener.offers import OfferTimes

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


def test_a_job_offered_again_keeps_its_first_time_and_is_taken_once() -> None:
    offers = OfferTimes()
    offers.offered([1, 2], T0)
    offers.offered([1], T0 + dt.timedelta(seconds=30))
    assert offers.take(1) == T0
    assert offers.take(1) is None
    assert len(offers) == 1


def test_the_oldest_offers_are_forgotten_beyond_the_capacity() -> None:
    offers = OfferTimes(capacity=2)
    offers.offered([1, 2, 3], T0)
    assert offers.take(1) is None
    assert offers.take(3) == T0
