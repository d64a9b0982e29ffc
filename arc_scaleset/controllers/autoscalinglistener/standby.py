"""The standby listener, the controller's side: the pure parts (docs/controllers.md, "Standby listener"; the
contract with the listener process is :mod:`arc_scaleset.api.listener_standby`; issue 30).

A listener whose AutoscalingListener carries the standby annotation runs two pods, the pair
:func:`~arc_scaleset.api.listener_standby.standby_pod_names` of its pod's name, each the pod ARC's would be except
for its name and two environment variables (:func:`pair_identities`). In the listener's namespace, owned by the
listener (so garbage collected with it):

- the Lease the pair holds in turn (:func:`desired_lease`), made with no holder; the controller never writes its
  ``spec`` again (the listeners do);
- a Role and RoleBinding (:func:`desired_standby_role`, :func:`desired_standby_role_binding`) that let the
  listener's ServiceAccount ``get``/``watch``/``update`` that Lease and ``get``/``list``/``watch`` the two pods,
  by name. They are apart from the listener's Role, which lives in the scale set's namespace and cannot grant
  anything in this one.

Each pod gets its own step (:func:`.pod_plan.plan_pod`), but a pod is recreated (a new config, a changed spec)
only while its peer runs, the standby first (:func:`one_recreation_at_a_time`): a rotated credential never stops
both at once, and the active pod hands over to a standby that is already up to date. ``Ready`` comes from the
active pod, the Lease's holder (:func:`active_pod`, :func:`pair_readiness`).

Pure: it imports nothing that talks to the API server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.listener_standby import (
    PEER_POD_ENV,
    STANDBY_LEASE_ENV,
    STANDBY_SUFFIX,
    peer_of,
    standby_lease_name,
    standby_pod_names,
)
from arc_scaleset.api.naming import listener_pod_name, listener_service_account_name
from arc_scaleset.controllers.autoscalinglistener.children import RBAC_API_VERSION, child_metadata, rbac_labels
from arc_scaleset.controllers.autoscalinglistener.pod import PodIdentity
from arc_scaleset.controllers.autoscalinglistener.pod_plan import PodAction, PodStep
from arc_scaleset.controllers.autoscalinglistener.status import PodReadiness
from arc_scaleset.kube.resources import LEASES

LEASE_DURATION_SECONDS: Final = 10
"""The Lease's ``leaseDurationSeconds``: how long a holder that stopped renewing keeps it. A pod that dies is
seen by its peer's pod watch at once; the duration bounds only a hung holder (or a lost node)."""
REASON_NO_ACTIVE_LISTENER: Final = "NoActiveListener"


@dataclasses.dataclass(frozen=True)
class StandbyPair:
    """What a pass knows of a listener's pair: its Lease, and the pod holding it (``None``: neither)."""

    lease: str
    pods: tuple[str, str]
    active: str | None


def standby_role_name(listener_name: str) -> str:
    """The Role and RoleBinding of the pair, in the listener's namespace."""
    return f"{listener_name}{STANDBY_SUFFIX}"


def pair_identities(identity: PodIdentity) -> tuple[PodIdentity, PodIdentity]:
    """The two pods' identities: ``identity`` (the listener pod's) renamed to each of the pair, each told the
    Lease and its peer."""
    lease = standby_lease_name(identity.name)
    first, second = standby_pod_names(identity.name)

    def renamed(name: str) -> PodIdentity:
        told = ({"name": STANDBY_LEASE_ENV, "value": lease}, {"name": PEER_POD_ENV, "value": peer_of(name, first)})
        return dataclasses.replace(identity, name=name, env=(*identity.env, *told))

    return renamed(first), renamed(second)


def desired_lease(
    listener_object: Mapping[str, Any], listener: AutoscalingListener, *, excluded: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The pair's Lease, with no holder: the first listener to start takes it."""
    return {
        "apiVersion": LEASES.api_version,
        "kind": LEASES.kind,
        "metadata": child_metadata(
            standby_lease_name(listener_pod_name(listener.name)),
            listener.namespace,
            base_labels=rbac_labels(listener, excluded),
            user=None,
            excluded=excluded,
            owner=listener_object,
        ),
        "spec": {"leaseDurationSeconds": LEASE_DURATION_SECONDS},
    }


def standby_rules(listener_name: str) -> list[dict[str, Any]]:
    """What the pair's listeners may do in their namespace: hold their Lease, and watch each other."""
    pod = listener_pod_name(listener_name)
    return [
        {
            "apiGroups": [LEASES.group],
            "resources": [LEASES.plural],
            "resourceNames": [standby_lease_name(pod)],
            "verbs": ["get", "watch", "update"],
        },
        {
            "apiGroups": [""],
            "resources": ["pods"],
            "resourceNames": list(standby_pod_names(pod)),
            "verbs": ["get", "list", "watch"],
        },
    ]


def desired_standby_role(
    listener_object: Mapping[str, Any], listener: AutoscalingListener, *, excluded: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The Role of :func:`standby_rules`, in the listener's namespace, owned by the listener."""
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "Role",
        "metadata": _rbac_metadata(listener_object, listener, excluded),
        "rules": standby_rules(listener.name),
    }


def desired_standby_role_binding(
    listener_object: Mapping[str, Any], listener: AutoscalingListener, *, excluded: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Binds :func:`desired_standby_role` to the listener's ServiceAccount."""
    name = standby_role_name(listener.name)
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "RoleBinding",
        "metadata": _rbac_metadata(listener_object, listener, excluded),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": listener_service_account_name(listener.name),
                "namespace": listener.namespace,
            }
        ],
    }


def _rbac_metadata(
    listener_object: Mapping[str, Any], listener: AutoscalingListener, excluded: tuple[str, ...]
) -> dict[str, Any]:
    return child_metadata(
        standby_role_name(listener.name),
        listener.namespace,
        base_labels=rbac_labels(listener, excluded),
        user=None,
        excluded=excluded,
        owner=listener_object,
    )


def active_pod(lease: Mapping[str, Any] | None, pods: tuple[str, str]) -> str | None:
    """The pod of the pair that holds ``lease``; ``None`` when none does (no holder yet, or a stranger)."""
    holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
    return holder if holder in pods else None


def pair_readiness(pair: StandbyPair, found: Mapping[str, PodReadiness]) -> PodReadiness:
    """``Ready`` of a listener with a standby: the active pod's, saying which pod that is and how its standby
    fares; with no holder, not ready (nobody holds the scale set's session), ``runs`` when either pod runs.

    ``found``: what each pod's step found (both of :attr:`StandbyPair.pods`).
    """
    first, second = (found[name] for name in pair.pods)
    if pair.active is None:
        return PodReadiness(
            False,
            REASON_NO_ACTIVE_LISTENER,
            f"neither listener pod {pair.pods[0]} nor {pair.pods[1]} holds Lease {pair.lease} yet",
            runs=first.runs or second.runs,
        )
    standby = peer_of(pair.active, pair.pods[0])
    active, other = found[pair.active], found[standby]
    stands_by = (
        f"standby pod {standby} is ready" if other.runs else f"standby pod {standby} is not ready: {other.message}"
    )
    return dataclasses.replace(active, message=f"{active.message} (active: holds Lease {pair.lease}); {stands_by}")


def one_recreation_at_a_time(
    steps: Mapping[str, PodStep], running: Mapping[str, bool], pair: StandbyPair
) -> dict[str, PodStep]:
    """The pair's steps with the ``RECREATE`` of a running pod turned into ``WAIT_PEER`` while its peer does not
    run or is recreated itself; of two running pods to recreate, the standby goes first (the holder last, so it
    hands over to an up-to-date peer). A pod that does not run is recreated at once.

    ``steps`` and ``running`` (its listener container runs): by pod name, both of :attr:`StandbyPair.pods`.
    """
    staggered = dict(steps)
    recreating: set[str] = set()
    for name in sorted(pair.pods, key=lambda pod: pod == pair.active):
        step = steps[name]
        if step.action is not PodAction.RECREATE:
            continue
        peer = peer_of(name, pair.pods[0])
        peer_up = running[peer] and steps[peer].action in (PodAction.KEEP, PodAction.RECREATE)
        # A pod that does not run loses nothing by going (and two such never wait for each other).
        if not running[name] or (peer_up and peer not in recreating):
            recreating.add(name)
            continue
        staggered[name] = PodStep(
            PodAction.WAIT_PEER, why=f"{step.why}; waiting for its peer {peer} to run first", running=True
        )
    return staggered
