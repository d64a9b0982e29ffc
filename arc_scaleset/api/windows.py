"""Schedule windows (docs/capacity.md, "Schedules"): when a window is open, and the next moment that may change.

A window is a weekly, wall-clock span: ``days`` (a cron day-of-week field), ``start`` and ``end`` (``HH:MM``) in
``time_zone`` (an IANA name), and ``runners``. It is read by the controller (the pydantic
:class:`~arc_scaleset.api.schedule.WarmWindow` of ``warmCapacity.schedule`` and ``minRunnersSchedule``) and by the
listener (``min_runners_schedule`` in its ``config.json``); both use the parsers and :class:`Window` here, so the
controller refuses exactly what the listener would.

The rules:

1. ``days``: ``*``; a day as a number 0-7 (0 and 7 are Sunday) or a name ``Sun``..``Sat`` (any case); a range
   ``Mon-Fri``, which may wrap (``Fri-Mon`` is Fri, Sat, Sun, Mon); a comma-separated list of those.
2. A window *belongs* to the day it starts on. With ``end > start`` it is open on that day from ``start`` to
   ``end``; with ``end <= start`` it runs past midnight into the next day (``Fri 22:00-06:00`` is open from
   Friday 22:00 to Saturday 06:00, whatever ``days`` says of Saturday); ``end == start`` is 24 hours.
3. It is a **wall-clock** window: it is open while the clock on the wall of ``time_zone`` shows a time in
   ``[start, end)`` of its span. On the day the clock springs forward, a start or end the clock skips takes
   effect when the clock jumps past it (``02:30`` in Europe/Berlin opens at 03:00 CEST; a window that lies
   wholly in the skipped hour does not open that day). On the day the clock falls back, the repeated hour is
   inside a window twice (zoneinfo gives the two readings of ``02:30`` ``fold`` 0 and 1; both are 02:30 on the
   wall), so a window across it lasts an hour longer.

Standard library only: the listener imports this module, and pydantic would cost it about 10 MB (issue 20).
zoneinfo reads the system's time zone database (``/usr/share/zoneinfo``); in an image without one only ``UTC``
is known (the Dockerfile's distroless base has it; an image built from Debian packages needs ``tzdata``, or the
``tzdata`` wheel, which zoneinfo falls back to).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "DAYS_RULE",
    "TIME_RULE",
    "ZONE_RULE",
    "Window",
    "WindowError",
    "next_change",
    "parse_clock",
    "parse_days",
    "parse_zone",
    "runners_at",
]

DAY_NAMES: Final = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
"""Cron's day numbers: Sunday is 0 (and 7)."""
DAYS_RULE: Final = (
    "a cron day-of-week field: '*', 0-7 (0 and 7 are Sunday) or Sun..Sat, ranges like Mon-Fri (Fri-Mon wraps),"
    " lists like Mon,Wed,Fri"
)
TIME_RULE: Final = "a time of day HH:MM, 00:00 to 23:59"
ZONE_RULE: Final = "an IANA time zone name such as UTC or Europe/Berlin"
_CLOCK = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")
_DAY = 24 * 60
_UTC_NAMES: Final = frozenset({"UTC", "Etc/UTC"})


def _day_number(token: str, text: str) -> int:
    name = token.strip().lower()
    if name in DAY_NAMES:
        return DAY_NAMES.index(name)
    if name.isdigit() and int(name) <= 7:
        return int(name) % 7
    raise ValueError(f"{text!r} is not {DAYS_RULE}: {token.strip()!r} is not a day")


def parse_days(text: str) -> frozenset[int]:
    """The cron day numbers (0 = Sunday .. 6) that ``text`` names; ValueError that says why not."""
    if text.strip() == "*":
        return frozenset(range(7))
    days: set[int] = set()
    for item in text.split(","):
        first, dash, last = item.partition("-")
        if not first.strip() or (dash and not last.strip()):
            raise ValueError(f"{text!r} is not {DAYS_RULE}")
        low = _day_number(first, text)
        high = _day_number(last, text) if dash else low
        # A range that wraps (Fri-Mon) goes on through Saturday and Sunday.
        days.update((low + step) % 7 for step in range((high - low) % 7 + 1))
    return frozenset(days)


def parse_clock(text: str) -> int:
    """Minutes after midnight of an ``HH:MM`` time; ValueError that says why not."""
    match = _CLOCK.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not {TIME_RULE}")
    return int(match[1]) * 60 + int(match[2])


def parse_zone(name: str) -> dt.tzinfo:
    """The zone of an IANA name; ValueError that says why not. ``UTC`` needs no time zone database."""
    # Imported here, by the few processes whose sets have windows: zoneinfo brings sysconfig's tables,
    # about 0.9 MB of every listener's and the controller's memory (bench/README.md, issue 30).
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        if name.strip() in _UTC_NAMES:
            return dt.UTC
        # ValueError: a name zoneinfo refuses to look up at all (an absolute path, "..").
        raise ValueError(f"{name!r} is not {ZONE_RULE} known to this system's time zone database") from None


class WindowError(ValueError):
    """A window field that cannot be read: ``field`` (its config.json name), what it must be and what it is."""

    def __init__(self, field_name: str, expected: str, found: str) -> None:
        super().__init__(f"{field_name} must be {expected}, got {found}")
        self.field = field_name
        self.expected = expected
        self.found = found


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """One valid window (the module docstring's rules); constructing one validates it and raises
    :class:`WindowError` naming the first field that is wrong."""

    days: str = "*"
    start: str = ""
    end: str = ""
    time_zone: str = "UTC"
    runners: int = 0
    _days: frozenset[int] = field(init=False, repr=False, compare=False)
    _start: int = field(init=False, repr=False, compare=False)
    _end: int = field(init=False, repr=False, compare=False)
    _zone: dt.tzinfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parsed = (
            ("days", "_days", parse_days, DAYS_RULE, self.days),
            ("start", "_start", parse_clock, TIME_RULE, self.start),
            ("end", "_end", parse_clock, TIME_RULE, self.end),
            ("time_zone", "_zone", parse_zone, ZONE_RULE, self.time_zone),
        )
        for name, slot, parse, rule, text in parsed:
            try:
                object.__setattr__(self, slot, parse(text))
            except ValueError:
                raise WindowError(name, rule, repr(text)) from None
        if self.runners < 0:
            raise WindowError("runners", "0 or more", str(self.runners))

    def to_document(self) -> dict[str, object]:
        """The window as ``config.json`` holds it."""
        return {
            "days": self.days,
            "start": self.start,
            "end": self.end,
            "time_zone": self.time_zone,
            "runners": self.runners,
        }

    @property
    def length(self) -> int:
        """Minutes of wall-clock time from ``start`` to ``end`` (1 to 1440)."""
        return (self._end - self._start) % _DAY or _DAY

    def contains(self, now: dt.datetime) -> bool:
        """Whether the window is open at ``now`` (an aware datetime)."""
        wall = now.astimezone(self._zone)
        minute = wall.hour * 60 + wall.minute
        today = wall.date()
        # Open in today's span, or in the span that started yesterday and runs past midnight into today.
        for day, offset in ((today, minute - self._start), (today - dt.timedelta(days=1), minute + _DAY - self._start)):
            if _cron_day(day) in self._days and 0 <= offset < self.length:
                return True
        return False

    def edges(self, around: dt.datetime, *, days: int = 8) -> Iterable[dt.datetime]:
        """The instants (UTC) at which this window's wall-clock start and end fall, from the day before
        ``around`` for ``days`` days; a wall time the clock shows twice or never gives both of its readings."""
        first = around.astimezone(self._zone).date() - dt.timedelta(days=1)
        for step in range(days + 1):
            day = first + dt.timedelta(days=step)
            if _cron_day(day) not in self._days:
                continue
            opens = dt.datetime.combine(day, dt.time()) + dt.timedelta(minutes=self._start)
            for wall in (opens, opens + dt.timedelta(minutes=self.length)):
                for fold in (0, 1):
                    yield wall.replace(tzinfo=self._zone, fold=fold).astimezone(dt.UTC)


def _cron_day(day: dt.date) -> int:
    return day.isoweekday() % 7


def runners_at(windows: Sequence[Window], now: dt.datetime) -> int:
    """The largest ``runners`` of the windows open at ``now`` (aware), 0 when none is; ValueError for a naive
    ``now``, which has no time zone to place the windows in."""
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime")
    return max((window.runners for window in windows if window.contains(now)), default=0)


def next_change(windows: Sequence[Window], now: dt.datetime) -> dt.datetime | None:
    """The earliest instant after ``now`` at which a window may open or close, within about a week; None without
    windows. A wake-up time, not a promise: the caller evaluates :func:`runners_at` again when it comes (it may
    find nothing changed), and an edge whose wall time the clock skips is seen by the caller's next evaluation
    after the jump rather than at it."""
    later = [edge for window in windows for edge in window.edges(now) if edge > now]
    return min(later, default=None)
