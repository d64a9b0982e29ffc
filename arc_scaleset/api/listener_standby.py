"""The standby listener's names: the contract between the AutoscalingListener controller, which runs two listener
pods for a scale set that asks for a standby, and the listener process, which stands by until the other one dies
(docs/listener.md, "Standby listener"; issue 30).

A scale set whose AutoscalingRunnerSet is annotated :data:`ANNOTATION_STANDBY` ``"true"`` gets two listener pods,
:func:`standby_pod_names` of its listener pod's name, running the same container. They are peers: whichever holds
the Lease :func:`standby_lease_name` (``holderIdentity`` = its pod name) is the **active** listener and holds the
scale set's message session; the other is warmed up (imports done, config read, GitHub client ready) and waits.
The pod's role is the Lease's, never its name's: after a takeover the pod named ``<listener>-standby`` is the
active one until it dies.

The controller creates the Lease (empty holder) and grants the listener's ServiceAccount ``get``/``watch``/
``update`` on that one Lease and ``get``/``watch``/``list`` on the two pods, by name. It tells each pod its Lease
and its peer through :data:`STANDBY_LEASE_ENV` and :data:`PEER_POD_ENV`; the pod's own name is ``HOSTNAME``.
Without :data:`STANDBY_LEASE_ENV` a listener starts active at once, as ARC's does.

A shared listener (:mod:`.listener_group`) has no standby: the annotation is ignored on a set that shares.

Standard library only: the listener process imports this module (issue 20).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = [
    "ANNOTATION_STANDBY",
    "PEER_POD_ENV",
    "STANDBY_LEASE_ENV",
    "STANDBY_SUFFIX",
    "STANDBY_VALUE",
    "peer_of",
    "standby_lease_name",
    "standby_pod_names",
    "wants_standby",
]

ANNOTATION_STANDBY: Final = "listener.arc-scaleset.dev/standby"
"""On an AutoscalingRunnerSet (copied by its controller onto the AutoscalingListener): ``"true"`` asks for a
standby listener."""
STANDBY_VALUE: Final = "true"
STANDBY_SUFFIX: Final = "-standby"
STANDBY_LEASE_ENV: Final = "LISTENER_STANDBY_LEASE"
"""The listener container's environment variable naming the Lease (in the pod's namespace) the two peers hold in
turn; its presence makes the process stand by until it holds the Lease."""
PEER_POD_ENV: Final = "LISTENER_PEER_POD"
"""The listener container's environment variable naming the other pod of the pair, whose death it watches for."""


def wants_standby(annotations: Mapping[str, str] | None) -> bool:
    """Whether an object's annotations ask for a standby listener."""
    return (annotations or {}).get(ANNOTATION_STANDBY) == STANDBY_VALUE


def standby_pod_names(listener_pod_name: str) -> tuple[str, str]:
    """The pair of pods: the listener pod ARC would run, and its peer ``<name>-standby``."""
    return listener_pod_name, f"{listener_pod_name}{STANDBY_SUFFIX}"


def peer_of(pod_name: str, listener_pod_name: str) -> str:
    """The other pod of the pair ``pod_name`` belongs to; ``ValueError`` when it is not one of them."""
    first, second = standby_pod_names(listener_pod_name)
    if pod_name == first:
        return second
    if pod_name == second:
        return first
    raise ValueError(f"pod {pod_name!r} is not one of the listener pods {first!r} and {second!r}")


def standby_lease_name(listener_pod_name: str) -> str:
    """The Lease the pair holds in turn: named as the listener pod, in its namespace."""
    return listener_pod_name
