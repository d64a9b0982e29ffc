"""Places in shared-listener shards taken by listeners this process is making, until its cache shows them
(docs/listener.md, "Shards"). Pure: the caller passes the time.

The AutoscalingRunnerSet controller counts a shard's members in its listener cache, and the cache shows a
listener it has just created only once the watch brings it back. Sets that choose a shard in that window (the
controller's workers run passes side by side, and a pass awaits the API between reading a shard's load and
creating its listener) would each see the shard's last place free, so a count limit of 100 could let in 103. A
set takes a **seat** in the shard at the moment it chooses it, and every later choice counts the seats with the
cached members: :meth:`ShardSeats.holders`.

A seat is given back when the cache shows its listener in that shard (it counts there as a member from then
on), when its set chooses again, or :data:`SEAT_TTL_SECONDS` after it was taken (its listener was never
created: a create that failed, a pass that stopped first). A seat that outlives its use only sends the next
joiner one shard further, never past the limit. A restarted process starts with no seats: its cache, synced
before the first pass, shows every listener made before.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Final

SEAT_TTL_SECONDS: Final = 60.0
"""How long a seat is held for a listener the cache does not show: far longer than a create takes to come back
through the watch, even behind a client rate limit."""


@dataclass(frozen=True)
class _Seat:
    group: str
    taken_at: float


@dataclass
class ShardSeats:
    """The seats taken in each group by listeners the cache may not show yet, by listener name."""

    _seats: dict[str, _Seat] = field(default_factory=dict)

    def take(self, listener: str, group: str, *, now: float) -> None:
        """``listener`` (its name) joins ``group``: it holds a seat there (and none elsewhere) from ``now``
        (monotonic seconds)."""
        self._seats[listener] = _Seat(group, now)

    def holders(self, group: str, *, cached: Collection[str], now: float) -> frozenset[str]:
        """The listeners that hold a seat in ``group`` and are not among ``cached`` (the names the cache shows
        in it); the seats of cached or expired listeners are given back."""
        held: set[str] = set()
        for listener, seat in list(self._seats.items()):
            if now - seat.taken_at >= SEAT_TTL_SECONDS:
                del self._seats[listener]
            elif seat.group == group:
                if listener in cached:
                    del self._seats[listener]
                else:
                    held.add(listener)
        return frozenset(held)

    def __len__(self) -> int:
        return len(self._seats)
