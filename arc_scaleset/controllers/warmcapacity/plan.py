"""How many placeholders a warm pool keeps, and which to create and delete now: pure.

A pool's members are the scale sets whose runners have its shape (:mod:`.shape`). Each member asks for
``min(bound, max(runners, schedule, forecast))`` placeholders (:func:`member_want`); the pool keeps the largest
of its members' asks, not their sum (one placeholder is room for the next runner of *any* member), and never more
than the controller's per-pool cap (:func:`pool_size`).

Placeholders have deterministic names, ``warm-<pool>-<index>`` for index ``0 .. size-1``
(:func:`placeholder_name`), so a pass that runs before the cache shows its own creates only meets
``AlreadyExists``, never makes a second placeholder. :func:`plan_pool` compares the wanted indexes with the
placeholders that exist: a missing index is created (a preempted placeholder, once gone, comes back under its
name and waits for a node), an index at or above the size is deleted (the pool shrinks from the top). A
placeholder being deleted (preempted, or shrunk) is neither counted as room nor created again until it is gone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

PLACEHOLDER_PREFIX: Final = "warm-"

REASON_RUNNERS: Final = "Runners"
REASON_SCHEDULE: Final = "Schedule"
REASON_FORECAST: Final = "Forecast"
REASON_IDLE: Final = "Idle"
REASON_CAPPED: Final = "PoolCapped"


@dataclass(frozen=True)
class MemberWant:
    """What one scale set asks of its pool, and why."""

    scale_set: str
    """``namespace/name``."""
    wanted: int
    reason: str
    """Which input decided: :data:`REASON_RUNNERS`, :data:`REASON_SCHEDULE`, :data:`REASON_FORECAST` (``bound``
    may have lowered it) or :data:`REASON_IDLE` (nothing asked for)."""
    bound: int
    capped_from: int | None = None
    """What ``reason`` asked for when ``bound`` lowered it; None when it did not."""


def member_want(scale_set: str, *, runners: int, scheduled: int, forecast: int, bound: int) -> MemberWant:
    """``min(bound, max(runners, scheduled, forecast))``, with the input that gave it (the schedule wins a tie
    over the base ``runners``, the forecast a tie over both: the more specific reason)."""
    candidates = ((forecast, REASON_FORECAST), (scheduled, REASON_SCHEDULE), (runners, REASON_RUNNERS))
    asked, reason = max(candidates, key=lambda candidate: candidate[0])
    if asked <= 0:
        return MemberWant(scale_set, 0, REASON_IDLE, bound)
    wanted = min(asked, max(bound, 0))
    return MemberWant(scale_set, wanted, reason, bound, capped_from=asked if asked > wanted else None)


@dataclass(frozen=True)
class PoolSize:
    """How many placeholders the pool keeps; ``reason`` and ``decided_by`` say why (the member with the largest
    ask, ties broken by name); ``capped``: the controller's per-pool cap lowered it."""

    size: int
    reason: str
    decided_by: str | None
    capped: bool = False


def pool_size(members: Iterable[MemberWant], *, cap: int) -> PoolSize:
    """The largest member's ask, at most ``cap``; zero (``Idle``) without members or asks."""
    top = max(members, key=lambda member: (member.wanted, _negated(member.scale_set)), default=None)
    if top is None or top.wanted <= 0:
        return PoolSize(0, REASON_IDLE, None)
    if top.wanted > cap:
        return PoolSize(max(cap, 0), REASON_CAPPED, top.scale_set, capped=True)
    return PoolSize(top.wanted, top.reason, top.scale_set)


def _negated(name: str) -> tuple[int, ...]:
    # max() by (wanted, name) would pick the *last* name on a tie; this picks the first.
    return tuple(-ord(char) for char in name)


def placeholder_name(pool_id: str, index: int) -> str:
    return f"{PLACEHOLDER_PREFIX}{pool_id}-{index}"


_NAME = re.compile(rf"^{re.escape(PLACEHOLDER_PREFIX)}(?P<pool>[0-9a-f]+)-(?P<index>0|[1-9][0-9]*)$")


def placeholder_index(pool_id: str, name: str) -> int | None:
    """The index in ``name`` when it is a placeholder name of pool ``pool_id``, else None."""
    match = _NAME.match(name)
    if match is None or match["pool"] != pool_id:
        return None
    return int(match["index"])


@dataclass(frozen=True)
class Placeholder:
    """A placeholder pod as the plan needs it."""

    name: str
    bound: bool
    """The scheduler gave it a node: it holds room for a runner."""
    terminating: bool
    """Being deleted (preempted by a runner pod, or shrunk): holds nothing for long."""

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> Placeholder:
        meta = pod.get("metadata") or {}
        return cls(
            name=str(meta.get("name", "")),
            bound=bool((pod.get("spec") or {}).get("nodeName")),
            terminating=bool(meta.get("deletionTimestamp")),
        )


@dataclass(frozen=True)
class PoolPlan:
    """What to do now, and what the pool holds: ``ready`` placeholders have a node (room a runner takes at
    once), ``waiting`` have none yet (each asks the node autoscaler for room), ``terminating`` are going."""

    create: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    ready: int = 0
    waiting: int = 0
    terminating: int = 0


def plan_pool(pool_id: str, size: int, placeholders: Sequence[Placeholder]) -> PoolPlan:
    """Create the missing indexes below ``size``; delete what is at or above it, or is no placeholder name of
    this pool (a pod labelled for the pool under another name: never room this plan counts)."""
    present: dict[int, Placeholder] = {}
    delete: list[str] = []
    for placeholder in placeholders:
        index = placeholder_index(pool_id, placeholder.name)
        if index is None or index >= size:
            if not placeholder.terminating:
                delete.append(placeholder.name)
            continue
        present[index] = placeholder
    kept = [p for p in present.values() if not p.terminating]
    return PoolPlan(
        create=tuple(placeholder_name(pool_id, index) for index in range(size) if index not in present),
        delete=tuple(sorted(delete)),
        ready=sum(1 for p in kept if p.bound),
        waiting=sum(1 for p in kept if not p.bound),
        terminating=sum(1 for p in placeholders if p.terminating),
    )


PREEMPTION_REASON: Final = "PreemptionByScheduler"


def preempted(pod: Mapping[str, Any]) -> bool:
    """The scheduler preempted ``pod`` for a pod of higher priority: its ``DisruptionTarget`` condition says so
    (kube-scheduler sets it before it deletes a victim)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "DisruptionTarget" and c.get("status") == "True" and c.get("reason") == PREEMPTION_REASON
        for c in conditions
    )
