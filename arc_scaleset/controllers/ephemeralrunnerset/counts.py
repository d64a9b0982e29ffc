"""The EphemeralRunnerSet's runner counts: what ``kubectl get`` and dashboards read, kept current and cheap.

:func:`runner_counts` derives them from the classification the pass already made (no extra read), with ARC's
names and meaning (``EphemeralRunnerSetReconciler.updateStatus``): ``currentReplicas`` = pending + running +
failed (the runners that hold a slot), then one count per state. Beyond ARC, ``finishedEphemeralRunners`` and
``deletingEphemeralRunners`` are maintained too: ARC's printer columns name them but nothing ever wrote them.

:func:`status_changes` is the diff to write (the phase with them, in one patch). :class:`StatusPacer` keeps
them cheap: a change of the counts alone is written ``interval`` seconds after a pass first saw it, with
whatever changed meanwhile (the pass that holds it back comes back when it is due), and one that is undone
meanwhile is not written at all. A runner's start (pending, then running a moment later) and its end
(finished, deleting, gone) are then one write each, and a scale-up of 200 runners a handful of writes, not
one per runner (issue 30: the set's and its scale set's status were four writes per job each). The phase is
never held back.

Without ``--runner-counts-in-status`` (the default, as ARC's current code, #4557: the counts are metrics, not
status) the counts to store are none: :func:`status_counts` gives every field as ``None``, so the first pass
removes those a status still holds (a merge patch's null) and a runner's start and end write nothing to the set.
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
"""Seconds a change of a set's runner counts alone waits before it is written."""


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


def status_counts(states: RunnerStates, *, in_status: bool) -> Mapping[str, int | None]:
    """The count fields to store: :func:`runner_counts`, or with ``in_status`` false every field ``None`` (absent)."""
    return runner_counts(states) if in_status else dict.fromkeys(COUNT_FIELDS)


def status_changes(
    status: Mapping[str, Any], *, counts: Mapping[str, int | None], phase: str | None = None
) -> dict[str, Any]:
    """The status fields that differ from ``status`` (as read): ``phase`` (unless ``None``) and the counts (a
    count of ``None`` differs from a field that is there: ``None`` removes it).

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
    """When one set's counts-only change may be written: ``interval`` seconds (on the injected clock) after a
    pass first saw it; one per set, in its slot of the controller's memory (:mod:`.scope`)."""

    def __init__(self, *, clock: Clock, interval: float = DEFAULT_COUNTS_INTERVAL) -> None:
        self._clock = clock
        self.interval = interval
        self._since: float | None = None

    def wait(self) -> float:
        """Seconds until the counts that differ from the status may be written (0: now). The first call after
        :meth:`settled` starts the interval: call it only when they differ."""
        now = self._clock.monotonic()
        if self._since is None:
            self._since = now
        return max(0.0, self._since + self.interval - now)

    def settled(self) -> None:
        """The status shows the counts (they were written, or a change was undone): nothing is held back."""
        self._since = None
