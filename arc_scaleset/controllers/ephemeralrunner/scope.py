"""One pass over one EphemeralRunner: the kind's scope, the actions its phases share, and its one status write.

:class:`RunnerPass` is what every phase of the reconciler (and of :mod:`.registration`) reads and writes
besides the caches (docs/controllers.md, "The shape of a pass"). What a pass reports is status changes: phases
put them in ``changes``, and :meth:`RunnerPass.write_status` writes them once, at the end of the pass, as one
merge patch together with the changes an earlier pass held back (the listener writes the job fields of the same
status concurrently; neither write can drop the other's fields). An action that must follow the write (the
status records the decision first, so that after a crash in between the next pass sees it) is queued in
``then``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from arc_scaleset.api.ephemeralrunner import DONE_PHASES, EPHEMERAL_RUNNERS
from arc_scaleset.api.views import EphemeralRunnerView
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunner.memory import RunnerMemory
from arc_scaleset.controllers.ephemeralrunner.status_hold import RECHECK_DUE, status_hold
from arc_scaleset.controllers.errors import ConfigurationError, ObjectInTheWay, in_the_way_message
from arc_scaleset.controllers.metrics import runner_set_labels
from arc_scaleset.controllers.runner_github import RunnerClients, remove_registration
from arc_scaleset.github import ActionsClient, GitHubError
from arc_scaleset.kube.client import PatchType
from arc_scaleset.kube.controller import Request, Result
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.events import EventType
from arc_scaleset.kube.informer import Object

log = logging.getLogger(__name__)


@dataclass
class RunnerPass:
    """The scope of one pass. ``runner``: the runner as this pass knows it (the cached object; from the
    own-writes phase on, with the status as this process last made it, see :mod:`.memory`); ``pod``: its pod
    as cached, only when the runner controls it (:mod:`.ownership`); ``pod_in_the_way``: a cached pod under its
    name that it does not control; ``slot``: its memory; ``runner_id``/``new_secret``: the registration
    (:mod:`.registration`)."""

    request: Request
    runner: EphemeralRunnerView
    pod: Object | None
    slot: RunnerMemory
    ctx: ControllerContext
    clients: RunnerClients
    changes: dict[str, Any] = field(default_factory=dict)
    then: list[Callable[[], Awaitable[object]]] = field(default_factory=list)
    runner_id: int = 0
    new_secret: dict[str, Any] | None = None
    client: ActionsClient | None = None
    pod_in_the_way: Mapping[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.request.name

    @property
    def namespace(self) -> str:
        return self.request.namespace

    # -- the one status write ---------------------------------------------------------------------------

    async def write_status(self) -> None:
        """Write this pass's changes (one merge patch), if any, together with the changes held back by an
        earlier pass (the pod step); those alone are written only once they are due. A write that would wait
        for the client's rate limit is held back instead (:mod:`.status_hold`). A runner that is gone meanwhile
        needs no status."""
        deferred, remaining = self.slot.deferred_status()
        if not self.changes and (not deferred or remaining > 0):
            return
        changes = {**deferred, **self.changes}  # this pass's changes win (a phase beats the held-back Pending)
        self.changes = {}
        if self._hold(changes):
            return
        try:
            await self.ctx.kube.patch(
                EPHEMERAL_RUNNERS,
                self.name,
                {"status": changes},
                namespace=self.namespace,
                patch_type=PatchType.MERGE,
                subresource="status",
            )
        except NotFound:
            self.slot.deferred_written()  # nothing to write them to
            return
        self.slot.wrote_status(self.runner.resource_version, changes)
        self.slot.deferred_written()
        if "phase" in changes and changes["phase"] != self.runner.phase:
            # Counted where the transition is written: once per runner (a done runner is not rewritten).
            self.ctx.metrics.count_done(str(changes["phase"]), runner_set_labels(self.runner.raw))

    def _hold(self, changes: dict[str, Any]) -> bool:
        """Hold ``changes`` in the runner's memory when their write would wait for the client's rate limit
        (:mod:`.status_hold`); whether they were held."""
        seconds = status_hold(
            rate_limit_delay=self.ctx.kube.rate_limit_delay(EPHEMERAL_RUNNERS, "patch"),
            held_for=self.slot.held_for(),
            follow_ups=bool(self.then),
            done=changes.get("phase") in DONE_PHASES,
        )
        if seconds > 0:
            self.slot.hold_status(changes, for_seconds=seconds)
        return seconds > 0

    def requeue_for_deferred(self, result: Result) -> Result:
        """``result``, or sooner: when the changes held back come due (nothing else may wake the pass then).
        Changes due but not written (held for a moment that has passed already) come back after
        :data:`.status_hold.RECHECK_DUE`."""
        deferred, remaining = self.slot.deferred_status()
        due = max(remaining, RECHECK_DUE)
        if deferred and (result.requeue_after is None or result.requeue_after > due):
            return Result(requeue_after=due)
        return result

    # -- actions the phases share -----------------------------------------------------------------------

    async def github(self) -> ActionsClient:
        """The runner's Actions client. Bad input is told in a Warning Event and the status, then raised."""
        if self.client is None:
            try:
                self.client = await self.clients.client_for(namespace=self.namespace, spec=self.runner.spec)
            except ConfigurationError as exc:
                await self.event("Warning", exc.reason, exc.message)
                if self.runner.reason != exc.reason or self.runner.message != exc.message:
                    self.changes.update(reason=exc.reason, message=exc.message)
                raise
        return self.client

    async def best_effort_remove(self, runner_id: int) -> None:
        """Remove registration ``runner_id`` now if GitHub lets us; else the finalizer removes it later."""
        try:
            await remove_registration(await self.github(), runner_id)
        except (GitHubError, ConfigurationError) as exc:
            log.info("could not remove runner %s of %s now (the finalizer retries): %s", runner_id, self.request, exc)

    async def delete_runner(self, reason: str) -> None:
        """Delete the runner; counted in ``gha_controller_ephemeral_runners_deleted_total`` with ``reason``.
        This pass's own status changes are dropped: the runner is on its way out."""
        self.changes = {}
        # Told to the set before the request: it may see this runner's Succeeded (written just before) as soon
        # as this pass awaits the delete.
        deletions = self.ctx.runner_deletions
        deletions.record(self.runner.uid)
        try:
            await self.ctx.kube.delete(EPHEMERAL_RUNNERS, self.name, namespace=self.namespace, missing_ok=True)
        except BaseException:
            deletions.forget(self.runner.uid)
            raise
        self.slot.deleted = True
        self.ctx.metrics.count_deleted(runner_set_labels(self.runner.raw), reason, runner=str(self.request))

    async def in_the_way(self, kind: str, obj: Mapping[str, Any]) -> NoReturn:
        """``obj`` (a ``kind``) holds the name of the runner's own and is not the runner's: named in a Warning
        Event and the status (:mod:`.ownership`), then :class:`ObjectInTheWay` is raised (the workqueue's
        backoff retries the runner; nothing is deleted)."""
        message = in_the_way_message(kind, obj, self.runner.raw)
        await self.event("Warning", ObjectInTheWay.reason, message)
        if self.runner.reason != ObjectInTheWay.reason or self.runner.message != message:
            self.changes.update(reason=ObjectInTheWay.reason, message=message)
        raise ObjectInTheWay(message)

    async def event(self, type_: EventType, reason: str, note: str) -> None:
        await self.ctx.events.event(self.runner.raw, type=type_, reason=reason, note=note, action="Reconcile")
