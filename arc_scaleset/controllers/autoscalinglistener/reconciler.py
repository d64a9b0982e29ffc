"""The AutoscalingListener reconciler: the listener pod of one scale set and everything it needs.

Ordered phases (docs/controllers.md), each continuing in the same pass once its object is in line:

1. deleting → every child deleted (pod, config and proxy Secrets, ServiceAccount here; Role and RoleBinding
   in the scale set namespace), then the finalizer;
2. the finalizer;
3. the AutoscalingRunnerSet named by the spec must exist (checked against the API, not only the cache), or
   this listener is deleted;
4. ServiceAccount, Role (rules replaced when they differ), RoleBinding, proxy Secret: created, or their
   labels and annotations merged (keys added by others survive); Secret ``data`` replaced when it drifts;
5. the config Secret (``config.json``), data replaced when it drifts;
6. the pod: created; replaced when :func:`.pod.recreation_reason` says so; replaced after a
   failure, an eviction or a lost node with per-listener exponential backoff (Events say when the next
   attempt is); otherwise its labels and annotations merged;
7. the status (``Ready``, ``Degraded``; :mod:`.status`), written once at the end of every pass that
   got past step 3, whatever happened, and only when it changed.

Bad input (credentials, TLS, a template the API server rejects) is a Warning Event on the listener and on
its AutoscalingRunnerSet and a ``Ready`` condition saying what is wrong, and the key is retried with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

import pydantic

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS, AutoscalingListener
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.keys import AUTOSCALING_LISTENER_FINALIZER, LABEL_LISTENER_NAME, LABEL_LISTENER_NAMESPACE
from arc_scaleset.api.naming import (
    listener_config_secret_name,
    listener_pod_name,
    listener_proxy_secret_name,
    listener_role_binding_name,
    listener_role_name,
    listener_service_account_name,
)
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.controllers.autoscalinglistener.children import (
    desired_proxy_secret,
    desired_role,
    desired_role_binding,
    desired_service_account,
)
from arc_scaleset.controllers.autoscalinglistener.config import (
    data_differs,
    desired_config_secret,
    listener_config,
)
from arc_scaleset.controllers.autoscalinglistener.pod import desired_listener_pod, recreation_reason
from arc_scaleset.controllers.autoscalinglistener.restart import RestartBackoff, listener_pod_failure, listener_running
from arc_scaleset.controllers.autoscalinglistener.status import (
    ListenerReport,
    backoff_readiness,
    created_readiness,
    derive_conditions,
    pending_readiness,
    recreating_readiness,
    running_readiness,
    status_patch,
)
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.drift import merge_metadata
from arc_scaleset.controllers.errors import ConfigurationError, InvalidSpec
from arc_scaleset.controllers.metrics import scale_set_labels
from arc_scaleset.controllers.proxy_secret import proxy_secret_data
from arc_scaleset.kube.client import Preconditions
from arc_scaleset.kube.controller import Controller, Request, Result
from arc_scaleset.kube.errors import AlreadyExists, BadRequest, Conflict, Invalid, NotFound
from arc_scaleset.kube.finalizers import add_finalizer, has_finalizer, remove_finalizer
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.resources import PODS, ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS, Resource
from arc_scaleset.kube.views import ObjectView
from arc_scaleset.kube.workqueue import RateLimiter

log = logging.getLogger(__name__)

CONTROLLER_NAME: Final = "autoscalinglistener"
DELETION_REQUEUE_SECONDS: Final = 1.0
CONFLICT_REQUEUE_SECONDS: Final = 0.5


class InvalidListenerTemplate(ConfigurationError):  # noqa: N818 - reads as the condition it reports
    reason = "InvalidListenerTemplate"


def rbac_to_listener(obj: Object) -> Iterable[Request]:
    """A listener Role or RoleBinding (scale set namespace) concerns the listener its labels name."""
    view = ObjectView(obj)
    namespace, name = view.label(LABEL_LISTENER_NAMESPACE), view.label(LABEL_LISTENER_NAME)
    return (Request(namespace, name),) if namespace and name else ()


class AutoscalingListenerReconciler:
    """Reconciles AutoscalingListeners; build the controller with :meth:`controller`."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.listeners = ctx.cache(AUTOSCALING_LISTENERS)
        self.pods = ctx.cache(PODS)
        self.service_accounts = ctx.cache(SERVICE_ACCOUNTS)
        self.roles = ctx.cache(ROLES)
        self.role_bindings = ctx.cache(ROLE_BINDINGS)
        self.scale_sets = ctx.cache(AUTOSCALING_RUNNER_SETS)
        settings = ctx.settings
        self.backoff = RestartBackoff(
            base=settings.listener_restart_backoff_base, cap=settings.listener_restart_backoff_cap
        )

    def controller(self, *, rate_limiter: RateLimiter | None = None) -> Controller:
        """The controller running this reconciler; ``rate_limiter``: its workqueue's (``None``: the default)."""
        return Controller(
            CONTROLLER_NAME,
            AUTOSCALING_LISTENERS,
            self.reconcile,
            owns=[PODS, SERVICE_ACCOUNTS],
            watches=[(ROLES, rbac_to_listener), (ROLE_BINDINGS, rbac_to_listener)],
            rate_limiter=rate_limiter,
            clock=self.ctx.clock,
        )

    # -- the pass -------------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        key = str(request)
        obj = self.listeners.get(request.namespace, request.name)
        if obj is None:
            self.backoff.forget(key)
            return Result()
        try:
            listener = AutoscalingListener.from_object(obj)
        except pydantic.ValidationError as exc:
            raise InvalidSpec(f"AutoscalingListener {key} cannot be read: {exc.errors()[:1]}") from None
        view = AutoscalingListenerView(obj)
        if view.is_deleting:
            return await self._delete(obj, listener)
        if not has_finalizer(obj, AUTOSCALING_LISTENER_FINALIZER):
            await add_finalizer(self.ctx.kube, AUTOSCALING_LISTENERS, obj, AUTOSCALING_LISTENER_FINALIZER)
            return Result()
        if not await self._scale_set_exists(listener):
            log.info("AutoscalingListener %s: its AutoscalingRunnerSet is gone; deleting it", key)
            with contextlib.suppress(NotFound):
                await self.ctx.kube.delete(AUTOSCALING_LISTENERS, listener.name, namespace=listener.namespace)
            return Result()
        report = ListenerReport(
            generation=view.generation,
            pod_running=listener_running(self.pods.get(listener.namespace, listener_pod_name(listener.name)) or {}),
        )
        try:
            await self._service_account(obj, listener)
            await self._role(listener)
            await self._role_binding(listener)
            if listener.spec.proxy is not None:
                await self._proxy_secret(obj, listener)
            config_version = await self._config_secret(obj, listener)
            return await self._pod(obj, listener, config_version, report)
        except ConfigurationError as exc:
            report.problem = (exc.reason, exc.message)
            await self._warn(obj, listener, exc.reason, exc.message, action="Configure")
            raise
        except Conflict:
            return Result(requeue_after=CONFLICT_REQUEUE_SECONDS)
        except asyncio.CancelledError:
            # Stopping (possibly because leadership was lost): another process may already own the status.
            report.cancelled = True
            raise
        finally:
            if not report.cancelled:
                report.restarts = self.backoff.state(key, now=self.ctx.clock.monotonic())
                await self._write_status(obj, report)

    async def _scale_set_exists(self, listener: AutoscalingListener) -> bool:
        namespace = listener.spec.autoscaling_runner_set_namespace
        name = listener.spec.autoscaling_runner_set_name
        if self.scale_sets.get(namespace, name) is not None:
            return True
        # The cache may simply not have seen it yet: never delete on the strength of a cache miss.
        try:
            await self.ctx.kube.get(AUTOSCALING_RUNNER_SETS, name, namespace=namespace)
        except NotFound:
            return False
        return True

    # -- children -------------------------------------------------------------------------------------

    async def _ensure(
        self, resource: Resource, desired: Mapping[str, Any], live: Object | None, *, replace: Iterable[str] = ()
    ) -> dict[str, Any]:
        """Create ``desired``, or merge its metadata into ``live`` and replace the ``replace`` top-level fields
        that differ. Returns the object as stored (or as last seen when nothing changed)."""
        want = ObjectView(desired)
        if live is None:
            try:
                return await self.ctx.kube.create(resource, desired, namespace=want.namespace)
            except AlreadyExists:
                live = await self.ctx.kube.get(resource, want.name, namespace=want.namespace)
        merged = merge_metadata(
            live,
            labels=want.labels,
            annotations=want.annotations,
            excluded_label_prefixes=self.ctx.settings.exclude_label_prefixes,
        )
        patch: dict[str, Any] = dict(merged.patch)
        for field in replace:
            if live.get(field) != desired.get(field):
                patch[field] = desired.get(field)
        if not patch:
            return dict(live)
        patch.setdefault("metadata", {})["resourceVersion"] = ObjectView(live).resource_version
        return await self.ctx.kube.patch(resource, want.name, patch, namespace=want.namespace)

    async def _service_account(self, obj: Object, listener: AutoscalingListener) -> None:
        desired = desired_service_account(obj, listener, excluded=self.ctx.settings.exclude_label_prefixes)
        live = self.service_accounts.get(listener.namespace, ObjectView(desired).name)
        await self._ensure(SERVICE_ACCOUNTS, desired, live)

    async def _role(self, listener: AutoscalingListener) -> None:
        desired = desired_role(listener, excluded=self.ctx.settings.exclude_label_prefixes)
        live = self.roles.get(*ObjectView(desired).key)
        await self._ensure(ROLES, desired, live, replace=("rules",))

    async def _role_binding(self, listener: AutoscalingListener) -> None:
        desired = desired_role_binding(listener, excluded=self.ctx.settings.exclude_label_prefixes)
        live = self.role_bindings.get(*ObjectView(desired).key)
        await self._ensure(ROLE_BINDINGS, desired, live, replace=("subjects",))

    async def _proxy_secret(self, obj: Object, listener: AutoscalingListener) -> None:
        assert listener.spec.proxy is not None
        data = await proxy_secret_data(
            self.ctx.kube, listener.spec.autoscaling_runner_set_namespace, listener.spec.proxy
        )
        desired = desired_proxy_secret(obj, listener, data, excluded=self.ctx.settings.exclude_label_prefixes)
        live = await self._get_uncached(SECRETS, listener.namespace, ObjectView(desired).name)
        if live is not None and data_differs(live, desired):
            await self._ensure(SECRETS, desired, live, replace=("data",))
        else:
            await self._ensure(SECRETS, desired, live)

    async def _config_secret(self, obj: Object, listener: AutoscalingListener) -> str:
        """Bring the config Secret in line; returns its resourceVersion (the pod is stamped with it)."""
        ctx = self.ctx
        scale_set_namespace = listener.spec.autoscaling_runner_set_namespace
        app_config = await ctx.github.app_config(
            namespace=scale_set_namespace,
            secret_name=listener.spec.github_config_secret,
            vault=listener.spec.vault_config,
        )
        root_ca = await ctx.github.root_ca_pem(namespace=scale_set_namespace, tls=listener.spec.github_server_tls)
        config = listener_config(listener, app_config=app_config, server_root_ca=root_ca, settings=ctx.settings)
        desired = desired_config_secret(obj, listener, config, excluded_prefixes=ctx.settings.exclude_label_prefixes)
        live = await self._get_uncached(SECRETS, listener.namespace, ObjectView(desired).name)
        changed = live is not None and data_differs(live, desired)
        stored = await self._ensure(SECRETS, desired, live, replace=("data",) if changed else ())
        if changed:
            await self._event(
                obj,
                "ListenerConfigUpdated",
                f"listener config Secret {ObjectView(desired).name} updated",
                action="Update",
            )
        return ObjectView(stored).resource_version

    async def _get_uncached(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.ctx.kube.get(resource, name, namespace=namespace)
        except NotFound:
            return None

    # -- the pod --------------------------------------------------------------------------------------

    async def _pod(
        self, obj: Object, listener: AutoscalingListener, config_version: str, report: ListenerReport
    ) -> Result:
        """Steps of the pod; records in ``report.pod`` what it found (for the ``Ready`` condition)."""
        ctx = self.ctx
        key = f"{listener.namespace}/{listener.name}"
        metric_labels = scale_set_labels(listener.name, listener.namespace, listener.metadata.labels)
        desired = desired_listener_pod(
            obj,
            listener,
            command=ctx.settings.listener_entrypoint,
            metrics_port=ctx.settings.listener_metrics_port,
            config_resource_version=config_version,
        )
        name = ObjectView(desired).name
        live = self.pods.get(listener.namespace, name)
        now = ctx.clock.monotonic()

        if live is None:
            ctx.metrics.set_listener_running(metric_labels, False)
            remaining = self.backoff.remaining(key, now=now)
            if remaining > 0:
                report.pod = backoff_readiness(self.backoff.state(key, now=now))
                return Result(requeue_after=remaining)
            try:
                await ctx.kube.create(PODS, desired, namespace=listener.namespace)
            except AlreadyExists:
                return Result(requeue_after=CONFLICT_REQUEUE_SECONDS)
            except (Invalid, BadRequest) as exc:
                raise InvalidListenerTemplate(
                    f"the API server rejected the listener pod built from listenerTemplate: {exc.message}"
                ) from None
            report.pod = created_readiness(name)
            await self._event(obj, "ListenerPodCreated", f"created listener pod {name}", action="Create")
            return Result()

        live_pod = ObjectView(live)
        failure = listener_pod_failure(live, now=ctx.clock.now())
        if failure is not None:
            uid = live_pod.uid
            first_sighting = not self.backoff.is_recorded(key, pod_uid=uid)
            delay = self.backoff.record_failure(
                key, pod_uid=uid, now=now, ran_for=failure.ran_for, message=failure.message
            )
            report.pod = backoff_readiness(self.backoff.state(key, now=now))
            await self._delete_pod(listener.namespace, name, uid=uid, force=failure.force_delete)
            ctx.metrics.set_listener_running(metric_labels, False)
            if first_sighting:
                ctx.metrics.count_listener_restart(metric_labels)
                await self._warn(
                    obj,
                    listener,
                    failure.reason,
                    f"{failure.message}; recreating it in {delay:.0f}s (failure {self.backoff.failures(key)} in a row)",
                    action="Recreate",
                )
            return Result(requeue_after=max(delay, CONFLICT_REQUEUE_SECONDS))
        if live_pod.is_deleting:
            # Deleted by a previous pass (a failure's backoff keeps its own Ready reason) or by someone else.
            report.pod = (
                backoff_readiness(self.backoff.state(key, now=now))
                if self.backoff.is_recorded(key, pod_uid=live_pod.uid)
                else recreating_readiness(name, "waiting for the old pod to terminate")
            )
            return Result(requeue_after=DELETION_REQUEUE_SECONDS)

        reason = recreation_reason(live, desired)
        if reason is not None:
            report.pod = recreating_readiness(name, reason)
            await self._delete_pod(listener.namespace, name, uid=live_pod.uid)
            ctx.metrics.set_listener_running(metric_labels, False)
            await self._event(
                obj, "ListenerPodRecreating", f"recreating listener pod {name}: {reason}", action="Recreate"
            )
            return Result()

        await self._ensure(PODS, desired, live)
        running = listener_running(live)
        report.pod = running_readiness(name) if running else pending_readiness(live)
        ctx.metrics.set_listener_running(metric_labels, running)
        # Nothing watches the GitHub Secret (caching every Secret is not worth it): re-read it periodically, so a
        # rotated credential reaches the listener config (and restarts the listener) within this interval.
        return Result(requeue_after=ctx.settings.scale_set_verify_interval)

    async def _delete_pod(self, namespace: str, name: str, *, uid: str, force: bool = False) -> None:
        # NotFound: gone already; Conflict: the name now holds a newer pod, which must be left alone.
        with contextlib.suppress(NotFound, Conflict):
            await self.ctx.kube.delete(
                PODS,
                name,
                namespace=namespace,
                preconditions=Preconditions(uid=uid) if uid else None,
                grace_period_seconds=0 if force else None,
            )

    # -- deletion -------------------------------------------------------------------------------------

    async def _delete(self, obj: Object, listener: AutoscalingListener) -> Result:
        if not has_finalizer(obj, AUTOSCALING_LISTENER_FINALIZER):
            return Result()
        scale_set_namespace = listener.spec.autoscaling_runner_set_namespace
        children: list[tuple[Resource, str, str]] = [
            (PODS, listener.namespace, listener.name),
            (SECRETS, listener.namespace, listener_config_secret_name(listener.name)),
            (SECRETS, listener.namespace, listener_proxy_secret_name(listener.name)),
            (SERVICE_ACCOUNTS, listener.namespace, listener_service_account_name(listener.name)),
        ]
        if scale_set_namespace:
            children += [
                (ROLE_BINDINGS, scale_set_namespace, listener_role_binding_name(listener.name)),
                (ROLES, scale_set_namespace, listener_role_name(listener.name)),
            ]
        remaining = 0
        for resource, namespace, name in children:
            try:
                await self.ctx.kube.delete(resource, name, namespace=namespace)
            except NotFound:
                continue
            remaining += 1
        self.ctx.metrics.set_listener_running(
            scale_set_labels(listener.name, listener.namespace, listener.metadata.labels), False
        )
        if remaining:
            return Result(requeue_after=DELETION_REQUEUE_SECONDS)
        self.backoff.forget(f"{listener.namespace}/{listener.name}")
        await remove_finalizer(self.ctx.kube, AUTOSCALING_LISTENERS, obj, AUTOSCALING_LISTENER_FINALIZER)
        return Result()

    # -- status and events ----------------------------------------------------------------------------

    async def _write_status(self, obj: Object, report: ListenerReport) -> None:
        """Write the conditions this pass derived, when they differ from the stored ones.

        No resourceVersion precondition: only this controller writes the listener's status, and it is derived
        afresh from the live state on every pass, so a write from a stale read is corrected by the next pass.
        """
        view = AutoscalingListenerView(obj)
        conditions = derive_conditions(view.conditions, report, now=self.ctx.clock.now())
        patch = status_patch(view.status, conditions)
        if not patch:
            return
        with contextlib.suppress(NotFound):
            await self.ctx.kube.patch(
                AUTOSCALING_LISTENERS,
                view.name,
                {"status": patch},
                namespace=view.namespace,
                subresource="status",
            )

    async def _event(self, obj: Object, reason: str, note: str, *, action: str) -> None:
        await self.ctx.events.event(obj, type="Normal", reason=reason, note=note, action=action)

    async def _warn(self, obj: Object, listener: AutoscalingListener, reason: str, note: str, *, action: str) -> None:
        """A Warning on the listener and on its AutoscalingRunnerSet (where users look first)."""
        await self.ctx.events.event(obj, type="Warning", reason=reason, note=note, action=action)
        scale_set = self.scale_sets.get(
            listener.spec.autoscaling_runner_set_namespace, listener.spec.autoscaling_runner_set_name
        )
        if scale_set is not None:
            await self.ctx.events.event(
                scale_set, type="Warning", reason=reason, note=f"listener: {note}", action=action
            )


def setup_autoscaling_listener_controller(
    ctx: ControllerContext, *, rate_limiter: RateLimiter | None = None
) -> Controller:
    """Build the AutoscalingListener controller and register it with the context's manager."""
    controller = AutoscalingListenerReconciler(ctx).controller(rate_limiter=rate_limiter)
    ctx.manager.add(controller)
    return controller
