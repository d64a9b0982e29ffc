"""Schedule windows (arc_scaleset/api/windows.py, docs/capacity.md "Schedules"): days, time zones, a window across
midnight, both DST transitions, and bad input refused with a message that names the field."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.api import windows
from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSetSpec
from arc_scaleset.api.schedule import WarmWindow
from arc_scaleset.api.windows import Window, WindowError, next_change, parse_days
from arc_scaleset.controllers.warmcapacity.schedule import scheduled_runners

BERLIN = ZoneInfo("Europe/Berlin")
UTC = dt.UTC


def window(
    days: str = "*", start: str = "08:00", end: str = "18:00", zone: str = "UTC", runners: int = 5
) -> WarmWindow:
    return WarmWindow.model_validate({"days": days, "start": start, "end": end, "timeZone": zone, "runners": runners})


def berlin(year: int, month: int, day: int, hour: int, minute: int = 0, fold: int = 0) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, tzinfo=BERLIN, fold=fold)


# --- days ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "days"),
    [
        ("*", {0, 1, 2, 3, 4, 5, 6}),
        ("Mon-Fri", {1, 2, 3, 4, 5}),
        ("mon,WED,fri", {1, 3, 5}),
        ("Fri-Mon", {5, 6, 0, 1}),
        ("0", {0}),
        ("7", {0}),
        ("1-5", {1, 2, 3, 4, 5}),
        ("Sat-Sun", {6, 0}),
        ("5-7", {5, 6, 0}),
        ("Mon, Thu-Fri", {1, 4, 5}),
    ],
)
def test_days_read_as_crons_day_of_week_field(spec: str, days: set[int]) -> None:
    assert parse_days(spec) == days


@pytest.mark.parametrize("spec", ["", "Mon-", "-Fri", "8", "Mon-Fro", "weekdays", "Mon,,Fri", "*/2"])
def test_a_bad_day_spec_is_refused_naming_what_is_allowed(spec: str) -> None:
    with pytest.raises(ValueError, match="cron day-of-week field"):
        parse_days(spec)


@given(st.lists(st.integers(0, 6), min_size=1))
def test_day_names_and_numbers_name_the_same_days(numbers: list[int]) -> None:
    names = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")
    assert parse_days(",".join(names[n] for n in numbers)) == parse_days(",".join(map(str, numbers))) == set(numbers)


# --- windows --------------------------------------------------------------------------------------------------


def test_a_working_hours_window_is_open_on_its_days_from_start_up_to_end() -> None:
    hours = [window("Mon-Fri", "08:00", "18:00", "Europe/Berlin", 10)]
    # 2026-01-07 is a Wednesday, 2026-01-10 a Saturday.
    assert scheduled_runners(hours, berlin(2026, 1, 7, 8)) == 10
    assert scheduled_runners(hours, berlin(2026, 1, 7, 17, 59)) == 10
    assert scheduled_runners(hours, berlin(2026, 1, 7, 7, 59)) == 0
    assert scheduled_runners(hours, berlin(2026, 1, 7, 18)) == 0
    assert scheduled_runners(hours, berlin(2026, 1, 10, 10)) == 0


def test_the_time_zone_places_the_window_whatever_zone_now_is_given_in() -> None:
    hours = [window("*", "09:00", "10:00", "America/New_York", 2)]
    assert scheduled_runners(hours, dt.datetime(2026, 1, 7, 14, 30, tzinfo=UTC)) == 2  # 09:30 EST
    assert scheduled_runners(hours, dt.datetime(2026, 1, 7, 9, 30, tzinfo=UTC)) == 0  # 04:30 EST
    assert scheduled_runners(hours, dt.datetime(2026, 1, 7, 23, 30, tzinfo=ZoneInfo("Asia/Tokyo"))) == 2


def test_a_window_across_midnight_belongs_to_the_day_it_starts_on() -> None:
    night = [window("Fri", "22:00", "06:00", "Europe/Berlin", 4)]
    # 2026-01-09 is a Friday.
    assert scheduled_runners(night, berlin(2026, 1, 9, 22)) == 4
    assert scheduled_runners(night, berlin(2026, 1, 10, 5, 59)) == 4  # Saturday morning, though days is Fri
    assert scheduled_runners(night, berlin(2026, 1, 10, 6)) == 0
    assert scheduled_runners(night, berlin(2026, 1, 9, 5)) == 0  # Friday morning: Thursday's window, none
    assert scheduled_runners(night, berlin(2026, 1, 10, 23)) == 0


def test_end_equal_to_start_is_a_whole_day() -> None:
    day = [window("Mon", "09:00", "09:00", "UTC", 1)]
    monday = dt.datetime(2026, 1, 5, 9, tzinfo=UTC)
    assert scheduled_runners(day, monday) == 1
    assert scheduled_runners(day, monday + dt.timedelta(hours=23, minutes=59)) == 1
    assert scheduled_runners(day, monday + dt.timedelta(hours=24)) == 0


def test_overlapping_windows_take_the_largest_not_the_sum() -> None:
    windows = [window("Mon-Fri", "08:00", "18:00", "UTC", 10), window("Mon", "08:00", "10:00", "UTC", 20)]
    assert scheduled_runners(windows, dt.datetime(2026, 1, 5, 9, tzinfo=UTC)) == 20
    assert scheduled_runners(windows, dt.datetime(2026, 1, 5, 11, tzinfo=UTC)) == 10
    assert scheduled_runners([], dt.datetime(2026, 1, 5, 11, tzinfo=UTC)) == 0


def test_a_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        scheduled_runners([window()], dt.datetime(2026, 1, 5, 11))


# --- DST ------------------------------------------------------------------------------------------------------


def open_minutes(w: WarmWindow, day_utc: dt.datetime) -> list[dt.datetime]:
    """The instants (every minute of 48 hours from ``day_utc``) the window is open at, in UTC."""
    minutes = (day_utc + dt.timedelta(minutes=m) for m in range(48 * 60))
    return [t for t in minutes if scheduled_runners([w], t)]


def test_spring_forward_a_start_the_clock_skips_opens_when_the_clock_jumps_past_it() -> None:
    # 2026-03-29, a Sunday: in Berlin the clock goes from 02:00 CET straight to 03:00 CEST (01:00 UTC).
    skipped_start = window("Sun", "02:30", "04:00", "Europe/Berlin", 1)
    opened = open_minutes(skipped_start, dt.datetime(2026, 3, 28, 12, tzinfo=UTC))
    assert opened[0] == dt.datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # 03:00 CEST
    assert opened[-1] == dt.datetime(2026, 3, 29, 1, 59, tzinfo=UTC)  # up to 04:00 CEST: one hour, not 1.5
    inside_the_gap = window("Sun", "02:00", "02:30", "Europe/Berlin", 1)
    assert open_minutes(inside_the_gap, dt.datetime(2026, 3, 28, 12, tzinfo=UTC)) == []


def test_fall_back_the_repeated_hour_is_inside_a_window_both_times() -> None:
    # 2026-10-25, a Sunday: in Berlin 02:00-03:00 comes twice, CEST (fold 0) then CET (fold 1).
    across = window("Sun", "01:00", "03:00", "Europe/Berlin", 1)
    assert len(open_minutes(across, dt.datetime(2026, 10, 24, 12, tzinfo=UTC))) == 3 * 60
    repeated = window("Sun", "02:00", "02:30", "Europe/Berlin", 1)
    assert scheduled_runners([repeated], berlin(2026, 10, 25, 2, 10, fold=0)) == 1
    assert scheduled_runners([repeated], berlin(2026, 10, 25, 2, 10, fold=1)) == 1
    assert scheduled_runners([repeated], berlin(2026, 10, 25, 2, 40, fold=0)) == 0
    assert len(open_minutes(repeated, dt.datetime(2026, 10, 24, 12, tzinfo=UTC))) == 60


# --- the next change ------------------------------------------------------------------------------------------


def test_the_next_change_is_the_next_start_or_end() -> None:
    hours = [Window(days="Mon-Fri", start="08:00", end="18:00", time_zone="Europe/Berlin", runners=1)]
    friday_evening = berlin(2026, 1, 9, 19)
    assert next_change(hours, friday_evening) == berlin(2026, 1, 12, 8).astimezone(UTC)  # Monday 08:00
    assert next_change(hours, berlin(2026, 1, 12, 8)) == berlin(2026, 1, 12, 18).astimezone(UTC)
    assert next_change([], friday_evening) is None


ZONES = st.sampled_from(["UTC", "Asia/Tokyo", "Asia/Kolkata", "Etc/GMT+5"])  # no DST: no gap, no fold
CLOCKS = st.builds(lambda h, m: f"{h:02d}:{m:02d}", st.integers(0, 23), st.integers(0, 59))
DAY_SPECS = st.sampled_from(["*", "Mon-Fri", "Sat,Sun", "Fri-Mon", "3", "Tue,Thu"])
INSTANTS = st.datetimes(
    min_value=dt.datetime(2025, 1, 1), max_value=dt.datetime(2027, 1, 1), timezones=st.just(UTC)
).map(lambda t: t.replace(second=0, microsecond=0))


@given(DAY_SPECS, CLOCKS, CLOCKS, ZONES, INSTANTS, st.integers(1, 10_000))
def test_nothing_changes_before_the_next_change(
    days: str, start: str, end: str, zone: str, now: dt.datetime, probe: int
) -> None:
    windows = [Window(days=days, start=start, end=end, time_zone=zone, runners=3)]
    edge = next_change(windows, now)
    assert edge is not None
    assert edge > now
    # Any instant from now up to (not including) the edge finds the window as now does.
    between = now + (edge - now) * (probe / 10_001)
    assert windows[0].contains(between) == windows[0].contains(now), between


@given(CLOCKS, CLOCKS, INSTANTS)
def test_an_every_day_window_is_open_for_its_length_after_start(start: str, end: str, now: dt.datetime) -> None:
    w = Window(days="*", start=start, end=end, time_zone="UTC", runners=1)
    minute = now.hour * 60 + now.minute
    begins = int(start[:2]) * 60 + int(start[3:])
    assert w.contains(now) == ((minute - begins) % 1440 < w.length)


# --- bad input ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("days", "Mon-Fro", "cron day-of-week field"),
        ("start", "8:00", "HH:MM"),
        ("end", "24:00", "HH:MM"),
        ("timeZone", "Mars/Olympus", "IANA time zone"),
        ("timeZone", "../etc/passwd", "IANA time zone"),
        ("runners", -1, "greater than or equal to 0"),
    ],
)
def test_a_bad_window_is_refused_naming_the_field(field: str, value: object, message: str) -> None:
    document: dict[str, object] = {"days": "*", "start": "08:00", "end": "18:00", "timeZone": "UTC", "runners": 1}
    document[field] = value
    with pytest.raises(pydantic.ValidationError) as caught:
        WarmWindow.model_validate(document)
    (error,) = caught.value.errors()
    assert error["loc"] == (field,)
    assert message in error["msg"]


def test_a_bad_window_in_min_runners_schedule_names_its_place() -> None:
    spec = {
        "githubConfigUrl": "https://github.com/octo",
        "githubConfigSecret": "s",
        "template": {"spec": {"containers": [{"name": "runner", "image": "r"}]}},
        "minRunnersSchedule": [
            {"start": "08:00", "end": "18:00", "runners": 1},
            {"start": "x", "end": "1", "runners": 1},
        ],
    }
    with pytest.raises(pydantic.ValidationError) as caught:
        AutoscalingRunnerSetSpec.model_validate(spec)
    assert {error["loc"] for error in caught.value.errors()} == {
        ("minRunnersSchedule", 1, "start"),
        ("minRunnersSchedule", 1, "end"),
    }


def test_a_window_without_days_or_zone_is_every_day_in_utc() -> None:
    w = WarmWindow.model_validate({"start": "08:00", "end": "09:00", "runners": 2})
    assert scheduled_runners([w], dt.datetime(2026, 1, 10, 8, 30, tzinfo=UTC)) == 2


def test_the_listeners_window_names_the_first_bad_field() -> None:
    with pytest.raises(WindowError) as caught:
        Window(days="*", start="08:00", end="18:00", time_zone="Nowhere/City", runners=1)
    assert caught.value.field == "time_zone"
    assert str(caught.value).startswith("time_zone must be an IANA time zone name")


def test_utc_is_known_without_a_time_zone_database(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_database(name: str) -> ZoneInfo:
        raise ZoneInfoNotFoundError(name)

    monkeypatch.setattr(zoneinfo, "ZoneInfo", no_database)  # parse_zone imports it on first use
    assert scheduled_runners([window(zone="UTC")], dt.datetime(2026, 1, 7, 9, tzinfo=UTC)) == 5
    with pytest.raises(ValueError, match="IANA time zone"):
        windows.parse_zone("Europe/Berlin")
