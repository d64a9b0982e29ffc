"""Deleting an AutoscalingRunnerSet, in order (docs/controllers.md):

1. its AutoscalingListener(s) in the controller namespace (the listener stops taking jobs first): only its
   own (:mod:`.ownership`), never another scale set's listener under the same name;
2. its EphemeralRunnerSets, found by owner reference whatever their names (ARC's are generated; a scale set
   moved from ARC may have several), and the one named after it unless it names another owner (each set's
   controller removes every runner; busy runners block until their job ends);
3. the scale set on GitHub (a 404 means already gone), then the ``runner-scale-set-id`` annotation;
4. the ``actions.github.com/cleanup-protection`` finalizer of each object a ``cleanup-*`` annotation names
   (the Helm-created secret and RBAC), in ARC's order;
5. the ARS finalizer.

Each step waits for the previous one: a step that is not done ends the pass (the children's deletion
events, or a short requeue, bring it back). Failures are reported as a condition-free Warning Event and
retried with backoff; the finalizer is only removed once everything above is done.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS, AutoscalingRunnerSet
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import (
    ANNOTATION_CLEANUP_GITHUB_SECRET_NAME,
    ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_BINDING_NAME,
    ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_NAME,
    ANNOTATION_CLEANUP_KUBERNETES_MODE_SERVICE_ACCOUNT_NAME,
    ANNOTATION_CLEANUP_MANAGER_ROLE_BINDING,
    ANNOTATION_CLEANUP_MANAGER_ROLE_NAME,
    ANNOTATION_CLEANUP_NO_PERMISSION_SERVICE_ACCOUNT_NAME,
    ANNOTATION_RUNNER_SCALE_SET_ID,
    AUTOSCALING_RUNNER_SET_FINALIZER,
    CLEANUP_PROTECTION_FINALIZER,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
)
from arc_scaleset.api.naming import ephemeral_runner_set_name
from arc_scaleset.api.runner_sets import runner_sets_of
from arc_scaleset.controllers.autoscalingrunnerset.desired import listener_name_of, scale_set_id_of
from arc_scaleset.controllers.autoscalingrunnerset.ownership import listener_is_own, runner_sets_to_delete
from arc_scaleset.controllers.autoscalingrunnerset.registration import scale_set_client
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.github import ActionsError, NotFound
from arc_scaleset.kube.client import Preconditions
from arc_scaleset.kube.controller import Result
from arc_scaleset.kube.errors import Conflict, Forbidden
from arc_scaleset.kube.errors import NotFound as KubeNotFound
from arc_scaleset.kube.finalizers import has_finalizer, patch_out_finalizers, remove_finalizer
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.manager import NamespaceNotCachedError
from arc_scaleset.kube.ownerrefs import Owner
from arc_scaleset.kube.resources import ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS, Resource
from arc_scaleset.kube.views import ObjectView

log = logging.getLogger(__name__)

REQUEUE_SECONDS: Final = 5.0

CLEANUP_PROTECTED: Final[Sequence[tuple[str, Resource]]] = (
    (ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_BINDING_NAME, ROLE_BINDINGS),
    (ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_NAME, ROLES),
    (ANNOTATION_CLEANUP_KUBERNETES_MODE_SERVICE_ACCOUNT_NAME, SERVICE_ACCOUNTS),
    (ANNOTATION_CLEANUP_NO_PERMISSION_SERVICE_ACCOUNT_NAME, SERVICE_ACCOUNTS),
    (ANNOTATION_CLEANUP_GITHUB_SECRET_NAME, SECRETS),
    (ANNOTATION_CLEANUP_MANAGER_ROLE_BINDING, ROLE_BINDINGS),
    (ANNOTATION_CLEANUP_MANAGER_ROLE_NAME, ROLES),
)
"""The objects whose cleanup-protection finalizer is removed, in ARC's order: (annotation, resource)."""
MANAGER_CACHED: Final = frozenset({ROLES, ROLE_BINDINGS, SERVICE_ACCOUNTS})
"""Kinds the manager caches anyway (the AutoscalingListener controller watches them)."""


def cleanup_targets(annotations: Mapping[str, str] | None) -> list[tuple[Resource, str]]:
    """The (resource, name) of each cleanup-protected object the ARS names, in removal order."""
    found = annotations or {}
    return [(resource, found[key]) for key, resource in CLEANUP_PROTECTED if found.get(key)]


async def reconcile_deletion(ctx: ControllerContext, obj: Object) -> Result:
    """One pass of the deletion sequence; returns when a step is not done yet."""
    if not has_finalizer(obj, AUTOSCALING_RUNNER_SET_FINALIZER):
        return Result()
    view = ObjectView(obj)
    namespace, name = view.namespace, view.name

    if not await _listeners_gone(ctx, obj):
        return Result(requeue_after=REQUEUE_SECONDS)
    if not await _runner_sets_gone(ctx, obj):
        return Result(requeue_after=REQUEUE_SECONDS)
    if not await _scale_set_gone(ctx, obj):
        return Result()  # the annotation patch brings the key back
    for resource, target in cleanup_targets(view.annotations):
        await _remove_cleanup_protection(ctx, resource, namespace, target)
    await remove_finalizer(ctx.kube, AUTOSCALING_RUNNER_SETS, obj, AUTOSCALING_RUNNER_SET_FINALIZER)
    log.info("AutoscalingRunnerSet %s/%s: cleanup done, finalizer removed", namespace, name)
    return Result()


async def _listeners_gone(ctx: ControllerContext, obj: Object) -> bool:
    view, owner = ObjectView(obj), Owner.of(obj)
    controller_namespace = ctx.settings.controller_namespace
    listeners = ctx.cache(AUTOSCALING_LISTENERS)
    found = [
        listener
        for listener in listeners.by_label(LABEL_SCALE_SET_NAME, view.name)
        if ObjectView(listener).label(LABEL_SCALE_SET_NAMESPACE) == view.namespace
    ]
    # An unreadable spec leaves only the labelled listeners to find.
    with contextlib.suppress(ValueError):
        named = listeners.get(controller_namespace, listener_name_of(AutoscalingRunnerSet.from_object(obj)))
        if named is not None:
            found.append(named)
    # Only this scale set's own: a listener under its name may be another scale set's (ownership.py).
    own = {
        ObjectView(listener).name: ObjectView(listener).uid
        for listener in found
        if ObjectView(listener).namespace == controller_namespace and listener_is_own(listener, owner)
    }
    gone = True
    for listener_name, uid in sorted(own.items()):
        deleted = await _delete_unless_deleting(
            ctx, AUTOSCALING_LISTENERS, controller_namespace, listener_name, uid=uid
        )
        gone = deleted and gone
    return gone


async def _runner_sets_gone(ctx: ControllerContext, obj: Object) -> bool:
    view, owner = ObjectView(obj), Owner.of(obj)
    sets = ctx.cache(EPHEMERAL_RUNNER_SETS)
    own = runner_sets_of(sets, owner)
    name = ephemeral_runner_set_name(view.name)
    gone = True
    for set_name in runner_sets_to_delete(owner, own, sets.get(view.namespace, name), name=name):
        gone = await _delete_unless_deleting(ctx, EPHEMERAL_RUNNER_SETS, view.namespace, set_name) and gone
    return gone


async def _delete_unless_deleting(
    ctx: ControllerContext, resource: Resource, namespace: str, name: str, *, uid: str = ""
) -> bool:
    """Ask for the deletion of a child (an AutoscalingListener or EphemeralRunnerSet); True when it is gone.
    With ``uid``, only that object is deleted (a UID precondition): another that took the name is kept.

    A child the cache already shows as deleting is not asked again: this controller watches both kinds, so
    the child's removal brings the scale set back without a request. Asking again on every requeue cost one
    request per scale set every REQUEUE_SECONDS while children finish: with a hundred scale sets deleted at
    once, the whole client rate limit (20 QPS), which starved the listeners' own deletion.
    """
    with contextlib.suppress(NamespaceNotCachedError):
        cached = ctx.cache(resource).get(namespace, name)
        if cached is not None and ObjectView(cached).is_deleting:
            return False
    try:
        await ctx.kube.delete(
            resource, name, namespace=namespace, preconditions=Preconditions(uid=uid) if uid else None
        )
    except KubeNotFound:
        return True
    except Conflict:
        return True  # the precondition failed: the child we meant is gone, another holds the name
    return False


async def _scale_set_gone(ctx: ControllerContext, obj: Object) -> bool:
    """Delete the scale set on GitHub and drop the ID annotation; True when there is nothing left to do."""
    view = ObjectView(obj)
    try:
        ars = AutoscalingRunnerSet.from_object(obj)
    except ValueError:
        return True  # nothing can be done on GitHub without a readable spec
    scale_set_id = scale_set_id_of(ars)
    if scale_set_id is None:
        return True
    try:
        client = await scale_set_client(ctx.github, ars)
        await client.delete_runner_scale_set(scale_set_id)
    except NotFound:
        pass  # already gone
    except (ConfigurationError, ActionsError) as exc:
        message = getattr(exc, "message", None) or str(exc)
        await ctx.events.event(
            obj,
            type="Warning",
            reason="ScaleSetDeletionFailed",
            note=f"cannot delete scale set {scale_set_id} on GitHub yet: {message}",
            action="Delete",
        )
        raise
    await ctx.github.pool.scale_set_deleted(namespace=view.namespace, config_url=ars.spec.github_config_url)
    await ctx.kube.patch(
        AUTOSCALING_RUNNER_SETS,
        view.name,
        {"metadata": {"annotations": {ANNOTATION_RUNNER_SCALE_SET_ID: None}}},
        namespace=view.namespace,
    )
    await ctx.events.event(
        obj,
        type="Normal",
        reason="ScaleSetDeleted",
        note=f"deleted scale set {scale_set_id} on GitHub",
        action="Delete",
    )
    return False


async def _remove_cleanup_protection(ctx: ControllerContext, resource: Resource, namespace: str, name: str) -> None:
    # The manager Role's own binding is released just before the Role: from then on the controller may only
    # list, watch and patch Roles (the controller chart's grant). So read from the cache where the manager
    # keeps one, and remove the finalizer with a patch.
    target: Any = None
    if resource in MANAGER_CACHED:
        with contextlib.suppress(NamespaceNotCachedError):
            target = ctx.cache(resource).get(namespace, name)
    if target is None:
        try:
            target = await ctx.kube.get(resource, name, namespace=namespace)
        except (KubeNotFound, Forbidden):
            # Gone already (or, for the secret, no longer readable by a narrowed role): nothing to release.
            return
    await patch_out_finalizers(ctx.kube, resource, target, {CLEANUP_PROTECTION_FINALIZER})
