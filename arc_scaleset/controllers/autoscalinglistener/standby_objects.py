"""The standby step of an AutoscalingListener pass (docs/controllers.md, "Standby listener"): for a listener that
wants a standby, its Lease, Role and RoleBinding in line (:mod:`.standby` builds them) and the pair named in the
pass's scope for the pod step; for one that no longer does, what its standby left is deleted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from arc_scaleset.api.listener_standby import standby_pod_names, wants_standby
from arc_scaleset.api.naming import listener_pod_name
from arc_scaleset.controllers.autoscalinglistener.child_objects import ChildObjects
from arc_scaleset.controllers.autoscalinglistener.deletion import delete_listed, get_or_none, standby_children
from arc_scaleset.controllers.autoscalinglistener.scope import ListenerPass
from arc_scaleset.controllers.autoscalinglistener.standby import (
    StandbyPair,
    active_pod,
    desired_lease,
    desired_standby_role,
    desired_standby_role_binding,
)
from arc_scaleset.controllers.autoscalinglistener.standby_leases import StandbyLeaseWatch
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.kube.errors import Conflict
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.manager import Cache
from arc_scaleset.kube.resources import LEASES, ROLE_BINDINGS, ROLES, Resource
from arc_scaleset.kube.views import ObjectView


class StandbyObjects:
    """Keeps a listener's standby Lease, Role and RoleBinding; ``caches``: those of the kinds the controller
    caches (pods, Roles, RoleBindings); ``leases``: the watch of the pairs' Leases, which a pass compares the Lease
    against (:meth:`_lease`)."""

    def __init__(
        self,
        ctx: ControllerContext,
        caches: Mapping[Resource, Cache],
        children: ChildObjects,
        leases: StandbyLeaseWatch,
    ) -> None:
        self.ctx = ctx
        self.caches = caches
        self.children = children
        self.leases = leases

    async def apply(self, scope: ListenerPass) -> None:
        """The phase: ``scope.standby`` set for a listener that wants a standby, once its objects are in line."""
        if not wants_standby(scope.view.annotations):
            await self._remove_leftovers(scope)
            return
        obj, listener, excluded = scope.obj, scope.listener, self.ctx.settings.exclude_label_prefixes
        for resource, desired, replace in (
            (ROLES, desired_standby_role(obj, listener, excluded=excluded), ("rules",)),
            (ROLE_BINDINGS, desired_standby_role_binding(obj, listener, excluded=excluded), ("subjects",)),
        ):
            live = self.caches[resource].get(*ObjectView(desired).key)
            await self.children.ensure(resource, desired, live, owner=obj, replace=replace)
        lease = desired_lease(obj, listener, excluded=excluded)
        stored = await self._lease(obj, lease)
        pods = standby_pod_names(listener_pod_name(listener.name))
        scope.standby = StandbyPair(lease=ObjectView(lease).name, pods=pods, active=active_pod(stored, pods))

    async def _lease(self, owner: Object, lease: Mapping[str, Any]) -> Mapping[str, Any]:
        """The pair's Lease in line (metadata only: its spec is the listeners' to write, their holder and renewals);
        returns it as stored, or as the watch shows it when nothing was written.

        Compared with what the Lease watch shows (:meth:`.standby_leases.StandbyLeaseWatch.lease`), so a pass reads
        nothing from the API server; a write against that copy that a renewal beat (every 2 s: a Conflict on its
        ``resourceVersion``) is made again against a fresh read, as is every pass while the watch shows no Lease.
        """
        view = ObjectView(lease)
        watched = self.leases.lease(view.name)
        if watched is not None:
            with contextlib.suppress(Conflict):
                return await self.children.ensure(LEASES, lease, watched, owner=owner)
        live = await get_or_none(self.ctx.kube, LEASES, view.namespace, view.name)
        return await self.children.ensure(LEASES, lease, live, owner=owner)

    async def _remove_leftovers(self, scope: ListenerPass) -> None:
        """A listener that had a standby goes back to one pod: the second pod, the Role, RoleBinding and Lease are
        deleted. Looked for in the caches only (the Lease is not cached: it goes with the others, or with the
        listener, which owns it), so a listener that never had a standby costs no request."""
        leftovers = standby_children(scope.listener)
        if not any(self._cached(resource, namespace, name) for resource, namespace, name in leftovers):
            return
        await delete_listed(self.ctx.kube, self.caches, scope.obj, scope.listener, leftovers)

    def _cached(self, resource: Resource, namespace: str, name: str) -> bool:
        cache = self.caches.get(resource)
        return cache is not None and cache.get(namespace, name) is not None
