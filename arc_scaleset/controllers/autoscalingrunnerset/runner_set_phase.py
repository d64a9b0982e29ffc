"""The scale set's EphemeralRunnerSet (phase 6 of :mod:`.reconciler`; docs/controllers.md, AutoscalingRunnerSet).

The scale set's sets are found by owner reference, whatever their names (:mod:`arc_scaleset.api.runner_sets`:
a scale set moved from ARC has ARC's generated names, possibly several sets); sets superseded by the current
one are deleted (drained: busy runners finish). The current one is then whatever
:func:`.decisions.plan_ephemeral_runner_set` says: created when there is none (the ARS's name, revision 0),
its runner spec patched with a revision bump on semantic drift, its metadata merged, or torn down when
Outdated at its current revision; this module only executes the plan.
"""

from __future__ import annotations

from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.runner_sets import ScaleSetRunnerSets, runner_sets_of, sort_runner_sets
from arc_scaleset.controllers.autoscalingrunnerset.decisions import ErsAction, ErsPlan, plan_ephemeral_runner_set
from arc_scaleset.controllers.autoscalingrunnerset.desired import desired_ephemeral_runner_set
from arc_scaleset.controllers.autoscalingrunnerset.events import event, warn
from arc_scaleset.controllers.autoscalingrunnerset.listener_phase import delete_listeners
from arc_scaleset.controllers.autoscalingrunnerset.scope import (
    CONFLICT_REQUEUE_SECONDS,
    WAIT_REQUEUE_SECONDS,
    ScaleSetPass,
)
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.kube.controller import Result
from arc_scaleset.kube.errors import AlreadyExists
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.ownerrefs import Owner
from arc_scaleset.kube.views import ObjectView


def scale_set_runner_sets(ctx: ControllerContext, obj: Object) -> ScaleSetRunnerSets:
    """The scale set's EphemeralRunnerSets (by owner reference, whatever their names), from the cache."""
    return sort_runner_sets(runner_sets_of(ctx.cache(EPHEMERAL_RUNNER_SETS), Owner.of(obj)))


async def converge_runner_set(ctx: ControllerContext, scope: ScaleSetPass) -> Result | None:
    """Bring the scale set's EphemeralRunnerSets in line; ``None`` (and :attr:`ScaleSetPass.runner_set_name`
    set) when the current one already is."""
    excluded = ctx.settings.exclude_label_prefixes
    desired = desired_ephemeral_runner_set(
        scope.obj, scope.ars, scale_set_id=scope.scale_set_id, url_labels=scope.url_labels, excluded_prefixes=excluded
    )
    sets = scale_set_runner_sets(ctx, scope.obj)
    if sets.superseded:
        return await _drain_superseded(ctx, scope, sets)
    # The current set keeps its name (ARC's are generated); a new one gets the ARS's name. With no current
    # set but some being deleted, the plan waits for them (a teardown rebuilds after the old set is gone).
    live = sets.current or next(iter(sets.draining), None)
    name = ObjectView(live).name if live is not None else ObjectView(desired).name
    plan = plan_ephemeral_runner_set(
        live, desired, ars_phase=scope.report.phase_in_effect, excluded_label_prefixes=excluded
    )
    if plan.action is ErsAction.NONE:
        scope.runner_set_name = name
        return None
    return await _execute(ctx, scope, plan, name, desired)


async def _execute(ctx: ControllerContext, scope: ScaleSetPass, plan: ErsPlan, name: str, desired: Object) -> Result:
    """Carry out ``plan`` (any action but ``NONE``) on the set ``name``."""
    report = scope.report
    if plan.action is ErsAction.CREATE:
        return await _create(ctx, scope, name, desired)
    if plan.action is ErsAction.WAIT_FOR_DELETION:
        report.progress = ("WaitingForEphemeralRunnerSet", f"EphemeralRunnerSet {name} is being deleted")
        return Result(requeue_after=WAIT_REQUEUE_SECONDS)
    if plan.action is ErsAction.TEAR_DOWN:
        return await _tear_down_outdated(ctx, scope, name)
    await ctx.kube.patch(EPHEMERAL_RUNNER_SETS, name, plan.patch, namespace=scope.ars.namespace)
    if plan.action is ErsAction.BUMP_REVISION:
        note = (
            f"runner spec changed ({', '.join(plan.changed_fields) or 'ephemeralRunnerSpec'}): EphemeralRunnerSet"
            f" {name} actionableRevision {plan.revision_from} -> {plan.revision_to}; idle and pending runners"
            " are replaced, busy runners finish their job first"
        )
        await event(ctx, scope.obj, "RevisionBumped", note, action="Update")
        report.progress = ("RollingOutRevision", note)
    else:
        report.progress = ("UpdatingEphemeralRunnerSet", f"merged labels and annotations into {name}")
    return Result()


async def _create(ctx: ControllerContext, scope: ScaleSetPass, name: str, desired: Object) -> Result:
    try:
        await ctx.kube.create(EPHEMERAL_RUNNER_SETS, desired, namespace=scope.ars.namespace)
    except AlreadyExists:
        # The cache has not seen it yet; the deterministic name makes a second set impossible.
        scope.report.progress = ("CreatingEphemeralRunnerSet", f"waiting for EphemeralRunnerSet {name}")
        return Result(requeue_after=CONFLICT_REQUEUE_SECONDS)
    note = f"created EphemeralRunnerSet {name} (revision 0)"
    await event(ctx, scope.obj, "EphemeralRunnerSetCreated", note, action="Create")
    scope.report.progress = ("CreatingEphemeralRunnerSet", f"created EphemeralRunnerSet {name}")
    return Result()


async def _drain_superseded(ctx: ControllerContext, scope: ScaleSetPass, sets: ScaleSetRunnerSets) -> Result:
    """Delete the sets older than the current one: their controller drains them (idle runners removed,
    busy ones finish their job), then they go. Only a scale set moved from ARC has such sets."""
    names = [ObjectView(runner_set).name for runner_set in sets.superseded]
    for name in names:
        await ctx.kube.delete(EPHEMERAL_RUNNER_SETS, name, namespace=scope.ars.namespace, missing_ok=True)
    note = (
        f"EphemeralRunnerSet {sets.current_name} is the current one: draining and deleting {', '.join(names)}"
        " (idle runners are removed, busy runners finish their job first)"
    )
    await event(ctx, scope.obj, "EphemeralRunnerSetSuperseded", note, action="Delete")
    scope.report.progress = ("DrainingEphemeralRunnerSets", note)
    return Result()


async def _tear_down_outdated(ctx: ControllerContext, scope: ScaleSetPass, name: str) -> Result:
    """The set is Outdated at its current revision: delete its listener, then it; both are rebuilt."""
    if not await delete_listeners(ctx, scope, keep=None):
        scope.report.progress = ("TearingDownOutdated", "waiting for the listener to be deleted")
        return Result(requeue_after=WAIT_REQUEUE_SECONDS)
    await ctx.kube.delete(EPHEMERAL_RUNNER_SETS, name, namespace=scope.ars.namespace, missing_ok=True)
    note = (
        f"EphemeralRunnerSet {name} is Outdated at its current revision (a runner reported an outdated"
        " runner version): deleted it and its listener; they are rebuilt from the spec"
    )
    await warn(ctx, scope.obj, "RunnerVersionOutdated", note, action="Delete")
    scope.report.progress = ("TearingDownOutdated", note)
    return Result(requeue_after=WAIT_REQUEUE_SECONDS)
