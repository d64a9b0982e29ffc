"""What an EphemeralRunnerSet does to its runners: it creates them in growing concurrent batches, and it
carries out cleanup plans (:func:`.cleanup.execute_cleanup`); each write is remembered in the set's memory
(:class:`.scope.SetMemory`) and counted in the runner metrics.

The reconciler is given its :class:`RunnerWrites` at construction (``runner_writes``, a factory taking the
controller's context): a test that must hold a pass at one of these writes hands in a subclass.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunnerset.builders import desired_ephemeral_runner, with_runner_instance
from arc_scaleset.controllers.ephemeralrunnerset.cleanup import CleanupResult, ClientSource, execute_cleanup
from arc_scaleset.controllers.ephemeralrunnerset.scaling import CleanupPlan, creation_batches
from arc_scaleset.controllers.ephemeralrunnerset.scope import SetPass
from arc_scaleset.controllers.metrics import deleted_reason_of_done, runner_set_labels
from arc_scaleset.controllers.runner_github import client_for_runner_spec
from arc_scaleset.github import ActionsClient

log = logging.getLogger(__name__)


class CreateFailedError(Exception):
    """Some EphemeralRunners of a scale-up could not be created (the pass is retried)."""


class RunnerWrites:
    """Creates and removes the runners of a set (see the module docstring)."""

    def __init__(self, ctx: ControllerContext) -> None:
        self._ctx = ctx

    async def create(self, scope: SetPass, count: int) -> None:
        """Create ``count`` runners in growing concurrent batches (:func:`.scaling.creation_batches`: 1, 2, 4, ...
        up to ``runner_create_concurrency``), stopping after the first batch in which a creation failed.

        At most one batch of requests (and tasks) is in flight, whatever ``count`` is; an API server that
        refuses every runner (a quota, a webhook) costs one failed request, not ``count``. The pass then
        fails and the key is retried with backoff; the runners created so far are expected in the cache.
        """
        settings = self._ctx.settings
        body = desired_ephemeral_runner(scope.ers, exclude_label_prefixes=settings.exclude_label_prefixes)

        async def create_one() -> str:
            created = await self._ctx.kube.create(EPHEMERAL_RUNNERS, with_runner_instance(body))
            return EphemeralRunnerSetView(created).name

        names: list[str] = []
        errors: list[BaseException] = []
        try:
            for size in creation_batches(count, limit=settings.runner_create_concurrency):
                outcomes = await asyncio.gather(*(create_one() for _ in range(size)), return_exceptions=True)
                names += [outcome for outcome in outcomes if isinstance(outcome, str)]
                errors += [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
                if errors:
                    break
        finally:
            scope.memory.created.expect(names)
            self._ctx.metrics.count_created(runner_set_labels(scope.ers), len(names))
        log.info("%s: created %d of %d runners", scope.key, len(names), count)
        if errors:
            raise CreateFailedError(
                f"{len(errors)} runner creation(s) failed, {count - len(names)} of {count} runners not created;"
                f" first: {errors[0]}"
            )

    async def cleanup(self, scope: SetPass, plan: CleanupPlan, *, removal: str) -> CleanupResult:
        """Carry out ``plan`` for the set (:func:`.cleanup.execute_cleanup`); ``removal``: why live runners go."""
        return await execute_cleanup(
            self._ctx.kube, plan, client=self._client_source(scope),
            concurrency=self._ctx.settings.runner_create_concurrency,
            on_deleted=self._deleted(scope, plan, removal=removal),
            removed=self._ctx.removed_registrations, children=self._ctx.deleted_children,
        )  # fmt: skip

    def _deleted(self, scope: SetPass, plan: CleanupPlan, *, removal: str) -> Callable[[str], None]:
        """Records a runner of the set as deleted (:class:`.expectations.DeletionExpectations`) and counts it
        (``gha_controller_ephemeral_runners_deleted_total``): a done runner of ``plan.delete`` by its phase, a
        live one of ``plan.remove`` with the reason ``removal``."""
        memory, namespace = scope.memory, scope.view.namespace
        labels = runner_set_labels(scope.ers)
        reasons = {runner.name: deleted_reason_of_done(runner) for runner in plan.delete}

        def deleted(name: str) -> None:
            memory.deleted.expect(name)
            memory.created.discard(name)
            self._ctx.metrics.count_deleted(labels, reasons.get(name, removal), runner=f"{namespace}/{name}")

        return deleted

    def _client_source(self, scope: SetPass) -> ClientSource:
        """The set's GitHub client, made only when a registered runner must be removed."""
        namespace, spec = scope.view.namespace, scope.view.runner_spec

        async def source() -> ActionsClient:
            return await client_for_runner_spec(self._ctx.github, namespace=namespace, spec=spec)

        return source
