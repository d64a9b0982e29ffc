"""Stand-in for the forecast module of issue 27 (owned by its "schedule" part, merged separately).

Only the agreed signature, so the warm-pool controller can call it: this forecasts nothing. Replaced whole by
the real module.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta


def forecast_runners(
    arrivals: Sequence[datetime],
    now: datetime,
    *,
    horizon: timedelta = timedelta(minutes=10),
    history: timedelta = timedelta(days=7),
) -> int:
    """How many runners to hold warm now from past job arrivals; this stand-in forecasts none (0)."""
    del arrivals, now, horizon, history
    return 0
