"""How many runners a schedule asks for now: the pure evaluator of ``warmCapacity.schedule`` and
``minRunnersSchedule`` (docs/capacity.md, "Schedules").

The window rules (days, a window across midnight, time zones, DST) are :mod:`arc_scaleset.api.windows`'s; the
listener evaluates ``minRunnersSchedule`` with the same function over its ``config.json``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from arc_scaleset.api.schedule import WarmWindow
from arc_scaleset.api.windows import runners_at

__all__ = ["scheduled_runners"]


def scheduled_runners(windows: Sequence[WarmWindow], now: dt.datetime) -> int:
    """The largest ``runners`` of the windows open at ``now`` (an aware datetime); 0 when none is open.

    Overlapping windows do not add up: the largest wins, so a "weekdays 8-18: 10" window and a "Mondays 8-10:
    20" window ask for 20 on Monday morning and 10 for the rest of the working day.
    """
    return runners_at([window.window() for window in windows], now)
