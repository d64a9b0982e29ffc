"""The scale set on GitHub: registered (or reused by name), then verified by ID (phases 4 and 5 of
:mod:`.reconciler`; docs/controllers.md, AutoscalingRunnerSet).

A definitive 404 by ID re-registers the scale set (the new ID flows to the runner set as a revision bump);
any other error is retried, never a re-registration; a found set has its group, name and labels brought in
line. When to verify is :func:`.verification.plan_verification`'s decision.
"""

from __future__ import annotations

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.labels import github_url_labels
from arc_scaleset.controllers.autoscalingrunnerset.desired import scale_set_id_of
from arc_scaleset.controllers.autoscalingrunnerset.events import event, warn
from arc_scaleset.controllers.autoscalingrunnerset.listener_report import scale_set_gone_report
from arc_scaleset.controllers.autoscalingrunnerset.registration import (
    register_scale_set,
    registration_patch,
    registration_record_stale,
    scale_set_client,
    sync_scale_set,
)
from arc_scaleset.controllers.autoscalingrunnerset.runner_set_phase import scale_set_runner_sets
from arc_scaleset.controllers.autoscalingrunnerset.scope import ScaleSetPass
from arc_scaleset.controllers.autoscalingrunnerset.verification import VerificationInputs, plan_verification
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.github import NotFound
from arc_scaleset.kube.controller import Result


async def registration(ctx: ControllerContext, scope: ScaleSetPass) -> Result | None:
    """Parse the config URL (its labels); register the scale set, or reuse it by name, when it has no ID."""
    config = ctx.github.parse_url(scope.ars.spec.github_config_url)
    scope.url_labels = github_url_labels(config.enterprise, config.organization, config.repository)
    scale_set_id = scale_set_id_of(scope.ars)
    if scale_set_id is None:
        carried_on = await register(ctx, scope, replacing=None)
        # A first registration's record is metadata: the pass goes on to the runner set (ScaleSetPass.carry_on).
        return None if carried_on else Result()
    scope.scale_set_id = scale_set_id
    return None


async def register(ctx: ControllerContext, scope: ScaleSetPass, *, replacing: int | None) -> bool:
    """Register the scale set (or reuse the one of its name) and record it; ``replacing``: the ID GitHub lost.
    True when the pass may go on with the record (:meth:`.scope.ScaleSetPass.carry_on`; a write of
    ``spec.runnerScaleSetName`` is a new generation: it may not)."""
    ars, obj = scope.ars, scope.obj
    client = await scale_set_client(ctx.github, ars)
    registered = await register_scale_set(client, ars)
    scale_set = registered.scale_set
    patch = registration_patch(obj, scale_set, url_labels=scope.url_labels)
    carried_on = True
    if patch:
        stored = await ctx.kube.patch(AUTOSCALING_RUNNER_SETS, ars.name, patch, namespace=ars.namespace)
        carried_on = scope.carry_on(stored)
    scope.scale_set_id = scale_set.id
    scope.memory.verified(scale_set.id, at=ctx.clock.monotonic())
    verb = "registered" if registered.created else "reused the existing"
    note = f"{verb} scale set {scale_set.name!r} (id {scale_set.id}) in runner group {scale_set.runner_group_name!r}"
    if replacing is not None:
        message = f"scale set {replacing} no longer exists on GitHub; {note}"
        await warn(ctx, obj, "ScaleSetReRegistered", message, action="Register")
    else:
        await event(ctx, obj, "ScaleSetRegistered", note, action="Register")
    scope.report.progress = ("RegisteringScaleSet", note)
    return carried_on


async def verification(ctx: ControllerContext, scope: ScaleSetPass) -> Result | None:
    """Verify the scale set on GitHub when :func:`.verification.plan_verification` says it is due."""
    gone = scale_set_gone_report(scale_set_runner_sets(ctx, scope.obj).all(), scope.scale_set_id)
    inputs = VerificationInputs(
        scale_set_id=scope.scale_set_id,
        gone_report=gone.since if gone is not None else None,
        listener_missing=scope.own_listener is None,
        spec_changed=scope.report.spec_changed,
        record_stale=registration_record_stale(scope.obj, scope.ars),
    )
    plan = plan_verification(
        scope.memory, inputs, now=ctx.clock.monotonic(), interval=ctx.settings.scale_set_verify_interval
    )
    if not plan.due:
        return None
    scope.gone_report = plan.gone_report
    return await _verify(ctx, scope)


async def _verify(ctx: ControllerContext, scope: ScaleSetPass) -> Result | None:
    """Confirm the scale set on GitHub; re-register on a definitive 404; sync group/name/labels."""
    ars, obj, scale_set_id = scope.ars, scope.obj, scope.scale_set_id
    client = await scale_set_client(ctx.github, ars)
    try:
        scale_set = await client.get_runner_scale_set_by_id(scale_set_id)
    except NotFound:
        # Definitively gone (deleted on GitHub). Transient errors propagate and are retried: a 5xx must
        # never make a second scale set. The pass ends: the new ID reaches the runner set on the next.
        await register(ctx, scope, replacing=scale_set_id)
        _acted_on_gone_report(scope)
        return Result()
    _acted_on_gone_report(scope)
    changes = await sync_scale_set(client, ars, scale_set)
    if changes:
        scale_set = await client.get_runner_scale_set_by_id(scale_set_id)
        await event(ctx, obj, "ScaleSetUpdated", f"scale set {scale_set_id}: {'; '.join(changes)}", action="Update")
    scope.memory.verified(scale_set_id, at=ctx.clock.monotonic())
    patch = registration_patch(obj, scale_set, url_labels=scope.url_labels)
    if patch:
        scope.wrote(await ctx.kube.patch(AUTOSCALING_RUNNER_SETS, ars.name, patch, namespace=ars.namespace))
        scope.report.progress = ("UpdatingScaleSet", "recording the scale set's name and runner group")
        return Result()
    return None


def _acted_on_gone_report(scope: ScaleSetPass) -> None:
    if scope.gone_report is not None:
        scope.memory.gone_report = scope.gone_report
