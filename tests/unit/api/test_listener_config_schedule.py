"""min_runners_schedule in the listener's config.json: this project's own optional key, read and written beside
ARC's format without changing it, its problems named by path."""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson
import pytest

from arc_scaleset.api.listener_config import ListenerConfig, ListenerConfigError
from arc_scaleset.api.windows import Window
from tests.unit.api.listener_config_fixtures import ARC_WRITTEN_PAT_CONFIG

WORKING_HOURS = {"days": "Mon-Fri", "start": "08:00", "end": "18:00", "time_zone": "Europe/Berlin", "runners": 5}


def valid(**overrides: Any) -> dict[str, Any]:
    document: dict[str, Any] = orjson.loads(ARC_WRITTEN_PAT_CONFIG)
    document.update(overrides)
    return document


def problems_of(document: dict[str, Any]) -> list[str]:
    with pytest.raises(ListenerConfigError) as caught:
        ListenerConfig.from_document(document)
    return caught.value.problems


def test_a_schedule_is_read_and_written_back_after_arcs_keys() -> None:
    config = ListenerConfig.from_document(valid(min_runners_schedule=[WORKING_HOURS]))
    assert config.min_runners_schedule == (Window(**WORKING_HOURS),)
    document = orjson.loads(config.to_json())
    assert list(document)[-1] == "min_runners_schedule"
    assert document["min_runners_schedule"] == [WORKING_HOURS]
    assert ListenerConfig.from_json(config.to_json()) == config


def test_without_a_schedule_the_file_is_arcs_byte_for_byte() -> None:
    config = ListenerConfig.from_json(ARC_WRITTEN_PAT_CONFIG)
    assert config.min_runners_schedule == ()
    assert config.to_json().decode() == ARC_WRITTEN_PAT_CONFIG
    assert ListenerConfig.from_document(valid(min_runners_schedule=None)).min_runners_schedule == ()


def test_a_window_without_days_or_time_zone_is_every_day_in_utc() -> None:
    (window,) = ListenerConfig.from_document(
        valid(min_runners_schedule=[{"start": "08:00", "end": "09:00", "runners": 2}])
    ).min_runners_schedule
    assert (window.days, window.time_zone) == ("*", "UTC")
    assert window.contains(dt.datetime(2026, 1, 10, 8, 30, tzinfo=dt.UTC))


def test_every_bad_window_is_named_by_its_place_and_field() -> None:
    schedule = [
        WORKING_HOURS,
        {**WORKING_HOURS, "days": "Mon-Fro"},
        {**WORKING_HOURS, "time_zone": "Mars/Olympus"},
        {**WORKING_HOURS, "runners": "5"},
        {**WORKING_HOURS, "runners": -1},
        "08:00-18:00",
    ]
    problems = problems_of(valid(min_runners_schedule=schedule))
    assert problems == [
        "min_runners_schedule.1.days must be a cron day-of-week field: '*', 0-7 (0 and 7 are Sunday) or Sun..Sat,"
        " ranges like Mon-Fri (Fri-Mon wraps), lists like Mon,Wed,Fri, got 'Mon-Fro'",
        "min_runners_schedule.2.time_zone must be an IANA time zone name such as UTC or Europe/Berlin, got"
        " 'Mars/Olympus'",
        "min_runners_schedule.3.runners must be an integer, got a string",
        "min_runners_schedule.4.runners must be 0 or more, got -1",
        "min_runners_schedule.5 must be an object, got a string",
    ]


def test_a_window_without_start_is_refused() -> None:
    (problem,) = problems_of(valid(min_runners_schedule=[{"end": "18:00", "runners": 1}]))
    assert problem == "min_runners_schedule.0.start must be a time of day HH:MM, 00:00 to 23:59, got ''"


def test_a_schedule_that_is_not_a_list_is_refused() -> None:
    assert problems_of(valid(min_runners_schedule={"days": "*"})) == [
        "min_runners_schedule must be an array, got an object"
    ]
