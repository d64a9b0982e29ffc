"""The scaler's decision (docs/listener.md): how many runners, under which patch ID. Pure: no I/O, no clock (the
time is an argument).

The listener tells the EphemeralRunnerSet two things with each patch: ``replicas`` (the target) and a
``patchID``. The ERS acts on a patch ID once (scale up if short, never down), except patch ID 0, which
means "this is the authoritative state": the ERS may then also scale idle runners down.

This module reproduces ARC's sequencing exactly, because the ERS side depends on it:

- ``target = min(min_runners + assigned_jobs, max_runners)`` (a negative ``assigned_jobs``, which only a
  malformed answer carries, counts as 0; ARC would publish it), where ``min_runners`` is, with a
  ``minRunnersSchedule`` (not ARC's), the larger of ``minRunners`` and the runners of the windows open at the
  decision's time (:mod:`arc_scaleset.api.windows`), so the caller passes the time in;
- the sequence starts at -1 and is incremented before each decision (wrapping from MaxInt32 back to 0
  first), so the very first decision carries sequence 0 and therefore patch ID 0;
- patch ID 0 is also sent, as the "force state" signal, when nothing happened since the last decision
  (no job started or completed), the target did not change, and the target is ``min_runners``: the set is
  at rest, so it may reap its surplus idle runners. When a window closes, the first decision after it lowers
  the target (a patch ID the ERS does not scale down for) and the next one, unchanged, forces the state.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from arc_scaleset.api.windows import Window, next_change, runners_at

MAX_INT32 = 2**31 - 1


@dataclass(frozen=True)
class ScaleDecision:
    """What to write to the EphemeralRunnerSet: ``spec.replicas`` and ``spec.patchID``."""

    target: int
    patch_id: int


class DesiredState:
    """The scaler's state between decisions: the last target, the patch sequence, and the dirty flag."""

    def __init__(self, *, min_runners: int, max_runners: int, schedule: Sequence[Window] = ()) -> None:
        if min_runners < 0 or max_runners < min_runners:
            raise ValueError(f"need 0 <= min_runners <= max_runners, got {min_runners}, {max_runners}")
        self.min_runners = min_runners
        self.max_runners = max_runners
        self.schedule = tuple(schedule)
        self.target = -1
        self.patch_seq = -1
        self.dirty = False

    def min_runners_at(self, now: dt.datetime | None) -> int:
        """``minRunners``, raised to what the schedule's open windows ask for at ``now``, capped by ``max_runners``.

        ``now`` may be None only without a schedule (ValueError otherwise: a schedule is meaningless without it).
        """
        if not self.schedule:
            return self.min_runners
        if now is None:
            raise ValueError("a decision with a minRunnersSchedule needs the time")
        return min(max(self.min_runners, runners_at(self.schedule, now)), self.max_runners)

    def next_change(self, now: dt.datetime) -> dt.datetime | None:
        """When the schedule may next change the minimum (a wake-up time; None without a schedule)."""
        return next_change(self.schedule, now)

    def mark_dirty(self) -> None:
        """A job started or completed since the last decision: the next one must not be a forced 0."""
        self.dirty = True

    def decide(self, assigned_jobs: int, *, now: dt.datetime | None = None) -> ScaleDecision:
        """The next decision for ``assigned_jobs`` (the service's ``totalAssignedJobs``) at ``now`` (needed with a
        schedule); advances state.

        The target is always between the minimum at ``now`` and ``max_runners``: a negative ``assigned_jobs``
        counts as none.
        """
        min_runners = self.min_runners_at(now)
        was_dirty = self.dirty
        self.dirty = False
        if self.patch_seq == MAX_INT32:
            self.patch_seq = 0
        self.patch_seq += 1

        # The service never counts fewer than no jobs, but its answer is read as sent (models.from_service):
        # a negative count would ask the set for fewer than minRunners runners, or a negative number of them.
        target = min(min_runners + max(assigned_jobs, 0), self.max_runners)
        patch_id = self.patch_seq
        if not was_dirty and target == self.target and target == min_runners:
            patch_id = 0
        self.target = target
        return ScaleDecision(target=target, patch_id=patch_id)
