"""The scaler's decision (docs/listener.md): how many runners, under which patch ID. Pure: no I/O, no clock.

The listener tells the EphemeralRunnerSet two things with each patch: ``replicas`` (the target) and a
``patchID``. The ERS acts on a patch ID once (scale up if short, never down), except patch ID 0, which
means "this is the authoritative state": the ERS may then also scale idle runners down.

This module reproduces ARC's sequencing exactly, because the ERS side depends on it:

- ``target = min(min_runners + assigned_jobs, max_runners)``;
- the sequence starts at -1 and is incremented before each decision (wrapping from MaxInt32 back to 0
  first), so the very first decision carries sequence 0 and therefore patch ID 0;
- patch ID 0 is also sent, as the "force state" signal, when nothing happened since the last decision
  (no job started or completed), the target did not change, and the target is ``min_runners``: the set is
  at rest, so it may reap its surplus idle runners.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_INT32 = 2**31 - 1


@dataclass(frozen=True)
class ScaleDecision:
    """What to write to the EphemeralRunnerSet: ``spec.replicas`` and ``spec.patchID``."""

    target: int
    patch_id: int


class DesiredState:
    """The scaler's state between decisions: the last target, the patch sequence, and the dirty flag."""

    def __init__(self, *, min_runners: int, max_runners: int) -> None:
        if min_runners < 0 or max_runners < min_runners:
            raise ValueError(f"need 0 <= min_runners <= max_runners, got {min_runners}, {max_runners}")
        self.min_runners = min_runners
        self.max_runners = max_runners
        self.target = -1
        self.patch_seq = -1
        self.dirty = False

    def mark_dirty(self) -> None:
        """A job started or completed since the last decision: the next one must not be a forced 0."""
        self.dirty = True

    def decide(self, assigned_jobs: int) -> ScaleDecision:
        """The next decision for ``assigned_jobs`` (the service's ``totalAssignedJobs``); advances state."""
        was_dirty = self.dirty
        self.dirty = False
        if self.patch_seq == MAX_INT32:
            self.patch_seq = 0
        self.patch_seq += 1

        target = min(self.min_runners + assigned_jobs, self.max_runners)
        patch_id = self.patch_seq
        if not was_dirty and target == self.target and target == self.min_runners:
            patch_id = 0
        self.target = target
        return ScaleDecision(target=target, patch_id=patch_id)
