"""The forecast (docs/capacity.md, "Forecast"): it grows before a burst that recurs at the same time of day and
shrinks after it; nothing without history; a one-off burst keeps no standing pool; the arrival history is bounded."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.controllers.warmcapacity.forecast import ArrivalHistory, forecast_runners

UTC = dt.UTC
TODAY = dt.datetime(2026, 1, 15, tzinfo=UTC)


def at(day: int, hour: int, minute: int = 0) -> dt.datetime:
    """``day`` days before TODAY (0: today) at the time given."""
    return TODAY - dt.timedelta(days=day) + dt.timedelta(hours=hour, minutes=minute)


def burst(day: int, hour: int, jobs: int) -> list[dt.datetime]:
    """``jobs`` arrivals over the two minutes from ``hour`` on ``day``."""
    return [at(day, hour) + dt.timedelta(seconds=120 * n / jobs) for n in range(jobs)]


# Every morning of the past week, 20 jobs at 09:00.
MORNINGS = [t for day in range(1, 8) for t in burst(day, 9, 20)]


def test_the_pool_grows_before_a_regular_burst_and_shrinks_after_it() -> None:
    sizes = {minute: forecast_runners(MORNINGS, at(0, 8, minute)) for minute in (40, 50, 51, 52, 59)}
    # The burst comes into the 10-minute horizon: its first minute at 08:51, all of it from 08:52.
    assert sizes == {40: 0, 50: 0, 51: 10, 52: 20, 59: 20}
    assert forecast_runners(MORNINGS, at(0, 9, 3)) == 0  # the burst's time of day has passed
    assert forecast_runners(MORNINGS, at(0, 14)) == 0


def test_no_history_forecasts_nothing() -> None:
    assert forecast_runners([], at(0, 8, 55)) == 0


def test_a_week_without_jobs_forecasts_nothing() -> None:
    old = [t for day in range(8, 15) for t in burst(day, 9, 20)]  # the week before last
    assert forecast_runners(old, at(0, 8, 55)) == 0


def test_a_one_off_burst_does_not_make_a_standing_pool() -> None:
    assert forecast_runners(burst(3, 9, 50), at(0, 8, 55)) == 0


def test_a_burst_of_changing_size_is_held_for_at_its_second_largest_day() -> None:
    arrivals = burst(1, 9, 10) + burst(2, 9, 30) + burst(4, 9, 20) + burst(6, 9, 5)
    assert forecast_runners(arrivals, at(0, 8, 55)) == 20


def test_arrivals_outside_the_history_or_in_the_future_are_ignored() -> None:
    arrivals = burst(1, 9, 10) + burst(2, 9, 10) + burst(-1, 9, 99)
    assert forecast_runners(arrivals, at(0, 8, 55), history=dt.timedelta(days=2)) == 10
    assert forecast_runners(arrivals, at(0, 8, 55), history=dt.timedelta(days=1)) == 0


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        forecast_runners([], dt.datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="horizon"):
        forecast_runners([], TODAY, horizon=dt.timedelta(0))


ARRIVALS = st.lists(
    st.datetimes(min_value=dt.datetime(2026, 1, 5), max_value=dt.datetime(2026, 1, 16), timezones=st.just(UTC)),
    max_size=200,
)


@given(ARRIVALS, st.timedeltas(min_value=dt.timedelta(0), max_value=dt.timedelta(days=1)))
def test_the_forecast_never_exceeds_half_the_weeks_jobs(arrivals: list[dt.datetime], offset: dt.timedelta) -> None:
    now = TODAY + offset
    week = [t for t in arrivals if now - dt.timedelta(days=7) <= t < now]
    # Two of the days' spans (disjoint) each hold at least the forecast.
    assert 0 <= 2 * forecast_runners(arrivals, now) <= len(week)


@given(ARRIVALS, st.timedeltas(min_value=dt.timedelta(days=-30), max_value=dt.timedelta(days=30)))
def test_the_forecast_depends_only_on_when_jobs_came_relative_to_now(
    arrivals: list[dt.datetime], shift: dt.timedelta
) -> None:
    now = TODAY + dt.timedelta(hours=9)
    assert forecast_runners(arrivals, now) == forecast_runners([t + shift for t in arrivals], now + shift)


# --- the arrival history --------------------------------------------------------------------------------------


def test_the_history_feeds_the_forecast_per_scale_set() -> None:
    history = ArrivalHistory()
    for t in sorted(MORNINGS):  # the feed is in time order
        history.record(("team-a", "linux"), t)
    history.record(("team-b", "linux"), at(1, 9))
    assert forecast_runners(history.arrivals(("team-a", "linux"), at(0, 8, 55)), at(0, 8, 55)) == 20
    assert forecast_runners(history.arrivals(("team-b", "linux"), at(0, 8, 55)), at(0, 8, 55)) == 0
    history.forget(("team-a", "linux"))
    assert history.arrivals(("team-a", "linux"), at(0, 8, 55)) == []


def test_the_history_is_bounded_by_its_length_in_minutes_whatever_the_job_volume() -> None:
    history = ArrivalHistory(history=dt.timedelta(days=1))
    start = at(10, 0)
    for minute in range(3 * 24 * 60):
        history.record("set", start + dt.timedelta(minutes=minute), count=50)
    assert len(history) <= 24 * 60 + 1
    arrivals = history.arrivals("set", start + dt.timedelta(days=3))
    assert min(arrivals) >= start + dt.timedelta(days=2)
    assert len(arrivals) == 50 * len(history)


def test_the_history_keeps_arrivals_to_the_minute() -> None:
    history = ArrivalHistory()
    history.record("set", at(1, 9, 0) + dt.timedelta(seconds=10))
    history.record("set", at(1, 9, 0) + dt.timedelta(seconds=50), count=2)
    assert history.arrivals("set", TODAY) == [at(1, 9, 0)] * 3
    assert len(history) == 1
