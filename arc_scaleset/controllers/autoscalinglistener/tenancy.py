"""The tenancy steps of an AutoscalingListener pass (docs/controllers.md, "Tenancy"): which listeners are served,
what a refused one loses, and the ``listenerTemplate`` and metadata policies.

The decisions are pure, in :mod:`.ownership`, :mod:`.template_policy` and :mod:`.metadata_policy`; this module
reads what they need and executes what they decide.
"""

from __future__ import annotations

import logging

from arc_scaleset.api.listener_standby import standby_pod_names
from arc_scaleset.api.naming import listener_config_secret_name, listener_pod_name, listener_proxy_secret_name
from arc_scaleset.controllers.autoscalinglistener.deletion import delete_owned, get_or_none
from arc_scaleset.controllers.autoscalinglistener.errors import ForbiddenListenerMetadata, InvalidListenerTemplate
from arc_scaleset.controllers.autoscalinglistener.events import ListenerEvents
from arc_scaleset.controllers.autoscalinglistener.metadata_policy import listener_metadata_violations
from arc_scaleset.controllers.autoscalinglistener.ownership import Refusal, listener_refusal
from arc_scaleset.controllers.autoscalinglistener.pod import configured_listener_pod
from arc_scaleset.controllers.autoscalinglistener.scope import ListenerPass
from arc_scaleset.controllers.autoscalinglistener.status import ListenerReport
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
from arc_scaleset.controllers.metrics import scale_set_labels
from arc_scaleset.kube.controller import Result
from arc_scaleset.kube.errors import Forbidden
from arc_scaleset.kube.manager import Cache
from arc_scaleset.kube.ownerrefs import is_controlled_by
from arc_scaleset.kube.resources import CONFIG_MAPS, PODS, SECRETS
from arc_scaleset.kube.views import ObjectView

log = logging.getLogger(__name__)


class Tenancy:
    """Refuses listeners that are not served, withdraws what they were given, and checks their templates."""

    def __init__(self, ctx: ControllerContext, *, pods: Cache, events: ListenerEvents) -> None:
        self.ctx = ctx
        self.pods = pods
        self.events = events

    async def refuse_unless_served(self, scope: ListenerPass) -> Result | None:
        """The phase that refuses a listener that is not served (:func:`.ownership.listener_refusal`): run before
        the finalizer, when only its namespace is known, and again once its scale set is found (``scope.scale_set``),
        when the scale set's UID must be the one it claims."""
        controller_namespace = self.ctx.settings.controller_namespace
        refusal = listener_refusal(scope.obj, controller_namespace=controller_namespace, scale_set=scope.scale_set)
        return None if refusal is None else await self._refuse(scope, refusal)

    async def _refuse(self, scope: ListenerPass, refusal: Refusal) -> Result:
        """A listener that is not served: what it was given is withdrawn, and ``Degraded`` and a Warning Event on
        it (not on the scale set its spec names: that spec is not trusted) say why.

        Not requeued: an edit of the listener, or its replacement by its scale set's controller, brings it back.
        """
        log.warning("AutoscalingListener %s is not served: %s", scope.key, refusal.message)
        await self.events.on_listener(scope.obj, "Warning", refusal.reason, refusal.message, action="Refuse")
        scope.report = ListenerReport(
            generation=scope.view.generation, problem=(refusal.reason, refusal.message), refused=True
        )
        await self.withdraw(scope, credentials=True)
        return Result()

    async def withdraw(self, scope: ListenerPass, *, credentials: bool) -> None:
        """Delete this listener's pod (with a standby, both) and, with ``credentials``, its config and proxy
        Secrets: only objects this listener controls (by UID), so nothing of anybody else's is touched.

        Best effort: outside the controller namespace the controller may lack the permission (a listener there
        got nothing from this version; this cleans up after an earlier one), and the refusal stands either way.
        """
        obj, listener = scope.obj, scope.listener
        namespace, kube = listener.namespace, self.ctx.kube
        try:
            # Both pods of a standby pair (the second exists only for a listener that has had a standby).
            for name in standby_pod_names(listener_pod_name(listener.name)):
                pod = self.pods.get(namespace, name)
                if pod is not None and is_controlled_by(pod, obj) and not ObjectView(pod).is_deleting:
                    await delete_owned(kube, PODS, namespace, name, uid=ObjectView(pod).uid)
                    labels = scale_set_labels(listener.name, namespace, listener.metadata.labels)
                    self.ctx.metrics.set_listener_running(labels, False)
            if not credentials:
                return
            for name in (listener_config_secret_name(listener.name), listener_proxy_secret_name(listener.name)):
                secret = await get_or_none(kube, SECRETS, namespace, name)
                if secret is not None and is_controlled_by(secret, obj):
                    await delete_owned(kube, SECRETS, namespace, name, uid=ObjectView(secret).uid)
        except Forbidden as exc:
            log.warning("AutoscalingListener %s: cannot withdraw what it was given: %s", scope.key, exc)

    async def check_template(self, scope: ListenerPass) -> None:
        """The phase before anything is written: refuse a listener whose pod or ServiceAccount the policies do not
        allow (:mod:`.template_policy`, :mod:`.metadata_policy`), naming every field.

        A reference the scale set does not own is allowed when the object exists in the controller namespace
        with the shareable label; the lookup reads only that label (an object the controller may not read is
        not shareable).
        """
        settings, listener = self.ctx.settings, scope.listener
        policy = ListenerPolicy.from_settings(settings)
        template, spec = listener.spec.template, listener.spec
        pod = configured_listener_pod(scope.obj, listener, settings, config_version="")
        allowed = own_references(
            listener_name=listener.name,
            scale_set_namespace=spec.autoscaling_runner_set_namespace,
            controller_namespace=listener.namespace,
            github_config_secret=spec.github_config_secret,
            proxy=spec.proxy,
            tls=spec.github_server_tls,
            pull_secrets=settings.image_pull_secrets,
        )
        unowned = {(ref.kind, ref.name) for ref in references(template) if not allowed.permits(ref)}
        shareable = {(kind, name) for kind, name in unowned if await self._is_shareable(scope, kind, name)}
        violations = check_listener_template(template, pod=pod, allowed=allowed.including(shareable), policy=policy)
        if violations:
            raise InvalidListenerTemplate(refusal_message(violations))
        refused_metadata = listener_metadata_violations(
            service_account=spec.service_account_metadata, pod=pod, template=template, rules=policy.metadata
        )
        if refused_metadata:
            raise ForbiddenListenerMetadata(refusal_message(refused_metadata))

    async def _is_shareable(self, scope: ListenerPass, kind: Kind, name: str) -> bool:
        """Whether the ``kind`` ``name`` of the controller namespace is marked shareable (unreadable: it is not)."""
        resource = SECRETS if kind == "Secret" else CONFIG_MAPS
        try:
            found = await get_or_none(self.ctx.kube, resource, scope.listener.namespace, name)
        except Forbidden:
            return False
        return found is not None and is_shareable(found)
