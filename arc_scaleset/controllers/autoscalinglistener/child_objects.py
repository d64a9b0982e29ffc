"""The children step of an AutoscalingListener pass (docs/controllers.md, steps 4 and 5): ServiceAccount, Role,
RoleBinding and proxy Secret, then the config Secret, each brought in line with what :mod:`.children` and
:mod:`.config` build.

An object is created, or, only when it is this listener's (:func:`.ownership.foreign_reason`), its labels and
annotations merged (keys added by others survive) and its rules, subjects or data replaced when they drift; a
foreign object in the way is left untouched and stops the listener (:class:`.errors.ObjectInTheWay`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from arc_scaleset.api.listener_config import ListenerConfig
from arc_scaleset.controllers.autoscalinglistener.child_secrets import ListenerSecrets, fingerprint
from arc_scaleset.controllers.autoscalinglistener.children import (
    desired_proxy_secret,
    desired_role,
    desired_role_binding,
    desired_service_account,
)
from arc_scaleset.controllers.autoscalinglistener.config import data_differs, desired_config_secret, listener_config
from arc_scaleset.controllers.autoscalinglistener.deletion import get_or_none
from arc_scaleset.controllers.autoscalinglistener.errors import ObjectInTheWay
from arc_scaleset.controllers.autoscalinglistener.events import ListenerEvents
from arc_scaleset.controllers.autoscalinglistener.ownership import foreign_reason
from arc_scaleset.controllers.autoscalinglistener.scope import ListenerPass
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.drift import alignment_patch
from arc_scaleset.controllers.proxy_secret import proxy_secret_data
from arc_scaleset.kube.errors import AlreadyExists
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.manager import Cache
from arc_scaleset.kube.resources import ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS, Resource
from arc_scaleset.kube.views import ObjectView


class ChildObjects:
    """Writes a listener's children; ``caches``: those of the kinds the controller caches (not Secrets: their
    checks are ``secrets``', :mod:`.child_secrets`)."""

    def __init__(self, ctx: ControllerContext, caches: Mapping[Resource, Cache], events: ListenerEvents) -> None:
        self.ctx = ctx
        self.caches = caches
        self.events = events
        # Not cached: what each pass last found them holding is checked against a metadata-only watch (a Source
        # of the listener controller) instead of read again.
        self.secrets = ListenerSecrets(ctx.kube, namespace=ctx.settings.controller_namespace, clock=ctx.clock)

    async def apply(self, scope: ListenerPass) -> None:
        """The phase: every child in line; ``scope.stamp`` set to the versions the pod must be made from."""
        obj, listener, excluded = scope.obj, scope.listener, self.ctx.settings.exclude_label_prefixes
        await self._cached(SERVICE_ACCOUNTS, obj, desired_service_account(obj, listener, excluded=excluded))
        await self._cached(ROLES, obj, desired_role(listener, excluded=excluded), replace=("rules",))
        await self._cached(ROLE_BINDINGS, obj, desired_role_binding(listener, excluded=excluded), replace=("subjects",))
        proxy_version = await self._proxy_secret(scope) if listener.spec.proxy is not None else ""
        config_version = await self._config_secret(scope)
        # The pod reads its proxy from the proxy Secret only when it starts (env from secretKeyRef): a rotated
        # proxy credential reaches the listener only through a new pod, so the proxy Secret's version is part
        # of the stamp (issue 17; ARC never updates that Secret at all).
        scope.stamp = f"{config_version}+{proxy_version}" if proxy_version else config_version

    async def ensure(
        self,
        resource: Resource,
        desired: Mapping[str, Any],
        live: Object | None,
        *,
        owner: Object,
        replace: Iterable[str] = (),
    ) -> dict[str, Any]:
        """Create ``desired``, or merge its metadata into ``live`` and replace the ``replace`` top-level fields
        that differ. Returns the object as stored (or as last seen when nothing changed).

        ``live`` is adopted only when it is ``owner``'s (the listener's; :func:`.ownership.foreign_reason`):
        otherwise :class:`.errors.ObjectInTheWay`, and it is left untouched.
        """
        want = ObjectView(desired)
        if live is None:
            try:
                return await self.ctx.kube.create(resource, desired, namespace=want.namespace)
            except AlreadyExists:
                live = await self.ctx.kube.get(resource, want.name, namespace=want.namespace)
        foreign = foreign_reason(want.kind, live, owner, desired=desired)
        if foreign is not None:
            raise ObjectInTheWay(foreign)
        patch = alignment_patch(
            live, desired, replace=replace, excluded_label_prefixes=self.ctx.settings.exclude_label_prefixes
        )
        if patch is None:
            return dict(live)
        return await self.ctx.kube.patch(resource, want.name, patch, namespace=want.namespace)

    async def _cached(
        self, resource: Resource, owner: Object, desired: Mapping[str, Any], *, replace: Iterable[str] = ()
    ) -> None:
        """:meth:`ensure` of a child of a cached kind, as the cache has it."""
        live = self.caches[resource].get(*ObjectView(desired).key)
        await self.ensure(resource, desired, live, owner=owner, replace=replace)

    async def _proxy_secret(self, scope: ListenerPass) -> str:
        """Bring the listener's proxy Secret in line; returns its resourceVersion (part of the pod's stamp)."""
        obj, listener = scope.obj, scope.listener
        assert listener.spec.proxy is not None
        # Through the controller's GitHub access: the credential Secrets' data is kept per change (watched).
        data = await proxy_secret_data(
            self.ctx.github.reads, listener.spec.autoscaling_runner_set_namespace, listener.spec.proxy
        )
        desired = desired_proxy_secret(obj, listener, data, excluded=self.ctx.settings.exclude_label_prefixes)
        version, _ = await self._own_secret(obj, desired)
        return version

    async def config(self, scope: ListenerPass) -> ListenerConfig:
        """The listener's ``config.json``, with the credentials and CA of its scale set (read through the
        controller's GitHub access: cached per change of the Secret, ConfigMap or vault)."""
        ctx, listener = self.ctx, scope.listener
        scale_set_namespace = listener.spec.autoscaling_runner_set_namespace
        app_config = await ctx.github.app_config(
            namespace=scale_set_namespace,
            secret_name=listener.spec.github_config_secret,
            vault=listener.spec.vault_config,
            config_url=listener.spec.github_config_url,
        )
        root_ca = await ctx.github.root_ca_pem(namespace=scale_set_namespace, tls=listener.spec.github_server_tls)
        return listener_config(listener, app_config=app_config, server_root_ca=root_ca, settings=ctx.settings)

    async def _config_secret(self, scope: ListenerPass) -> str:
        """Bring the config Secret in line; returns its resourceVersion (the pod is stamped with it).

        With a vault too the Secret holds the credentials (read by the controller): a rotation in the vault
        rewrites it, and its new version recreates the listener.
        """
        ctx, obj, listener = self.ctx, scope.obj, scope.listener
        config = await self.config(scope)
        desired = desired_config_secret(obj, listener, config, excluded_prefixes=ctx.settings.exclude_label_prefixes)
        version, changed = await self._own_secret(obj, desired)
        if changed:
            name = ObjectView(desired).name
            await self.events.normal(
                obj, "ListenerConfigUpdated", f"listener config Secret {name} updated", action="Update"
            )
        return version

    async def _own_secret(self, obj: Object, desired: Mapping[str, Any]) -> tuple[str, bool]:
        """Bring one of the listener's own Secrets in line with ``desired``, read from the API server only when
        the kept check cannot vouch for it (:mod:`.child_secrets`); returns its resourceVersion and whether its
        data was replaced."""
        wanted = fingerprint(desired)
        version = self.secrets.version_holding(desired, wanted)
        if version is not None:
            return version, False
        want = ObjectView(desired)
        live = await get_or_none(self.ctx.kube, SECRETS, want.namespace, want.name)
        changed = live is not None and data_differs(live, desired)
        stored = await self.ensure(SECRETS, desired, live, owner=obj, replace=("data",) if changed else ())
        self.secrets.seen(stored, wanted)
        return ObjectView(stored).resource_version, changed
