"""When the listener was first offered each job: the ``offered`` milestone of the job's timeline.

GitHub's messages carry when a job was queued and acquired, not when the scale set was offered it (the
JobAvailable message that reached this listener). :class:`OfferTimes` remembers that moment per runner request
until the job starts (:meth:`take`, when the listener records the job on its runner). Bounded, oldest forgotten
first: a job offered and never started here (another scale set took it, or it was cancelled) must not keep memory
for ever. A listener restarted in between simply has no ``offered`` milestone for the job.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import Iterable
from typing import Final

DEFAULT_CAPACITY: Final = 1_000


class OfferTimes:
    """Request ID -> when it was first offered, for at most ``capacity`` requests."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._times: OrderedDict[int, float] = OrderedDict()  # epoch seconds: a float is a third of a datetime

    def __len__(self) -> int:
        return len(self._times)

    def offered(self, request_ids: Iterable[int], now: dt.datetime) -> None:
        """``request_ids`` were offered at ``now``; a request offered again keeps its first time."""
        for request_id in request_ids:
            if request_id not in self._times:
                self._times[request_id] = now.timestamp()
                if len(self._times) > self._capacity:
                    self._times.popitem(last=False)

    def take(self, request_id: int) -> dt.datetime | None:
        """When ``request_id`` was first offered (and forget it), or ``None`` when it is not remembered."""
        seconds = self._times.pop(request_id, None)
        return None if seconds is None else dt.datetime.fromtimestamp(seconds, dt.UTC)
