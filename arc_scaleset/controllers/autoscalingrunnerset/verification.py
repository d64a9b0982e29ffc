"""When the scale set is checked on GitHub again, as a pure decision (docs/controllers.md, AutoscalingRunnerSet 5).

A registered scale set is verified by ID: at once when the listener reports that GitHub no longer knows it
(:mod:`.listener_report`; once per report), and otherwise when nothing recent vouches for it (never verified,
or under another ID), when its listener is missing, on a spec change, when a registration annotation is
missing or stale (it is restored on that pass, as ARC does), and every ``scale_set_verify_interval``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol


class VerifiedMemory(Protocol):
    """What the decision reads of the scale set's memory (:class:`.scope.ScaleSetMemory` is one)."""

    @property
    def verified_at(self) -> float | None: ...
    @property
    def verified_id(self) -> int: ...
    @property
    def gone_report(self) -> dt.datetime | None: ...


@dataclass(frozen=True)
class Verification:
    """Whether to verify the scale set now, and the listener report it acts on (``None``: none)."""

    due: bool
    gone_report: dt.datetime | None = None


@dataclass(frozen=True)
class VerificationInputs:
    """What the decision reads about the scale set, besides its memory (all of it from the pass's caches)."""

    scale_set_id: int
    gone_report: dt.datetime | None
    """When the listener reported this very scale set ID gone, if it does."""
    listener_missing: bool
    spec_changed: bool
    record_stale: bool
    """A registration annotation (runner group, scale-set name) is missing or disagrees with the spec."""


def plan_verification(
    memory: VerifiedMemory, inputs: VerificationInputs, *, now: float, interval: float
) -> Verification:
    """Whether the scale set is verified on this pass (``now``: the monotonic clock; see the module docstring).

    A gone report the memory has acted on is not acted on again: a verification that finds the scale set
    keeps it, and the same report must not bring a check on every pass.
    """
    if inputs.gone_report is not None and memory.gone_report != inputs.gone_report:
        return Verification(due=True, gone_report=inputs.gone_report)
    if memory.verified_at is None or memory.verified_id != inputs.scale_set_id:
        return Verification(due=True)
    if inputs.listener_missing or inputs.spec_changed or inputs.record_stale:
        return Verification(due=True)
    return Verification(due=now - memory.verified_at >= interval)


def seconds_until_verification(memory: VerifiedMemory, *, now: float, interval: float) -> float:
    """How long until the periodic verification is due (the requeue of a pass that found everything in line)."""
    if memory.verified_at is None:
        return interval
    return max(0.0, interval - (now - memory.verified_at))
