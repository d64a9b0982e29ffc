"""When a standby listener replaces its admin token (listener/standby_token.py): ahead of the client's own margin,
so the token a takeover finds is used as it is."""

from __future__ import annotations

import datetime as dt

from arc_scaleset.github._auth import REFRESH_MARGIN
from arc_scaleset.listener.standby_token import MIN_INTERVAL, REFRESH_AHEAD, refresh_in

NOW = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)


def test_a_token_is_replaced_ahead_of_the_clients_own_refresh_margin() -> None:
    assert REFRESH_MARGIN.total_seconds() < REFRESH_AHEAD
    hour = NOW + dt.timedelta(hours=1)
    assert refresh_in(hour, NOW) == 3600 - REFRESH_AHEAD
    # Replaced before the client would find it due (within its margin).
    assert hour - dt.timedelta(seconds=refresh_in(hour, NOW)) - NOW < dt.timedelta(hours=1) - REFRESH_MARGIN


def test_a_due_or_missing_token_is_tried_again_no_sooner_than_the_minimum_interval() -> None:
    assert refresh_in(NOW + dt.timedelta(seconds=30), NOW) == MIN_INTERVAL
    assert refresh_in(NOW - dt.timedelta(seconds=30), NOW) == MIN_INTERVAL
    assert refresh_in(None, NOW) == MIN_INTERVAL
