"""``WarmWindow``: a recurring window of the week in which a scale set keeps some runners warm.

A minimal model (fields and their JSON names only): the parsing and validation of ``days``, ``start``, ``end``
and ``timeZone``, and the functions that read a list of windows, are the schedule module's
(``arc_scaleset.controllers.warmcapacity.schedule``).
"""

from __future__ import annotations

from pydantic import Field

from arc_scaleset.api.api_model import ApiModel
from arc_scaleset.api.constants import MAX_RUNNERS_UNBOUNDED


class WarmWindow(ApiModel):
    """Inside this window of the week, its runners are wanted (warm placeholders, or a minimum of runners)."""

    days: str
    """Days of the week, as cron's day-of-week field: names or 0-6 (0 is Sunday), ranges, lists, or "*"."""
    start: str
    """Start of the window, HH:MM in timeZone."""
    end: str
    """End of the window, HH:MM in timeZone; an end at or before the start means the window crosses midnight."""
    time_zone: str = "UTC"
    """IANA time zone name of start and end (e.g. Europe/Berlin)."""
    runners: int = Field(ge=0, le=MAX_RUNNERS_UNBOUNDED)
    """How many runners the window asks for."""
