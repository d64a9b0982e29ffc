"""The Events the AutoscalingRunnerSet controller writes on a scale set (Normal ones are logged too)."""

from __future__ import annotations

import logging

from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.views import ObjectView

# The reconciler's logger, as before these lines moved here: a log configuration that names it keeps working.
log = logging.getLogger("arc_scaleset.controllers.autoscalingrunnerset.reconciler")


async def event(ctx: ControllerContext, obj: Object, reason: str, note: str, *, action: str) -> None:
    """A Normal Event on ``obj``, and the same line in the log."""
    view = ObjectView(obj)
    log.info("%s/%s: %s: %s", view.namespace, view.name, reason, note)
    await ctx.events.event(obj, type="Normal", reason=reason, note=note, action=action)


async def warn(ctx: ControllerContext, obj: Object, reason: str, note: str, *, action: str) -> None:
    """A Warning Event on ``obj`` (the controller's failure reporting logs the error itself)."""
    await ctx.events.event(obj, type="Warning", reason=reason, note=note, action=action)
