"""The EphemeralRunnerSet's runner counts: what ``kubectl get`` and dashboards read, kept current and cheap.

:func:`runner_counts` derives them from the classification the pass already made (no extra read), with ARC's
names and meaning (``EphemeralRunnerSetReconciler.updateStatus``): ``currentReplicas`` = pending + running +
failed (the runners that hold a slot), then one count per state. Beyond ARC, ``finishedEphemeralRunners`` and
``deletingEphemeralRunners`` are maintained too: ARC's printer columns name them but nothing ever wrote them.

:func:`status_changes` is the diff to write (the phase with them, in one patch). :class:`StatusPacer` keeps a
burst cheap: a write that changes only counts goes out at most once per ``interval`` seconds per set, and the
pass that holds one back comes back when it is due, so the last counts of a burst are written too. A
scale-up of 200 runners therefore costs a handful of status writes on the set, not one per runner (the
phase is never held back).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from arc_scaleset.clock import Clock
from arc_scaleset.controllers.runner_classification import RunnerStates

COUNT_FIELDS: Final = (
    "currentReplicas",
    "pendingEphemeralRunners",
    "runningEphemeralRunners",
    "failedEphemeralRunners",
    "finishedEphemeralRunners",
    "deletingEphemeralRunners",
)
DEFAULT_COUNTS_INTERVAL: Final = 2.0
"""Seconds between two writes of a set's status that change only its runner counts."""


def runner_counts(states: RunnerStates) -> dict[str, int]:
    """The count fields of the set's status for these runners (Outdated runners count in none, as in ARC)."""
    return {
        "currentReplicas": states.total,
        "pendingEphemeralRunners": len(states.pending),
        "runningEphemeralRunners": len(states.running),
        "failedEphemeralRunners": len(states.failed),
        "finishedEphemeralRunners": len(states.finished),
        "deletingEphemeralRunners": len(states.deleting),
    }


def status_changes(status: Mapping[str, Any], *, counts: Mapping[str, int], phase: str | None = None) -> dict[str, Any]:
    """The status fields that differ from ``status`` (as read): ``phase`` (unless ``None``) and the counts.

    Only these fields: the revision fields have their own conflict-checked writers and are never re-sent
    from a possibly stale copy.
    """
    changes: dict[str, Any] = {}
    if phase is not None and status.get("phase") != phase:
        changes["phase"] = phase
    for field, value in counts.items():
        if status.get(field) != value:
            changes[field] = value
    return changes


class StatusPacer:
    """At most one counts-only status write of one set per ``interval`` seconds (on the injected clock); one per
    set, in its slot of the controller's memory (:mod:`.scope`)."""

    def __init__(self, *, clock: Clock, interval: float = DEFAULT_COUNTS_INTERVAL) -> None:
        self._clock = clock
        self.interval = interval
        self._last: float | None = None

    def wait(self) -> float:
        """Seconds until a counts-only write may go out (0: now)."""
        if self._last is None:
            return 0.0
        return max(0.0, self.interval - (self._clock.monotonic() - self._last))

    def wrote(self) -> None:
        self._last = self._clock.monotonic()
