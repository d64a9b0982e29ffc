"""The membership step of an AutoscalingListener pass: a listener served by a shared listener (docs/listener.md,
"Shared listener"; docs/controllers.md, "Shared listeners").

A member has no pod, ServiceAccount, Role, RoleBinding or config Secret of its own: its group's reconciler
(controllers/sharedlistener) keeps those. What stays per set is done here, in place of the children and pod
steps:

- :meth:`Membership.serve`: the listener's ``config.json``, built as for a listener of its own (with its scale
  set's credentials), is published under its own key of the group's config Secret, one key patched at a time, so
  the members never overwrite each other and a change of one reaches only that one member's session. ``Ready``
  comes from the group's pod and from what this set's listener reports on its EphemeralRunnerSet, as for a pod of
  its own, and names the group's pod. A non-member (no group label) goes on to the per-set steps.
- :meth:`Membership.leave`: a deleting member's key is removed before its finalizer goes, so its session ends
  before its scale set's EphemeralRunnerSet can; :meth:`Membership.withdraw` removes a refused member's.

The group label is only an index: a listener whose label is not the group its scale set makes
(:func:`.group_membership.trusted_group`) publishes nothing and waits for the AutoscalingRunnerSet controller,
which replaces a listener whose group changed.
"""

from __future__ import annotations

import base64
from typing import Final

from arc_scaleset.api.listener_group import LABEL_GROUP, group_object_name, member_key
from arc_scaleset.controllers.autoscalinglistener.config import uses_vault
from arc_scaleset.controllers.autoscalinglistener.deletion import get_or_none
from arc_scaleset.controllers.autoscalinglistener.errors import ObjectInTheWay
from arc_scaleset.controllers.autoscalinglistener.group_membership import labelled_group, trusted_group
from arc_scaleset.controllers.autoscalinglistener.restart import listener_running
from arc_scaleset.controllers.autoscalinglistener.scope import ListenerPass
from arc_scaleset.controllers.autoscalinglistener.status import (
    REASON_POD_PENDING,
    REASON_RECREATING,
    PodReadiness,
    pending_readiness,
)
from arc_scaleset.controllers.autoscalinglistener.steps import ListenerSteps
from arc_scaleset.controllers.metrics import scale_set_labels
from arc_scaleset.kube.controller import Result
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.resources import SECRETS
from arc_scaleset.kube.views import ObjectView

GROUP_WAIT_SECONDS: Final = 1.0
"""How soon a member looks again while its group's config Secret is not made yet (its reconciler makes it as
soon as it sees the member)."""


class Membership(ListenerSteps):
    """The steps of a member listener; :meth:`serve` and :meth:`leave` are phases of the reconciler."""

    async def serve(self, scope: ListenerPass) -> Result | None:
        """The phase: ``None`` for a listener of its own (the per-set steps follow); for a member, its config
        published under its key and ``Ready`` from its group's pod."""
        group = labelled_group(scope.obj)
        if group is None:
            return None
        assert scope.scale_set is not None
        assert scope.report is not None
        name = group_object_name(group)
        if trusted_group(scope.obj, scope.scale_set) != group:
            why = "its scale set's shared-listener group changed; waiting for the scale set's controller to replace it"
            scope.report.pod = PodReadiness(False, REASON_RECREATING, f"AutoscalingListener {scope.key}: {why}")
            return Result()
        if not await self._publish(scope, name):
            message = f"waiting for the shared listener's config Secret {name}"
            scope.report.pod = PodReadiness(False, REASON_POD_PENDING, message)
            return Result(requeue_after=GROUP_WAIT_SECONDS)
        scope.report.pod = self._readiness(scope, self.pods.get(scope.view.namespace, name), name)
        interval = self.ctx.settings.scale_set_verify_interval
        if uses_vault(scope.listener):
            # Nothing watches a vault: read it again every interval (the config is published anew when it changed).
            interval = min(interval, self.ctx.settings.vault_refresh_interval)
        return Result(requeue_after=interval)

    async def leave(self, scope: ListenerPass) -> None:
        """The phase before the deletion step: a deleting member's key removed from its group's config Secret."""
        if scope.view.is_deleting:
            await self.withdraw(scope)

    async def withdraw(self, scope: ListenerPass) -> None:
        """A member's key removed from its group's config Secret (a no-op for a listener of its own): it is
        deleting, or refused (a refused listener gets no session, as it would get no pod of its own)."""
        group = labelled_group(scope.obj)
        if group is None:
            return
        name, key = group_object_name(group), member_key(scope.view.name)
        secret = await self._group_secret(scope, name)
        if secret is not None and key in (secret.get("data") or {}) and _is_group_object(secret, group):
            await self._patch_key(scope, name, key, None)

    async def _publish(self, scope: ListenerPass, name: str) -> bool:
        """Write the member's config under its key (only when it differs); False: the Secret is not made yet.

        A JSON merge patch of one key: the other members' keys are neither read back nor rewritten, so members
        publishing at once never conflict.
        """
        group, namespace = ObjectView(scope.obj).labels[LABEL_GROUP], scope.view.namespace
        config = await self.children.config(scope)
        value = base64.b64encode(config.to_json()).decode("ascii")
        secret = await self._group_secret(scope, name)
        if secret is None:
            return False
        if not _is_group_object(secret, group):
            raise ObjectInTheWay(
                f"Secret {namespace}/{name} exists but is not shared listener {group}'s (no {LABEL_GROUP} label"
                " naming it); it is left untouched: delete or rename it"
            )
        key, published = member_key(scope.view.name), (secret.get("data") or {})
        if published.get(key) == value:
            return True
        if key not in published:
            # Whatever state the set carries now was written by an earlier listener, not by this member.
            self.health.remember_predecessor(scope)
        await self._patch_key(scope, name, key, value)
        note = f"listener config published in shared listener Secret {name} (key {key})"
        await self.events.normal(scope.obj, "ListenerConfigUpdated", note, action="Update")
        return True

    async def _group_secret(self, scope: ListenerPass, name: str) -> Object | None:
        """The group's config Secret, read once per change (the controller namespace's, where the member is)."""
        secrets = self.ctx.group_secrets
        if secrets.namespace != scope.view.namespace:  # a member outside the controller namespace is refused
            return await get_or_none(self.ctx.kube, SECRETS, scope.view.namespace, name)
        return await secrets.get(name)

    async def _patch_key(self, scope: ListenerPass, name: str, key: str, value: str | None) -> None:
        """A JSON merge patch of the member's one key (``None``: removed); the answer kept for the next reads."""
        patched = await self.ctx.kube.patch(SECRETS, name, {"data": {key: value}}, namespace=scope.view.namespace)
        if self.ctx.group_secrets.namespace == scope.view.namespace:
            self.ctx.group_secrets.written(patched)

    def _readiness(self, scope: ListenerPass, pod: Object | None, name: str) -> PodReadiness:
        running = pod is not None and listener_running(pod)
        listener = scope.listener
        labels = scale_set_labels(listener.name, listener.namespace, listener.metadata.labels)
        self.ctx.metrics.set_listener_running(labels, running)
        if pod is None:
            return PodReadiness(False, REASON_POD_PENDING, f"waiting for shared listener pod {name}")
        return self.health.running_readiness(scope, pod) if running else pending_readiness(pod)


def _is_group_object(obj: Object, group: str) -> bool:
    return ObjectView(obj).labels.get(LABEL_GROUP) == group
