"""What a pass of the EphemeralRunnerSet controller writes to the set's status at its end (docs/controllers.md,
"The shape of a pass"): ``Degraded`` (with a Warning Event for a new problem) and the advertised capacity after a
pass that got through its scaling; the phase and the runner counts where they differ, in one patch (a change of
the counts alone ``counts_interval`` seconds after a pass first saw it: :mod:`.counts`), also while the set
drains, with the jobs its runners finished riding that patch into ``status.recentJobs`` (:mod:`.kept_jobs`) and
a finished-runner marker that waits for a write (:mod:`.finished_marker`); and,
for a pass stopped by bad input, ``Degraded`` naming it.
"""

from __future__ import annotations

import contextlib

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunnerset.capacity_status import CapacityPublisher
from arc_scaleset.controllers.ephemeralrunnerset.conditions import degraded_conditions, patch_conditions
from arc_scaleset.controllers.ephemeralrunnerset.counts import status_changes, status_counts
from arc_scaleset.controllers.ephemeralrunnerset.kept_jobs import finished_jobs
from arc_scaleset.controllers.ephemeralrunnerset.scope import SetPass
from arc_scaleset.controllers.ephemeralrunnerset.status import patch_status
from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.kube.errors import NotFound as KubeNotFound
from arc_scaleset.kube.informer import Object


class PassStatus:
    """The status writes at the end of a pass, for one controller: ``capacity`` publishes the advertised
    capacity (its sources are the controller's to watch)."""

    def __init__(self, ctx: ControllerContext, capacity: CapacityPublisher) -> None:
        self._ctx = ctx
        self._kube = ctx.kube
        self._runners = ctx.cache(EPHEMERAL_RUNNERS)
        self.capacity = capacity

    async def write(self, scope: SetPass) -> float | None:
        """Write what the pass reports (module docstring); the seconds until a write held back, or a capacity
        recheck, is due (``None``: nothing is)."""
        report = scope.report
        if report.assessed:
            await self._set_degraded(scope, report.problem)
        counts_due = await self._write_counts(scope) if report.counts else None
        if not report.assessed:
            return counts_due
        return sooner(counts_due, await self.capacity.publish(scope.ers, scope.states, scope.memory.status_writes))

    async def bad_input(self, scope: SetPass, exc: ConfigurationError) -> None:
        """``Degraded=True`` naming the configuration error that stopped the pass, and a Warning Event; the
        next pass that gets through derives the condition again."""
        conditions = degraded_conditions(scope.ers, (exc.reason, exc.message), now=self._ctx.clock.now())
        if conditions is not None:
            with contextlib.suppress(KubeNotFound):
                await patch_conditions(self._kube, scope.ers, conditions)
        action = "Delete" if scope.view.is_deleting else "Reconcile"
        await self._ctx.events.event(scope.ers, type="Warning", reason=exc.reason, note=exc.message, action=action)

    async def _write_counts(self, scope: SetPass) -> float | None:
        """Write the phase and the runner counts where they differ, and the finished jobs not kept yet; a change
        of counts alone waits for the pacer: then the seconds until it may go out are returned (the pass comes
        back then), else ``None``."""
        counts = status_counts(scope.states, in_status=self._ctx.settings.runner_counts_in_status)
        changes = status_changes(scope.view.status, counts=counts, phase=scope.report.phase)
        finished = finished_jobs(scope.states, self._runners)
        changes |= scope.memory.jobs.changes(scope.view.status, finished, now=self._ctx.clock.now())
        changes |= scope.memory.marker.changes(scope.view.status)
        if not changes:
            scope.memory.counts.settled()
            return None
        if "phase" not in changes:
            wait = scope.memory.counts.wait()
            if wait > 0:
                return wait
        _wrote(scope, await patch_status(self._kube, scope.ers, changes))
        scope.memory.counts.settled()
        scope.memory.jobs.written(changes)
        scope.memory.marker.written(changes)
        return None

    async def _set_degraded(self, scope: SetPass, problem: tuple[str, str] | None) -> None:
        """Write the set's ``Degraded`` condition when it changes, with a Warning Event for a new problem."""
        conditions = degraded_conditions(scope.ers, problem, now=self._ctx.clock.now())
        if conditions is None:
            return
        _wrote(scope, await patch_conditions(self._kube, scope.ers, conditions))
        if problem is not None:
            reason, message = problem
            await self._ctx.events.event(scope.ers, type="Warning", reason=reason, note=message, action="Scale")


def _wrote(scope: SetPass, stored: Object | None) -> None:
    """Remember a status write's answer (:attr:`.scope.SetMemory.status_writes`): the capacity written later in
    the pass, or in a pass that starts before the cache shows it, is written against it; and the finished-runner
    marker it shows, if this process did not know it yet."""
    if stored is not None:
        writes = scope.memory.status_writes
        writes.wrote(writes.freshest(scope.ers), stored)
        scope.memory.marker.answered(stored)


def sooner(first: float | None, second: float | None) -> float | None:
    """The earlier of two optional requeue delays."""
    if first is None:
        return second
    return first if second is None else min(first, second)
