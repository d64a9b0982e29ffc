"""``WarmWindow``: one window of a schedule, as ``minRunnersSchedule`` and ``warmCapacity.schedule`` hold it.

The rules (days, times, time zone, a window across midnight, DST) are :mod:`arc_scaleset.api.windows`'s, which
the listener reads its ``config.json`` with; this model checks each field with the same parsers, so a pydantic
error names the field (``minRunnersSchedule.0.days``) and says what is allowed, and :meth:`WarmWindow.window`
hands the evaluator (:func:`arc_scaleset.controllers.warmcapacity.schedule.scheduled_runners`) the checked form.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from arc_scaleset.api.api_model import ApiModel
from arc_scaleset.api.constants import MAX_RUNNERS_UNBOUNDED
from arc_scaleset.api.windows import Window, parse_clock, parse_days, parse_zone

__all__ = ["WarmWindow"]

# Checked by the API server too, so a typo in a time is refused at `kubectl apply`.
_CLOCK_PATTERN = r"^\s*([01][0-9]|2[0-3]):[0-5][0-9]\s*$"


class WarmWindow(ApiModel):
    """A weekly window of wall-clock time in which a number of runners is wanted (docs/capacity.md,
    "Schedules"): from ``start`` to ``end`` on each of ``days`` in ``timeZone``; ``end`` at or before ``start``
    runs past midnight into the next day."""

    days: str = "*"
    """Days the window starts on, as cron's day-of-week field: '*', 0-7 (0 and 7 are Sunday) or Sun..Sat,
    ranges like Mon-Fri (Fri-Mon wraps), lists like Mon,Wed,Fri."""
    start: str = Field(json_schema_extra={"pattern": _CLOCK_PATTERN})
    """Local time the window opens, HH:MM (00:00 to 23:59)."""
    end: str = Field(json_schema_extra={"pattern": _CLOCK_PATTERN})
    """Local time the window closes, HH:MM; at or before start, the window ends on the next day (equal: 24 h)."""
    time_zone: str = "UTC"
    """IANA time zone of start and end, e.g. Europe/Berlin; the window follows the zone's daylight saving time."""
    runners: int = Field(ge=0, le=MAX_RUNNERS_UNBOUNDED)
    """Runners wanted while the window is open."""

    @field_validator("days")
    @classmethod
    def _check_days(cls, value: str) -> str:
        parse_days(value)
        return value

    @field_validator("start", "end")
    @classmethod
    def _check_clock(cls, value: str) -> str:
        parse_clock(value)
        return value

    @field_validator("time_zone")
    @classmethod
    def _check_zone(cls, value: str) -> str:
        parse_zone(value)
        return value

    def window(self) -> Window:
        """The checked window the evaluators and the listener's configuration use."""
        return Window(days=self.days, start=self.start, end=self.end, time_zone=self.time_zone, runners=self.runners)
