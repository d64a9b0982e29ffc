"""The scale set's AutoscalingListener, pointed at its current EphemeralRunnerSet (phase 7 of
:mod:`.reconciler`; docs/controllers.md, AutoscalingRunnerSet).

Stale listeners (another name) are deleted, the listener created when missing, deleted and recreated when a
listener-relevant field changed (:func:`.decisions.listener_differences`) or ARC's controller made it; ARC's
listener only once a dry run shows the current set takes the new listener's writes (else
:class:`.adoption.AdoptionRefused`, and ARC's listener keeps running). A listener is deleted only as the very
object read (a UID precondition), and only when it is this scale set's (:mod:`.ownership`).
"""

from __future__ import annotations

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import ANNOTATION_RUNNER_SPEC_HASH, LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE
from arc_scaleset.api.listener_group import shared_key
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.controllers.autoscalingrunnerset.adoption import (
    AdoptionRefused,
    arcs_live_listeners,
    refusal_message,
    writability_probe,
)
from arc_scaleset.controllers.autoscalingrunnerset.decisions import listener_differences
from arc_scaleset.controllers.autoscalingrunnerset.desired import desired_autoscaling_listener, in_shard
from arc_scaleset.controllers.autoscalingrunnerset.events import event
from arc_scaleset.controllers.autoscalingrunnerset.group_shard import shard_for
from arc_scaleset.controllers.autoscalingrunnerset.ownership import listener_is_own, listener_name_conflict
from arc_scaleset.controllers.autoscalingrunnerset.scope import (
    CONFLICT_REQUEUE_SECONDS,
    WAIT_REQUEUE_SECONDS,
    ScaleSetPass,
)
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.kube.client import Preconditions
from arc_scaleset.kube.controller import Result
from arc_scaleset.kube.errors import AlreadyExists, BadRequest, Invalid
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.views import ObjectView


async def converge_listener(ctx: ControllerContext, scope: ScaleSetPass) -> Result | None:
    """Bring the scale set's listener in line; ``None`` when it already is."""
    desired = await _desired(ctx, scope)
    name, report, live = ObjectView(desired).name, scope.report, scope.listener
    # Before anything is deleted: a name another scale set's listener holds is reported, never taken.
    conflict = listener_name_conflict(live, scope.owner)
    if conflict is not None:
        raise conflict
    # Nothing of ARC's is removed before the set it leaves behind is known to take this controller's writes.
    await _check_adoption(ctx, scope)
    # A runner group or URL change gives the listener another name: the old one must not keep running.
    if not await delete_listeners(ctx, scope, keep=name):
        report.progress = ("RecreatingListener", "waiting for the previous listener to be deleted")
        return Result(requeue_after=WAIT_REQUEUE_SECONDS)
    if live is None:
        return await _create(ctx, scope, desired)
    if ObjectView(live).is_deleting:
        report.progress = ("RecreatingListener", f"waiting for AutoscalingListener {name} to be deleted")
        return Result(requeue_after=WAIT_REQUEUE_SECONDS)
    differences = listener_differences(live, desired)
    if not differences:
        return None
    await _delete_listener(ctx, live)
    note = f"listener-relevant fields changed ({', '.join(differences)}): recreating AutoscalingListener {name}"
    await event(ctx, scope.obj, "ListenerRecreating", note, action="Recreate")
    report.progress = ("RecreatingListener", note)
    return Result(requeue_after=WAIT_REQUEUE_SECONDS)


async def _desired(ctx: ControllerContext, scope: ScaleSetPass) -> Object:
    """The listener as it should be; a shared set's in the shard of its key it is in, or joins (:mod:`.group_shard`)."""
    desired = _desired_in_first_shard(ctx, scope)
    key = shared_key(scope.ars.metadata.annotations, desired["spec"])
    if key is None:
        return desired
    own = ObjectView(desired).name
    shard = await shard_for(ctx, key, live=scope.own_listener, own=own)
    return in_shard(desired, key, shard) if shard else desired


def _desired_in_first_shard(ctx: ControllerContext, scope: ScaleSetPass) -> Object:
    settings = ctx.settings
    return desired_autoscaling_listener(
        scope.ars,
        namespace=settings.controller_namespace,
        scale_set_id=scope.scale_set_id,
        ephemeral_runner_set=scope.runner_set_name,
        image=settings.controller_image,
        image_pull_secrets=settings.image_pull_secrets,
        url_labels=scope.url_labels,
        excluded_prefixes=settings.exclude_label_prefixes,
    )


async def _create(ctx: ControllerContext, scope: ScaleSetPass, desired: Object) -> Result:
    namespace, name = ctx.settings.controller_namespace, ObjectView(desired).name
    try:
        await ctx.kube.create(AUTOSCALING_LISTENERS, desired, namespace=namespace)
    except AlreadyExists:
        scope.report.progress = ("CreatingListener", f"waiting for AutoscalingListener {name}")
        return Result(requeue_after=CONFLICT_REQUEUE_SECONDS)
    await event(ctx, scope.obj, "ListenerCreated", f"created AutoscalingListener {namespace}/{name}", action="Create")
    scope.report.progress = ("CreatingListener", f"created AutoscalingListener {name}")
    return Result()


async def _check_adoption(ctx: ControllerContext, scope: ScaleSetPass) -> None:
    """While ARC's listener is still there (a takeover), dry-run a spec write of the current set like the new
    listener's; :class:`.adoption.AdoptionRefused` when the API server refuses it, so ARC's listener stays."""
    arcs = arcs_live_listeners(_listeners_of(ctx, scope))
    namespace, name = scope.ars.namespace, scope.runner_set_name
    ers = ctx.cache(EPHEMERAL_RUNNER_SETS).get(namespace, name)
    if not arcs or ers is None:
        return
    try:
        await ctx.kube.patch(EPHEMERAL_RUNNER_SETS, name, writability_probe(ers), namespace=namespace, dry_run=True)
    except (Invalid, BadRequest) as exc:
        raise AdoptionRefused(refusal_message(name, arcs[0], str(exc))) from None


async def delete_listeners(ctx: ControllerContext, scope: ScaleSetPass, *, keep: str | None) -> bool:
    """Delete this scale set's listeners other than ``keep``; True when none (other) remains."""
    gone = True
    for listener in _listeners_of(ctx, scope):
        name = listener.name
        if name == keep:
            continue
        gone = False
        if listener.is_deleting:
            continue
        await _delete_listener(ctx, listener.raw)
        if keep is not None:
            # ARC 0.9.0 to 0.13.0 named the listener after the namespace alone (docs/migration.md).
            why = (
                "made by ARC's controller"
                if listener.annotation(ANNOTATION_RUNNER_SPEC_HASH)
                else "the runner group or URL changed"
            )
            note = f"deleted AutoscalingListener {name} ({why}): the scale set's listener is {keep}"
            await event(ctx, scope.obj, "ListenerRemoved", note, action="Delete")
    return gone


def _listeners_of(ctx: ControllerContext, scope: ScaleSetPass) -> list[AutoscalingListenerView]:
    namespace, ars, owner = ctx.settings.controller_namespace, scope.ars, scope.owner
    listeners = ctx.cache(AUTOSCALING_LISTENERS).by_label(LABEL_SCALE_SET_NAME, ars.name)
    return [
        listener
        for listener in map(AutoscalingListenerView, listeners)
        if listener.namespace == namespace
        and listener.labels.get(LABEL_SCALE_SET_NAMESPACE) == ars.namespace
        and listener_is_own(listener.raw, owner)
    ]


async def _delete_listener(ctx: ControllerContext, listener: Object) -> None:
    """Delete this very listener (a UID precondition): one that took its name meanwhile, maybe another scale
    set's, is kept (the refused precondition is a Conflict: the pass is retried)."""
    view = ObjectView(listener)
    preconditions = Preconditions(uid=view.uid)
    await ctx.kube.delete(
        AUTOSCALING_LISTENERS, view.name, namespace=view.namespace, preconditions=preconditions, missing_ok=True
    )
