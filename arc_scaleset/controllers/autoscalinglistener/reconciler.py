"""The AutoscalingListener reconciler: the listener pod of one scale set and everything it needs.

Ordered phases (docs/controllers.md), each continuing in the same pass once its object is in line:

1. deleting → every child deleted (pod, config and proxy Secrets, ServiceAccount here; Role and RoleBinding
   in the scale set namespace), then the finalizer;
2. a listener outside the controller namespace is refused (:mod:`.ownership`), before the finalizer and
   before anything its spec names is read; then the finalizer;
3. the AutoscalingRunnerSet named by the spec must exist (checked against the API, not only the cache), or
   this listener is deleted; a listener ARC's controller made (ARC's ``actions.github.com/runner-spec-hash``
   annotation) is left as it is: the AutoscalingRunnerSet controller replaces it, once (docs/migration.md),
   and adjusting its pod first would replace ARC's listener twice; a listener its scale set did not make
   (the UID annotation) is refused. A refused listener gets no credentials and no pod (those it has are
   withdrawn), and ``Degraded`` and an Event on it say why;
4. the ``listenerTemplate`` and metadata policies (:mod:`.template_policy`, :mod:`.metadata_policy`), on the
   pod this pass would create, before anything is written; then
   ServiceAccount, Role (rules replaced when they differ), RoleBinding, proxy Secret: created, or, only when
   they are this listener's (:func:`.ownership.foreign_reason`), their labels and annotations merged (keys
   added by others survive) and Secret ``data`` replaced when it drifts; a foreign object in the way is left
   untouched and stops the listener (``ObjectInTheWay``);
5. the config Secret (``config.json``) from the scale set's credentials, CA and proxy, read in the scale set's
   namespace (:func:`.ownership.with_scale_set_credentials`), data replaced when it drifts;
6. the pod: created; replaced when :func:`.pod.recreation_reason` says so; replaced after a
   failure, an eviction or a lost node with per-listener exponential backoff (Events say when the next
   attempt is); otherwise its labels and annotations merged;
7. the status (``Ready``, ``Degraded``; :mod:`.status`), written once at the end of every pass that
   got past step 3, whatever happened, and only when it changed.

Bad input (credentials, TLS, a template the policy or the API server rejects, an object in the way) is a Warning
Event on the listener and on its AutoscalingRunnerSet and a ``Ready`` condition saying what is wrong (after a
refusal, ``Degraded`` too, and the listener pod is withdrawn), and the key is retried with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

import pydantic

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS, AutoscalingListener
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS, AutoscalingRunnerSet
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import (
    ANNOTATION_AUTOSCALING_RUNNER_SET_UID,
    ANNOTATION_RUNNER_SPEC_HASH,
    AUTOSCALING_LISTENER_FINALIZER,
    LABEL_LISTENER_NAME,
    LABEL_LISTENER_NAMESPACE,
)
from arc_scaleset.api.naming import (
    listener_config_secret_name,
    listener_pod_name,
    listener_proxy_secret_name,
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
    uses_vault,
)
from arc_scaleset.controllers.autoscalinglistener.deletion import delete_children, get_or_none
from arc_scaleset.controllers.autoscalinglistener.listener_health import (
    INDEX_RUNNER_SET,
    listener_readiness,
    listener_state_changed,
    reported_state,
    runner_set_index,
    state_annotation,
)
from arc_scaleset.controllers.autoscalinglistener.metadata_policy import listener_metadata_violations
from arc_scaleset.controllers.autoscalinglistener.ownership import (
    Refusal,
    foreign_reason,
    listener_refusal,
    with_scale_set_credentials,
)
from arc_scaleset.controllers.autoscalinglistener.pod import (
    dedicated_probe_port,
    desired_listener_pod,
    recreation_reason,
)
from arc_scaleset.controllers.autoscalinglistener.restart import RestartBackoff, listener_pod_failure, listener_running
from arc_scaleset.controllers.autoscalinglistener.status import (
    ListenerReport,
    PodReadiness,
    backoff_readiness,
    created_readiness,
    derive_conditions,
    outage_event,
    pending_readiness,
    recreating_readiness,
    status_patch,
)
from arc_scaleset.controllers.autoscalinglistener.template_policy import (
    Kind,
    ListenerPolicy,
    check_listener_template,
    is_shareable,
    own_references,
    references,
    refusal_message,
)
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.drift import merge_metadata
from arc_scaleset.controllers.errors import ConfigurationError, InvalidSpec
from arc_scaleset.controllers.failure_report import ReconcileFailureReporter
from arc_scaleset.controllers.metrics import scale_set_labels
from arc_scaleset.controllers.proxy_secret import proxy_secret_data
from arc_scaleset.controllers.referenced_objects import listener_references
from arc_scaleset.kube.client import Preconditions
from arc_scaleset.kube.controller import Controller, Request, Result, Watch
from arc_scaleset.kube.errors import AlreadyExists, BadRequest, Conflict, Forbidden, Invalid, NotFound
from arc_scaleset.kube.failures import pass_failure
from arc_scaleset.kube.finalizers import add_finalizer, has_finalizer, remove_finalizer
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.ownerrefs import is_controlled_by
from arc_scaleset.kube.resources import CONFIG_MAPS, PODS, ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS, Resource
from arc_scaleset.kube.views import ObjectView
from arc_scaleset.kube.workqueue import RateLimiter

log = logging.getLogger(__name__)

CONTROLLER_NAME: Final = "autoscalinglistener"
DELETION_REQUEUE_SECONDS: Final = 1.0
CONFLICT_REQUEUE_SECONDS: Final = 0.5


class InvalidListenerTemplate(ConfigurationError):  # noqa: N818 - reads as the condition it reports
    """``listenerTemplate`` is refused by the policy (:mod:`.template_policy`) or by the API server."""

    reason = "InvalidListenerTemplate"


class ForbiddenListenerMetadata(ConfigurationError):  # noqa: N818 - reads as the condition it reports
    """A label or annotation the listener's pod or ServiceAccount may not carry (:mod:`.metadata_policy`)."""

    reason = "ForbiddenListenerMetadata"


class ObjectInTheWay(ConfigurationError):  # noqa: N818 - reads as the condition it reports
    """An object under a child's name is not this listener's (:func:`.ownership.foreign_reason`)."""

    reason = "ObjectInTheWay"


REFUSALS: Final = (InvalidListenerTemplate, ForbiddenListenerMetadata, ObjectInTheWay)
"""Configuration errors after which no listener pod may run: it is withdrawn and ``Degraded`` says why."""


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
        self._child_caches = {
            PODS: self.pods,
            SERVICE_ACCOUNTS: self.service_accounts,
            ROLES: self.roles,
            ROLE_BINDINGS: self.role_bindings,
        }
        self.scale_sets = ctx.cache(AUTOSCALING_RUNNER_SETS)
        # The listener reports its state on the set it scales (docs/listener.md): the cache every other
        # controller shares, watched for that annotation alone.
        self.runner_sets = ctx.cache(EPHEMERAL_RUNNER_SETS)
        with contextlib.suppress(ValueError):  # another reconciler on this manager added it already
            ctx.manager.add_index(AUTOSCALING_LISTENERS, INDEX_RUNNER_SET, runner_set_index)
        settings = ctx.settings
        self.backoff = RestartBackoff(
            base=settings.listener_restart_backoff_base, cap=settings.listener_restart_backoff_cap
        )
        # The credentials Secret, CA ConfigMap and proxy Secrets each listener is built from, watched (metadata
        # only) so that a rotation reaches the listener within seconds.
        self.references = ctx.references
        # Per listener: the state annotation its set carried when this process created the listener's pod (a
        # predecessor's: not the new listener's word), and the status this process last wrote, with the
        # resourceVersion it was computed from (the cache may not show it yet).
        self._predecessor_state: dict[str, str] = {}
        self._written_status: dict[str, tuple[str, list[dict[str, Any]]]] = {}

    def controller(self, *, rate_limiter: RateLimiter | None = None) -> Controller:
        """The controller running this reconciler; ``rate_limiter``: its workqueue's (``None``: the default)."""
        return Controller(
            CONTROLLER_NAME,
            AUTOSCALING_LISTENERS,
            self.reconcile,
            owns=[PODS, SERVICE_ACCOUNTS],
            watches=[
                (ROLES, rbac_to_listener),
                (ROLE_BINDINGS, rbac_to_listener),
                Watch(EPHEMERAL_RUNNER_SETS, self._runner_set_to_listeners, on_update_if=listener_state_changed),
            ],
            sources=[self.references],
            rate_limiter=rate_limiter,
            clock=self.ctx.clock,
            failure_reporter=ReconcileFailureReporter(self.ctx, AUTOSCALING_LISTENERS),
            self_reported=(ConfigurationError,),  # its own condition and Event (see reconcile)
        )

    def _runner_set_to_listeners(self, obj: Object) -> Iterable[Request]:
        """An EphemeralRunnerSet concerns the listeners that scale it (whose state it carries)."""
        view = ObjectView(obj)
        listeners = self.listeners.by_index(INDEX_RUNNER_SET, f"{view.namespace}/{view.name}")
        return [Request.for_object(listener) for listener in listeners]

    # -- the pass -------------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        key = str(request)
        obj = self.listeners.get(request.namespace, request.name)
        if obj is None:
            self.backoff.forget(key)
            self.references.forget(request)
            self._predecessor_state.pop(key, None)
            self._written_status.pop(key, None)
            return Result()
        try:
            listener = AutoscalingListener.from_object(obj)
        except pydantic.ValidationError as exc:
            raise InvalidSpec(f"AutoscalingListener {key} cannot be read: {exc.errors()[:1]}") from None
        view = AutoscalingListenerView(obj)
        if view.is_deleting:
            return await self._delete(obj, listener)
        controller_namespace = self.ctx.settings.controller_namespace
        refusal = listener_refusal(obj, controller_namespace=controller_namespace, scale_set=None)
        if refusal is not None:
            # Outside the controller namespace: refused before anything its spec names is read.
            return await self._refuse(obj, listener, refusal)
        if not has_finalizer(obj, AUTOSCALING_LISTENER_FINALIZER):
            await add_finalizer(self.ctx.kube, AUTOSCALING_LISTENERS, obj, AUTOSCALING_LISTENER_FINALIZER)
            return Result()
        scale_set = await self._scale_set(listener, claimed_uid=view.annotation(ANNOTATION_AUTOSCALING_RUNNER_SET_UID))
        if scale_set is None:
            log.info("AutoscalingListener %s: its AutoscalingRunnerSet is gone; deleting it", key)
            with contextlib.suppress(NotFound):
                await self.ctx.kube.delete(AUTOSCALING_LISTENERS, listener.name, namespace=listener.namespace)
            return Result()
        if view.annotation(ANNOTATION_RUNNER_SPEC_HASH):
            log.debug("AutoscalingListener %s was made by ARC's controller; it is being replaced", key)
            return Result()
        refusal = listener_refusal(obj, controller_namespace=controller_namespace, scale_set=scale_set)
        if refusal is not None:
            return await self._refuse(obj, listener, refusal)
        report = ListenerReport(
            generation=view.generation,
            pod_running=listener_running(self.pods.get(listener.namespace, listener_pod_name(listener.name)) or {}),
        )
        try:
            listener = with_scale_set_credentials(listener, _parse_scale_set(scale_set))
            self.references.track(request, listener_references(listener))
            await self._check_template(obj, listener)
            await self._service_account(obj, listener)
            await self._role(obj, listener)
            await self._role_binding(obj, listener)
            proxy_version = await self._proxy_secret(obj, listener) if listener.spec.proxy is not None else ""
            config_version = await self._config_secret(obj, listener)
            # The pod reads its proxy from the proxy Secret only when it starts (env from secretKeyRef): a
            # rotated proxy credential reaches the listener only through a new pod, so the proxy Secret's
            # version is part of the stamp (issue 17; ARC never updates that Secret at all).
            stamp = f"{config_version}+{proxy_version}" if proxy_version else config_version
            result = await self._pod(obj, listener, stamp, report)
            if uses_vault(listener):
                # Nothing watches a vault: read it again every interval (a changed secret changes the stamp).
                interval = self.ctx.settings.vault_refresh_interval
                if result.requeue_after is None or result.requeue_after > interval:
                    result = Result(requeue_after=interval)
            return result
        except ConfigurationError as exc:
            report.problem = (exc.reason, exc.message)
            if isinstance(exc, REFUSALS):
                report.refused = True
                await self._withdraw(obj, listener, credentials=False)
            await self._warn(obj, listener, exc.reason, exc.message, action="Configure")
            raise
        except Conflict:
            return Result(requeue_after=CONFLICT_REQUEUE_SECONDS)
        except asyncio.CancelledError:
            # Stopping (possibly because leadership was lost): another process may already own the status.
            report.cancelled = True
            raise
        except Exception as exc:
            # Retried by the controller, which reports it once it persists: the status says the same by then.
            report.failed, report.failure = True, pass_failure(exc)
            raise
        finally:
            if not report.cancelled:
                report.restarts = self.backoff.state(key, now=self.ctx.clock.monotonic())
                await self._write_status(obj, report)

    async def _scale_set(self, listener: AutoscalingListener, *, claimed_uid: str) -> Object | None:
        """The live AutoscalingRunnerSet the spec names (``None``: it does not exist).

        The cached copy when it has the UID the listener claims; otherwise as the API has it now, since the cache
        may not have seen it (or its replacement) yet: never delete or refuse on the strength of a cache miss.
        """
        namespace = listener.spec.autoscaling_runner_set_namespace
        name = listener.spec.autoscaling_runner_set_name
        cached = self.scale_sets.get(namespace, name)
        if cached is not None and claimed_uid and ObjectView(cached).uid == claimed_uid:
            return cached
        try:
            return await self.ctx.kube.get(AUTOSCALING_RUNNER_SETS, name, namespace=namespace)
        except NotFound:
            return None

    async def _refuse(self, obj: Object, listener: AutoscalingListener, refusal: Refusal) -> Result:
        """A listener that is not served: what it was given is withdrawn, and ``Degraded`` and a Warning Event on
        it (not on the scale set its spec names: that spec is not trusted) say why.

        Not requeued: an edit of the listener, or its replacement by its scale set's controller, brings it back.
        """
        log.warning("AutoscalingListener %s/%s is not served: %s", listener.namespace, listener.name, refusal.message)
        await self.ctx.events.event(obj, type="Warning", reason=refusal.reason, note=refusal.message, action="Refuse")
        report = ListenerReport(
            generation=AutoscalingListenerView(obj).generation,
            problem=(refusal.reason, refusal.message),
            refused=True,
        )
        await self._write_status(obj, report)
        await self._withdraw(obj, listener, credentials=True)
        return Result()

    async def _withdraw(self, obj: Object, listener: AutoscalingListener, *, credentials: bool) -> None:
        """Delete this listener's pod and, with ``credentials``, its config and proxy Secrets: only objects this
        listener controls (by UID), so nothing of anybody else's is touched.

        Best effort: outside the controller namespace the controller may lack the permission (a listener there
        got nothing from this version; this cleans up after an earlier one), and the refusal stands either way.
        """
        namespace = listener.namespace
        try:
            pod = self.pods.get(namespace, listener_pod_name(listener.name))
            if pod is not None and is_controlled_by(pod, obj) and not ObjectView(pod).is_deleting:
                await self._delete_pod(namespace, ObjectView(pod).name, uid=ObjectView(pod).uid)
                self.ctx.metrics.set_listener_running(
                    scale_set_labels(listener.name, namespace, listener.metadata.labels), False
                )
            if not credentials:
                return
            for name in (listener_config_secret_name(listener.name), listener_proxy_secret_name(listener.name)):
                secret = await get_or_none(self.ctx.kube, SECRETS, namespace, name)
                if secret is not None and is_controlled_by(secret, obj):
                    with contextlib.suppress(NotFound, Conflict):
                        await self.ctx.kube.delete(
                            SECRETS, name, namespace=namespace, preconditions=Preconditions(uid=ObjectView(secret).uid)
                        )
        except Forbidden as exc:
            log.warning(
                "AutoscalingListener %s/%s: cannot withdraw what it was given: %s", namespace, listener.name, exc
            )

    async def _check_template(self, obj: Object, listener: AutoscalingListener) -> None:
        """Refuse a listener whose pod or ServiceAccount the policies do not allow (:mod:`.template_policy`,
        :mod:`.metadata_policy`), naming every field, before anything is written.

        A reference the scale set does not own is allowed when the object exists in the controller namespace
        with the shareable label; the lookup reads only that label (an object the controller may not read is
        not shareable).
        """
        settings = self.ctx.settings
        policy = ListenerPolicy.from_settings(settings)
        template = listener.spec.template
        pod = self._desired_pod(obj, listener, config_version="")
        spec = listener.spec
        allowed = own_references(
            listener_name=listener.name,
            scale_set_namespace=spec.autoscaling_runner_set_namespace,
            controller_namespace=listener.namespace,
            github_config_secret=spec.github_config_secret,
            proxy=spec.proxy,
            tls=spec.github_server_tls,
            pull_secrets=settings.image_pull_secrets,
        )
        shareable: set[tuple[Kind, str]] = set()
        for kind, name in {(ref.kind, ref.name) for ref in references(template) if not allowed.permits(ref)}:
            try:
                found = await get_or_none(
                    self.ctx.kube, SECRETS if kind == "Secret" else CONFIG_MAPS, listener.namespace, name
                )
            except Forbidden:
                found = None
            if found is not None and is_shareable(found):
                shareable.add((kind, name))
        violations = check_listener_template(template, pod=pod, allowed=allowed.including(shareable), policy=policy)
        if violations:
            raise InvalidListenerTemplate(refusal_message(violations))
        refused_metadata = listener_metadata_violations(
            service_account=spec.service_account_metadata, pod=pod, template=template, rules=policy.metadata
        )
        if refused_metadata:
            raise ForbiddenListenerMetadata(refusal_message(refused_metadata))

    def _desired_pod(self, obj: Object, listener: AutoscalingListener, *, config_version: str) -> dict[str, Any]:
        """The listener pod with this controller's settings (:func:`.pod.desired_listener_pod`)."""
        settings = self.ctx.settings
        return desired_listener_pod(
            obj,
            listener,
            command=settings.listener_entrypoint,
            metrics_port=settings.listener_metrics_port,
            config_resource_version=config_version,
            probe_port=dedicated_probe_port(
                settings.listener_metrics_addr if settings.listener_metrics_enabled else ""
            ),
        )

    # -- children -------------------------------------------------------------------------------------

    async def _ensure(
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
        otherwise :class:`ObjectInTheWay`, and it is left untouched.
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
        await self._ensure(SERVICE_ACCOUNTS, desired, live, owner=obj)

    async def _role(self, obj: Object, listener: AutoscalingListener) -> None:
        desired = desired_role(listener, excluded=self.ctx.settings.exclude_label_prefixes)
        live = self.roles.get(*ObjectView(desired).key)
        await self._ensure(ROLES, desired, live, owner=obj, replace=("rules",))

    async def _role_binding(self, obj: Object, listener: AutoscalingListener) -> None:
        desired = desired_role_binding(listener, excluded=self.ctx.settings.exclude_label_prefixes)
        live = self.role_bindings.get(*ObjectView(desired).key)
        await self._ensure(ROLE_BINDINGS, desired, live, owner=obj, replace=("subjects",))

    async def _proxy_secret(self, obj: Object, listener: AutoscalingListener) -> str:
        """Bring the listener's proxy Secret in line; returns its resourceVersion (part of the pod's stamp)."""
        assert listener.spec.proxy is not None
        data = await proxy_secret_data(
            self.ctx.kube, listener.spec.autoscaling_runner_set_namespace, listener.spec.proxy
        )
        desired = desired_proxy_secret(obj, listener, data, excluded=self.ctx.settings.exclude_label_prefixes)
        live = await get_or_none(self.ctx.kube, SECRETS, listener.namespace, ObjectView(desired).name)
        if live is not None and data_differs(live, desired):
            stored = await self._ensure(SECRETS, desired, live, owner=obj, replace=("data",))
        else:
            stored = await self._ensure(SECRETS, desired, live, owner=obj)
        return ObjectView(stored).resource_version

    async def _config_secret(self, obj: Object, listener: AutoscalingListener) -> str:
        """Bring the config Secret in line; returns its resourceVersion (the pod is stamped with it).

        With a vault too the Secret holds the credentials (read by the controller): a rotation in the vault
        rewrites it, and its new version recreates the listener.
        """
        ctx = self.ctx
        scale_set_namespace = listener.spec.autoscaling_runner_set_namespace
        app_config = await ctx.github.app_config(
            namespace=scale_set_namespace,
            secret_name=listener.spec.github_config_secret,
            vault=listener.spec.vault_config,
            config_url=listener.spec.github_config_url,
        )
        root_ca = await ctx.github.root_ca_pem(namespace=scale_set_namespace, tls=listener.spec.github_server_tls)
        config = listener_config(listener, app_config=app_config, server_root_ca=root_ca, settings=ctx.settings)
        desired = desired_config_secret(obj, listener, config, excluded_prefixes=ctx.settings.exclude_label_prefixes)
        live = await get_or_none(self.ctx.kube, SECRETS, listener.namespace, ObjectView(desired).name)
        changed = live is not None and data_differs(live, desired)
        stored = await self._ensure(SECRETS, desired, live, owner=obj, replace=("data",) if changed else ())
        if changed:
            await self._event(
                obj,
                "ListenerConfigUpdated",
                f"listener config Secret {ObjectView(desired).name} updated",
                action="Update",
            )
        return ObjectView(stored).resource_version

    # -- the pod --------------------------------------------------------------------------------------

    async def _pod(
        self, obj: Object, listener: AutoscalingListener, config_version: str, report: ListenerReport
    ) -> Result:
        """Steps of the pod; records in ``report.pod`` what it found (for the ``Ready`` condition)."""
        ctx = self.ctx
        key = f"{listener.namespace}/{listener.name}"
        metric_labels = scale_set_labels(listener.name, listener.namespace, listener.metadata.labels)
        desired = self._desired_pod(obj, listener, config_version=config_version)
        name = ObjectView(desired).name
        live = self.pods.get(listener.namespace, name)
        now = ctx.clock.monotonic()
        foreign = None if live is None else foreign_reason("Pod", live, obj)
        if foreign is not None:
            # Not ours: never deleted, recreated or merged into (it may be anybody's pod of that name).
            raise ObjectInTheWay(foreign)

        if live is None:
            ctx.metrics.set_listener_running(metric_labels, False)
            remaining = self.backoff.remaining(key, now=now)
            if remaining > 0:
                report.pod = backoff_readiness(self.backoff.state(key, now=now))
                return Result(requeue_after=remaining)
            # Whatever state the set carries now was written by an earlier listener, not by this pod's.
            self._predecessor_state[key] = state_annotation(self._runner_set(listener))
            try:
                await ctx.kube.create(PODS, desired, namespace=listener.namespace)
            except AlreadyExists:
                # The cache holds only pods with the children's label (cmd/controller_setup.py): a pod under this
                # name that the cache does not show may be nobody's of ours. Look before trying again.
                existing = await get_or_none(ctx.kube, PODS, listener.namespace, name)
                foreign = None if existing is None else foreign_reason("Pod", existing, obj)
                if foreign is not None:
                    raise ObjectInTheWay(foreign) from None
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

        await self._ensure(PODS, desired, live, owner=obj)
        running = listener_running(live)
        report.pod = self._running_readiness(listener, live) if running else pending_readiness(live)
        ctx.metrics.set_listener_running(metric_labels, running)
        # The referenced Secrets and ConfigMaps are watched (self.references); this pass every interval is the
        # fallback where that watch is not allowed (RBAC) or not running yet.
        return Result(requeue_after=ctx.settings.scale_set_verify_interval)

    def _runner_set(self, listener: AutoscalingListener) -> Object | None:
        spec = listener.spec
        return self.runner_sets.get(spec.autoscaling_runner_set_namespace, spec.ephemeral_runner_set_name)

    def _running_readiness(self, listener: AutoscalingListener, pod: Object) -> PodReadiness:
        """``Ready`` of a running listener container: what its listener reports (:mod:`.listener_health`)."""
        key = f"{listener.namespace}/{listener.name}"
        runner_set = self._runner_set(listener)
        predecessor = self._predecessor_state.get(key)
        if predecessor is not None and state_annotation(runner_set) != predecessor:
            del self._predecessor_state[key]  # the new listener has spoken
            predecessor = None
        state = reported_state(runner_set, pod=pod, predecessor=predecessor)
        where = f"{listener.spec.autoscaling_runner_set_namespace}/{listener.spec.ephemeral_runner_set_name}"
        return listener_readiness(ObjectView(pod).name, where, state)

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
        remaining = await delete_children(self.ctx.kube, self._child_caches, obj, listener)
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
        The conditions are derived from what this process last wrote when the cache still shows the object it
        was computed from (the write has not come back through the watch yet), so an outage's start or end is
        announced once (:func:`.status.outage_event`), on the listener and on its AutoscalingRunnerSet.
        """
        view = AutoscalingListenerView(obj)
        key = f"{view.namespace}/{view.name}"
        stored: list[dict[str, Any]] = [dict(condition) for condition in view.conditions]
        written = self._written_status.get(key)
        if written is not None and written[0] == view.resource_version:
            stored = written[1]
        now = self.ctx.clock.now()
        conditions = derive_conditions(stored, report, now=now)
        patch = status_patch({"conditions": stored}, conditions)
        if not patch:
            return
        try:
            await self.ctx.kube.patch(
                AUTOSCALING_LISTENERS,
                view.name,
                {"status": patch},
                namespace=view.namespace,
                subresource="status",
            )
        except NotFound:
            return
        self._written_status[key] = (view.resource_version, conditions)
        event = outage_event(stored, conditions, now=now)
        if event is not None:
            kind, reason, note = event
            await self.ctx.events.event(obj, type=kind, reason=reason, note=note, action="Listen")
            scale_set = self.scale_sets.get(view.scale_set_namespace, view.scale_set_name)
            if scale_set is not None:
                await self.ctx.events.event(
                    scale_set, type=kind, reason=reason, note=f"listener {key}: {note}", action="Listen"
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


def _parse_scale_set(obj: Object) -> AutoscalingRunnerSet:
    try:
        return AutoscalingRunnerSet.from_object(obj)
    except pydantic.ValidationError as exc:
        view = ObjectView(obj)
        raise InvalidSpec(
            f"AutoscalingRunnerSet {view.namespace}/{view.name} cannot be read: {exc.errors()[:1]}"
        ) from None


def setup_autoscaling_listener_controller(
    ctx: ControllerContext, *, rate_limiter: RateLimiter | None = None
) -> Controller:
    """Build the AutoscalingListener controller and register it with the context's manager."""
    controller = AutoscalingListenerReconciler(ctx).controller(rate_limiter=rate_limiter)
    ctx.manager.add(controller)
    return controller
