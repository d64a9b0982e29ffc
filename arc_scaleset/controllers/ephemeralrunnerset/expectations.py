"""Creation expectations: do not decide on a cache that has not yet seen the runners we just created.

A scale-up creates runners and returns; their watch events arrive over the next moments and each one
re-queues the set. A pass that ran on a cache missing some of them would count too few runners and create
the missing ones again -- a double creation for one slot, most visibly for ``patchID == 0``, which passes
the scaling gate on every pass. So the reconciler records the names it created, and a later pass waits
(does nothing) until every one of them is in the cache, or until ``timeout`` seconds have passed (a runner
deleted before our informer saw it never shows up; the timeout bounds that wait).

In memory only, on purpose: after a restart the caches are synced from a fresh list before any reconcile
runs, so everything created before the restart is visible and nothing needs remembering.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from arc_scaleset.clock import REAL_CLOCK, Clock

DEFAULT_EXPECTATION_TIMEOUT = 30.0


@dataclass
class _Pending:
    names: set[str] = field(default_factory=set)
    deadline: float = 0.0


class CreationExpectations:
    """Names created per key (``namespace/name`` of the set), until the cache shows them."""

    def __init__(self, *, clock: Clock = REAL_CLOCK, timeout: float = DEFAULT_EXPECTATION_TIMEOUT) -> None:
        self._clock = clock
        self._timeout = timeout
        self._pending: dict[str, _Pending] = {}

    def expect(self, key: str, names: Iterable[str]) -> None:
        """Remember ``names`` as created for ``key`` (adds to what is already expected)."""
        wanted = {name for name in names if name}
        if not wanted:
            return
        pending = self._pending.setdefault(key, _Pending())
        pending.names |= wanted
        pending.deadline = self._clock.monotonic() + self._timeout

    def outstanding(self, key: str, *, seen: Callable[[str], bool]) -> int:
        """How many expected names ``seen`` does not report yet (0: the cache is caught up, or we gave up)."""
        pending = self._pending.get(key)
        if pending is None:
            return 0
        pending.names = {name for name in pending.names if not seen(name)}
        if not pending.names or self._clock.monotonic() >= pending.deadline:
            del self._pending[key]
            return 0
        return len(pending.names)

    def forget(self, key: str) -> None:
        self._pending.pop(key, None)
