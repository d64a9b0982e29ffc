"""What the warm-pool controller tells, in words a platform engineer reads on the scale set: pure.

The ``WarmCapacity`` condition's message names the pool, its shape and members, its size and *why* that size
(whose ask, from which input: ``warmCapacity.runners``, a schedule window, the forecast; or the controller's
per-pool cap), then this scale set's own ask and what lowered it (``warmCapacity.max``, ``maxRunners``). The
``WarmPoolResized`` Event's note says the change. ``kubectl arc status`` and ``explain`` print the message as
written (docs/capacity.md, "What it says").
"""

from __future__ import annotations

from typing import Final

from arc_scaleset.api.warm_capacity import DEFAULT_WARM_MAX, WarmCapacity
from arc_scaleset.controllers.warmcapacity.plan import (
    REASON_CAPPED,
    REASON_FORECAST,
    REASON_IDLE,
    REASON_RUNNERS,
    REASON_SCHEDULE,
    MemberWant,
    PoolSize,
)

CAP_FLAG: Final = "--warm-pool-max-placeholders"

_SOURCE: Final = {
    REASON_RUNNERS: "warmCapacity.runners",
    REASON_SCHEDULE: "a warmCapacity.schedule window open now",
    REASON_FORECAST: "the forecast: jobs came at this time of day on earlier days",
}


def bound_source(warm: WarmCapacity, max_runners: object) -> str:
    """Which field bounds a member's ask (:meth:`WarmCapacity.bound`'s order), in the words of the spec."""
    if warm.max is not None:
        return "warmCapacity.max"
    if isinstance(max_runners, int) and not isinstance(max_runners, bool):
        return "maxRunners"
    return f"the default bound of {DEFAULT_WARM_MAX} (neither warmCapacity.max nor maxRunners is set)"


def pool_reason(size: PoolSize) -> str:
    """Why the pool has its size."""
    if size.reason == REASON_IDLE or size.decided_by is None:
        return "no member asks for any now (warmCapacity.runners 0, no schedule window open, no forecast)"
    if size.reason == REASON_CAPPED:
        return f"{size.decided_by} asks for more, and the controller's {CAP_FLAG} caps a pool at {size.size}"
    return f"the largest ask of its members, {size.decided_by}'s, from {_SOURCE.get(size.reason, size.reason)}"


def member_reason(want: MemberWant, bounded_by: str) -> str:
    """This member's ask and where it comes from; what lowered it, when something did."""
    if want.reason == REASON_IDLE:
        return "this scale set asks for none now"
    source = _SOURCE.get(want.reason, want.reason)
    if want.capped_from is not None:
        return (
            f"this scale set asks for {want.wanted}: {source} asks for {want.capped_from}, capped at {want.bound} "
            f"by {bounded_by}"
        )
    return f"this scale set asks for {want.wanted}, from {source}"


def size_message(pool: str, shape: str, members: int, size: PoolSize, want: MemberWant, bounded_by: str) -> str:
    """The ``WarmCapacity=True`` message of one member."""
    shared = f", shared by {members} scale sets" if members > 1 else ""
    return (
        f"warm pool {pool} ({shape}{shared}) keeps {size.size} placeholder(s): {pool_reason(size)}; "
        f"{member_reason(want, bounded_by)}"
    )


def resized_note(pool: str, before: PoolSize, after: PoolSize) -> str:
    """The ``WarmPoolResized`` Event's note."""
    return f"warm pool {pool} now keeps {after.size} placeholder(s), was {before.size}: {pool_reason(after)}"


def preempted_note(pool: str, count: int) -> str:
    """The ``WarmPlaceholderPreempted`` Event's note."""
    return (
        f"runner pods took the room of {count} placeholder(s) of warm pool {pool}; they are made again and wait for "
        "a node in the background"
    )
