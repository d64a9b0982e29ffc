"""When a standby listener takes the scale set over: pure decisions on what it has seen of the Lease and of its
peer's pod (docs/listener.md, "Standby listener"; the loop that applies them: :mod:`.standby`).

The Lease rules are leader election's (:mod:`arc_scaleset.kube.leader_election`): a free Lease, or one that has not
changed for its duration by the standby's own monotonic clock, may be taken. The standby adds one: a holder that
is its peer and whose process is seen dead may be replaced at once, without waiting for the Lease to expire. A
process is dead when its pod is gone, has ended (phase ``Failed``/``Succeeded``) or its listener container is
terminated: the kubelet writes that within about a second of the process's death. A pod that is only being
deleted (a ``deletionTimestamp``) is not: its listener is still stopping, and releases the Lease when it has.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.api.keys import LISTENER_CONTAINER_NAME
from arc_scaleset.kube.leader_election import LEASE_DURATION, Observation, may_acquire

ENDED_PHASES: Final = frozenset({"Failed", "Succeeded"})


class TakeReason(enum.StrEnum):
    """Why a standby takes the Lease (logged, and the test's evidence of which rule acted)."""

    RELEASED = "released"
    """Nobody holds it: the Lease is new, or its holder stopped gracefully and released it."""
    OWN = "already held by this pod"
    """This pod's name holds it: its previous container died and this one replaces it (same pod, same name)."""
    PEER_DEAD = "peer's listener is dead"
    EXPIRED = "lease expired"
    """Not renewed for its duration: a holder that hangs or is cut off from the API."""


def peer_death(pod: Mapping[str, Any] | None) -> str:
    """Why the peer's listener process is known to be dead, or ``""`` when it may still be running.

    ``pod`` is the peer's Pod as last seen (``None``: it does not exist).
    """
    if pod is None:
        return "pod gone"
    status = pod.get("status") or {}
    phase = status.get("phase") or ""
    if phase in ENDED_PHASES:
        return f"pod {phase}"
    for container in status.get("containerStatuses") or []:
        if container.get("name") == LISTENER_CONTAINER_NAME and "terminated" in (container.get("state") or {}):
            return "listener container terminated"
    return ""


@dataclass(frozen=True)
class PeerSight:
    """What the standby knows of its peer's listener: its pod as last seen (``seen``: seen at all) and ``death``,
    a :func:`peer_death` reason seen since the Lease last changed, or ``""``.

    A death stays known when the pod is replaced meanwhile: the watch may deliver the terminated container, the
    deletion and the new pod of the same name at once, and the dead one still holds the Lease. It is forgotten when
    the Lease changes: that may be a new process of the peer's name taking it, and then only the pod as seen now
    counts.
    """

    pod: Mapping[str, Any] | None = None
    seen: bool = False
    death: str = ""

    def saw_pod(self, pod: Mapping[str, Any] | None) -> PeerSight:
        """The peer's pod as now seen (``None``: it does not exist)."""
        return PeerSight(pod, True, self.death or peer_death(pod))

    def lease_changed(self) -> PeerSight:
        return PeerSight(self.pod, self.seen, peer_death(self.pod) if self.seen else "")


@dataclass(frozen=True)
class Step:
    """What the standby does next: take the Lease now (``take`` says why; ``dead_holder`` names the dead peer the
    write may replace), or wait for the next change, at most ``recheck_in`` seconds (``None``: no deadline)."""

    take: TakeReason | None = None
    dead_holder: str = ""
    recheck_in: float | None = None


def next_step(
    observation: Observation | None,
    *,
    identity: str,
    peer: str,
    peer_dead: str,
    now: float,
    default_lease_duration: float = LEASE_DURATION,
) -> Step:
    """The standby's decision, given the Lease as observed (``None``: not read yet) and ``peer_death`` of the
    peer's pod (``peer_dead``), at ``now`` on the standby's monotonic clock."""
    if observation is None:
        return Step()
    holder = observation.record.holder_identity
    if not holder:
        return Step(take=TakeReason.RELEASED)
    if holder == identity:
        return Step(take=TakeReason.OWN)
    if holder == peer and peer_dead:
        return Step(take=TakeReason.PEER_DEAD, dead_holder=peer)
    if may_acquire(observation, identity=identity, now=now, default_lease_duration=default_lease_duration):
        return Step(take=TakeReason.EXPIRED)
    duration = observation.record.lease_duration_seconds or default_lease_duration
    return Step(recheck_in=observation.observed_at + duration - now)
