"""The one status write at the end of an AutoscalingRunnerSet pass (what to write: :mod:`.status`).

The status is written from one consistent read (issue 15). The patch is diffed against the object as the
pass read it and carries its ``resourceVersion``. The cache may not show this controller's previous status
write yet, or the object changed since; then the server refuses the patch (409) and the status is derived
again from a fresh read, with the phase and observed generation as that read has them. A fresh read of
another generation means the pass worked on an outdated spec: nothing is written, the pass that change
triggers writes it. Without the lock, a patch diffed against a stale copy carried ``observedGeneration``
without the phase that belongs to it, and readers saw ``Pending`` at ``observedGeneration == generation``.

While the cache still shows a version this controller's own writes replaced (they have not come back through
the watch yet), the object the last write returned is the fresher read (:class:`~arc_scaleset.controllers.
own_writes.OwnWrites`, kept in the scale set's memory slot): diffing against it saves the refused patch and the
GET after it (three requests for one). Those writes are the status writes of earlier passes and the writes of
this pass's own phases (the finalizer, the registration record, the URL labels:
:meth:`.scope.ScaleSetPass.wrote`); a scale set being set up met the refusal at almost every pass (issue 30).
"""

from __future__ import annotations

import dataclasses
import logging

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.views import AutoscalingRunnerSetView
from arc_scaleset.controllers.autoscalingrunnerset.scope import ScaleSetMemory
from arc_scaleset.controllers.autoscalingrunnerset.status import ReconcileReport, derive_status, status_patch
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.kube.errors import Conflict, NotFound
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.retry import retry_on_conflict
from arc_scaleset.kube.views import ObjectView

# The reconciler's logger, as before these lines moved here: a log configuration that names it keeps working.
log = logging.getLogger("arc_scaleset.controllers.autoscalingrunnerset.reconciler")


async def write_status(ctx: ControllerContext, obj: Object, report: ReconcileReport, memory: ScaleSetMemory) -> None:
    """Write the status ``report`` derives onto the scale set the pass read as ``obj`` (see the module docstring);
    a scale set gone, or changing faster than this writes, is left to the pass its change brings."""
    kube = ctx.kube
    latest: Object = memory.writes.freshest(obj)

    async def attempt() -> None:
        nonlocal latest
        view = AutoscalingRunnerSetView(latest)
        if view.generation != report.generation:
            return
        read = dataclasses.replace(report, observed_generation=view.observed_generation, stored_phase=view.phase)
        patch = status_patch(view.status, derive_status(view.status, read, now=ctx.clock.now()))
        if not patch:
            return
        body = {"metadata": {"resourceVersion": view.resource_version}, "status": patch}
        try:
            stored = await kube.patch(
                AUTOSCALING_RUNNER_SETS, view.name, body, namespace=view.namespace, subresource="status"
            )
            memory.writes.wrote(latest, stored)
        except Conflict:
            latest = await kube.get(AUTOSCALING_RUNNER_SETS, view.name, namespace=view.namespace)
            raise

    try:
        await retry_on_conflict(attempt, clock=ctx.clock)
    except (Conflict, NotFound) as exc:
        # Gone, or changing faster than we write: the change that beat us brings the key back.
        view = ObjectView(obj)
        log.debug("status of %s/%s not written (%s): %s", view.namespace, view.name, type(exc).__name__, exc)
