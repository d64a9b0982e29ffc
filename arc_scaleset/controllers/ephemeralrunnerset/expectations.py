"""Creation and deletion expectations: do not decide on a cache that has not yet seen the runners we just
created (:class:`CreationExpectations`) or deleted (:class:`DeletionExpectations`).

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

import dataclasses
from collections.abc import Callable, Iterable

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.controllers.runner_classification import RunnerView

DEFAULT_EXPECTATION_TIMEOUT = 30.0


class CreationExpectations:
    """The names one set created, until its cache shows them (one per set: its slot of the controller's memory,
    :mod:`.scope`)."""

    def __init__(self, *, clock: Clock = REAL_CLOCK, timeout: float = DEFAULT_EXPECTATION_TIMEOUT) -> None:
        self._clock = clock
        self._timeout = timeout
        self._names: set[str] = set()
        self._deadline = 0.0

    def expect(self, names: Iterable[str]) -> None:
        """Remember ``names`` as created (adds to what is already expected)."""
        wanted = {name for name in names if name}
        if not wanted:
            return
        self._names |= wanted
        self._deadline = self._clock.monotonic() + self._timeout

    def outstanding(self, *, seen: Callable[[str], bool]) -> int:
        """How many expected names ``seen`` does not report yet (0: the cache is caught up, or we gave up)."""
        if not self._names:
            return 0
        self._names = {name for name in self._names if not seen(name)}
        if not self._names or self._clock.monotonic() >= self._deadline:
            self._names = set()
            return 0
        return len(self._names)

    def discard(self, name: str) -> None:
        """Stop awaiting ``name``: the set deleted it, so its cache had shown it (a cleanup plan is made from
        the cache). A runner created just before a revision and removed by that revision's cleanup (a pass that
        does not look at :meth:`outstanding`) can be gone before a later pass sees it; still awaited, it would
        hold the set's scale-up for the whole timeout."""
        self._names.discard(name)


class DeletionExpectations:
    """The names one set deleted, until its cache shows them deleting or gone (one per set, like
    :class:`CreationExpectations`).

    The other half of the problem above: a runner the set just deleted stays in the cache, not yet deleting,
    until its watch event arrives, while the events of the runners deleted with it already re-queue the set.
    A pass on that cache would remove such a runner again (a second ``RemoveRunner`` and a second delete for
    each: a scale-down of 200 made hundreds of needless calls). :meth:`mark` shows the pass those runners as
    deleting, which is what they are; a name is forgotten once the cache agrees, or after ``timeout``.
    """

    def __init__(self, *, clock: Clock = REAL_CLOCK, timeout: float = DEFAULT_EXPECTATION_TIMEOUT) -> None:
        self._clock = clock
        self._timeout = timeout
        self._names: set[str] = set()
        self._deadline = 0.0

    def expect(self, name: str) -> None:
        """Remember that runner ``name`` was deleted."""
        self._names.add(name)
        self._deadline = self._clock.monotonic() + self._timeout

    def mark(self, runners: list[RunnerView]) -> list[RunnerView]:
        """``runners`` (as the cache has them), those we deleted shown as deleting."""
        by_name = {runner.name: runner for runner in runners}
        still = self.unseen(by_name.get)
        if not still:
            return runners
        return [dataclasses.replace(runner, deleting=True) if runner.name in still else runner for runner in runners]

    def unseen(self, lookup: Callable[[str], RunnerView | None]) -> set[str]:
        """The runners we deleted that the cache still shows, not deleting (``lookup``: a runner's view by name
        as the cache has it, ``None`` when gone). Costs the number of such runners, not the set's size: a pass
        of a large set calls it on every runner event (issue 20)."""
        if not self._names:
            return set()
        if self._clock.monotonic() >= self._deadline:
            self._names = set()
            return set()
        still = set()
        for name in self._names:
            runner = lookup(name)
            if runner is not None and not runner.deleting:
                still.add(name)
        self._names = still
        return still
