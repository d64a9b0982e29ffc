"""How many runners to hold warm now, from the times jobs arrived on earlier days (docs/capacity.md, "Forecast").

Two parts, both pure and in memory:

- :func:`forecast_runners`: the rule (its docstring numbers the steps);
- :class:`ArrivalHistory`: where the arrival times are kept. The warm-capacity controller holds one for the
  process: a bounded count of job arrivals per scale set and per minute, for the forecast's history (a week),
  fed by :mod:`.arrivals` from what the controller's cache already shows (one arrival per job an EphemeralRunner
  shows). The history is lost with the process (a restarted controller forecasts nothing for a week, then as
  before); a forecast never lowers what the schedule asks for.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections import deque
from collections.abc import Hashable, Sequence
from typing import Final

__all__ = ["DEFAULT_HISTORY", "DEFAULT_HORIZON", "RECURRING_DAYS", "ArrivalHistory", "forecast_runners"]

DEFAULT_HORIZON: Final = dt.timedelta(minutes=10)
"""How far ahead the forecast looks: about the time a new node takes to come up, with its image pulled."""
DEFAULT_HISTORY: Final = dt.timedelta(days=7)
RECURRING_DAYS: Final = 2
"""On how many of the past days a burst must have come before it is held warm for: one is a one-off."""
_DAY: Final = dt.timedelta(days=1)


def forecast_runners(
    arrivals: Sequence[dt.datetime],
    now: dt.datetime,
    *,
    horizon: dt.timedelta = DEFAULT_HORIZON,
    history: dt.timedelta = DEFAULT_HISTORY,
) -> int:
    """Runners to hold warm at ``now`` so that a burst that came at about this time of day on earlier days
    finds them; ``arrivals`` are aware job arrival times in any order (those outside the history are ignored).

    1. Take the whole days of the history: for ``history`` of 7 days, the past days ``d = 1..7``.
    2. For each such day, count the arrivals in ``[now - d days, now - d days + horizon)``: the jobs that came in
       the next ``horizon`` at this time of day, that day.
    3. No arrival in the whole history (``[now - history, now)``): 0, the pool shrinks to nothing.
    4. The answer is the :data:`RECURRING_DAYS`-th highest of those counts (the second highest): a burst
       that came on at least two of the past days is held for at the size it had on its second-largest day;
       a burst that came once is not, so a one-off does not keep a standing pool for a week.

    The pool grows ``horizon`` before a regular burst (its span comes into view) and shrinks once the burst's
    time of day has passed (its span leaves). Days are 24 hours of real time: across a DST change, a burst
    driven by local working hours is an hour off for one day's count.
    """
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime")
    if horizon <= dt.timedelta(0) or history < _DAY:
        raise ValueError("horizon must be positive and history at least one day")
    times = sorted(arrival for arrival in arrivals if now - history <= arrival < now)
    if not times:
        return 0
    days = history // _DAY
    counts = sorted(
        (
            bisect.bisect_left(times, now - day * _DAY + horizon) - bisect.bisect_left(times, now - day * _DAY)
            for day in range(1, days + 1)
        ),
        reverse=True,
    )
    return counts[RECURRING_DAYS - 1] if len(counts) >= RECURRING_DAYS else 0


class ArrivalHistory:
    """Job arrivals per scale set, bounded: one ``[minute, count]`` entry per minute with arrivals, none older
    than ``history`` (so at most ``history`` in minutes per scale set, whatever the job volume).

    ``key`` is whatever names a scale set for the caller (namespace and name). Arrival times are kept to the
    minute: the forecast's spans are ten minutes wide.
    """

    def __init__(self, *, history: dt.timedelta = DEFAULT_HISTORY) -> None:
        self.history = history
        self._minutes: dict[Hashable, deque[list[int]]] = {}

    def record(self, key: Hashable, at: dt.datetime, count: int = 1) -> None:
        """``count`` jobs of ``key`` arrived at ``at`` (aware). The feed is in time order: an arrival earlier than the
        latest one recorded (a clock that stepped back) is counted in the latest minute."""
        if count <= 0:
            return
        minute = _minute(at)
        buckets = self._minutes.setdefault(key, deque())
        if buckets and buckets[-1][0] >= minute:
            # Within the latest minute (or a clock that stepped back a little): counted there.
            buckets[-1][1] += count
        else:
            buckets.append([minute, count])
        self._trim(buckets, minute)

    def arrivals(self, key: Hashable, now: dt.datetime) -> list[dt.datetime]:
        """The arrival times of ``key`` within the history before ``now``, one per job, for
        :func:`forecast_runners`."""
        buckets = self._minutes.get(key)
        if not buckets:
            return []
        self._trim(buckets, _minute(now))
        return [_at(minute) for minute, count in buckets for _ in range(count)]

    def forget(self, key: Hashable) -> None:
        """Drop the history of ``key`` (its scale set was deleted)."""
        self._minutes.pop(key, None)

    def __len__(self) -> int:
        """Minute entries held, over every scale set (the memory bound's measure)."""
        return sum(len(buckets) for buckets in self._minutes.values())

    def _trim(self, buckets: deque[list[int]], minute: int) -> None:
        oldest = minute - self.history // dt.timedelta(minutes=1)
        while buckets and buckets[0][0] < oldest:
            buckets.popleft()


def _minute(at: dt.datetime) -> int:
    if at.tzinfo is None:
        raise ValueError("arrival times must be aware datetimes")
    return int(at.timestamp() // 60)


def _at(minute: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(minute * 60, dt.UTC)
