"""Deleting an AutoscalingListener's children: its pod, config and proxy Secrets and ServiceAccount in the
controller namespace, its Role and RoleBinding in the scale set's (docs/controllers.md).

Only what the listener owns is deleted (:func:`.ownership.foreign_reason`): its spec may name any namespace,
and an object of a child's name that is not its own is left alone. Each delete carries the child's UID as a
precondition, so a newer object that took the name meanwhile survives. The reconciler repeats the pass until
no child is left, then removes its finalizer.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.listener_standby import standby_lease_name, standby_pod_names, wants_standby
from arc_scaleset.api.naming import (
    listener_config_secret_name,
    listener_pod_name,
    listener_proxy_secret_name,
    listener_role_binding_name,
    listener_role_name,
    listener_service_account_name,
)
from arc_scaleset.controllers.autoscalinglistener.ownership import foreign_reason
from arc_scaleset.controllers.autoscalinglistener.standby import standby_role_name
from arc_scaleset.kube.client import KubeClient, Preconditions
from arc_scaleset.kube.errors import Conflict, NotFound
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.manager import Cache, NamespaceNotCachedError
from arc_scaleset.kube.resources import LEASES, PODS, ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS, Resource
from arc_scaleset.kube.views import ObjectView

log = logging.getLogger(__name__)

Child = tuple[Resource, str, str]
"""A child as (resource, namespace, name)."""


def listener_children(listener: AutoscalingListener) -> list[Child]:
    """Every object the listener's pass makes for it, where it makes it."""
    children: list[Child] = [
        (PODS, listener.namespace, listener.name),
        (SECRETS, listener.namespace, listener_config_secret_name(listener.name)),
        (SECRETS, listener.namespace, listener_proxy_secret_name(listener.name)),
        (SERVICE_ACCOUNTS, listener.namespace, listener_service_account_name(listener.name)),
    ]
    scale_set_namespace = listener.spec.autoscaling_runner_set_namespace
    if scale_set_namespace:
        children += [
            (ROLE_BINDINGS, scale_set_namespace, listener_role_binding_name(listener.name)),
            (ROLES, scale_set_namespace, listener_role_name(listener.name)),
        ]
    if wants_standby(listener.metadata.annotations):
        children += standby_children(listener)
    return children


def standby_children(listener: AutoscalingListener) -> list[Child]:
    """What a standby adds (controllers/autoscalinglistener/standby.py): the second pod, the Lease, and the Role
    and RoleBinding that let the pair use them, all in the listener's namespace."""
    pod = listener_pod_name(listener.name)
    role = standby_role_name(listener.name)
    return [
        (PODS, listener.namespace, standby_pod_names(pod)[1]),
        (ROLE_BINDINGS, listener.namespace, role),
        (ROLES, listener.namespace, role),
        (LEASES, listener.namespace, standby_lease_name(pod)),
    ]


async def delete_children(
    kube: KubeClient, caches: Mapping[Resource, Cache], owner: Object, listener: AutoscalingListener
) -> int:
    """Ask for the deletion of every child ``owner`` (the listener object) owns; the number still going
    (:func:`delete_listed` of :func:`listener_children`).

    ``caches`` holds the kinds the controller caches: a child they show as being deleted is neither read nor
    deleted again (the passes repeat until the children are gone, and with a hundred listeners deleted at
    once, reading each child from the API every time took the whole client rate limit). Other kinds
    (Secrets, Leases) are read from the API.
    """
    return await delete_listed(kube, caches, owner, listener, listener_children(listener))


async def delete_listed(
    kube: KubeClient,
    caches: Mapping[Resource, Cache],
    owner: Object,
    listener: AutoscalingListener,
    children: list[Child],
) -> int:
    """Ask for the deletion of those of ``children`` that ``owner`` owns; the number still going."""
    remaining = 0
    for resource, namespace, name in children:
        if _deleting_in_cache(caches, resource, namespace, name, owner):
            remaining += 1  # asked already; its removal (watched) brings the listener back: no request
            continue
        live = await get_or_none(kube, resource, namespace, name)
        if live is None:
            continue
        foreign = foreign_reason(resource.kind, live, owner)
        if foreign is not None:
            log.info("AutoscalingListener %s/%s: not deleting %s", listener.namespace, listener.name, foreign)
            continue
        if ObjectView(live).is_deleting:
            remaining += 1
            continue
        try:
            await kube.delete(
                resource,
                name,
                namespace=namespace,
                preconditions=Preconditions(uid=ObjectView(live).uid),
                missing_ok=True,  # gone meanwhile: the next pass finds nothing
            )
        except Conflict:
            continue  # replaced by a newer object of that name (not this listener's)
        remaining += 1
    return remaining


async def delete_owned(
    kube: KubeClient, resource: Resource, namespace: str, name: str, *, uid: str, force: bool = False
) -> None:
    """Delete the child ``namespace/name`` of UID ``uid`` (any object of that name when ``uid`` is empty); a
    no-op when it is gone, or when the name now holds a newer object, which must be left alone. ``force``: no
    grace period (the kubelet is gone and will never confirm a graceful deletion)."""
    with contextlib.suppress(Conflict):
        await kube.delete(
            resource,
            name,
            namespace=namespace,
            preconditions=Preconditions(uid=uid) if uid else None,
            grace_period_seconds=0 if force else None,
            missing_ok=True,
        )


async def get_or_none(kube: KubeClient, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
    """``namespace/name`` as the API server has it now (uncached), or ``None`` when there is none."""
    try:
        return await kube.get(resource, name, namespace=namespace)
    except NotFound:
        return None


def _deleting_in_cache(
    caches: Mapping[Resource, Cache], resource: Resource, namespace: str, name: str, owner: Object
) -> bool:
    cache = caches.get(resource)
    if cache is None:
        return False
    with contextlib.suppress(NamespaceNotCachedError):
        cached = cache.get(namespace, name)
        return (
            cached is not None
            and ObjectView(cached).is_deleting
            and foreign_reason(resource.kind, cached, owner) is None
        )
    return False
