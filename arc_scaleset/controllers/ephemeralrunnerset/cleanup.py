"""Carrying out a :class:`~arc_scaleset.controllers.ephemeralrunnerset.scaling.CleanupPlan` against Kubernetes
and GitHub.

- ``delete``: done runners; deleted outright (their registration is already gone or their own finalizer
  removes it). NotFound counts as deleted.
- ``remove``: live runners; each is first removed from GitHub (``RemoveRunner``) and only then deleted, so a
  runner that picked up a job since our cache last saw it is never deleted: GitHub answers JobStillRunning
  and the runner is skipped. A runner without a runner ID has nothing to remove and is deleted directly
  (its deletion path still unregisters it if the JIT Secret shows it registered meanwhile).

With ``remove_limit`` (scale-down) the candidates are tried in order, ``concurrency`` at a time, until that
many are gone: a candidate is started only while fewer than ``remove_limit`` are gone or under way, so no
more than ``remove_limit`` are ever removed, and one that GitHub keeps (busy) or that fails leaves its slot
to the next candidate. Without it (revision cleanup, outdated hold, the set's deletion) removals run
concurrently, bounded by ``concurrency``. Every runner is attempted; errors are collected and raised
together at the end (:class:`CleanupFailedError`) so the caller's pass fails and is retried -- for
revision cleanup this keeps ``appliedActionableRevision`` behind until one pass succeeds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.controllers.ephemeralrunnerset.scaling import CleanupPlan
from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.controllers.runner_classification import RunnerView
from arc_scaleset.controllers.runner_github import Removal, RemovedRegistrations, remove_registration
from arc_scaleset.github import ActionsClient
from arc_scaleset.kube.client import KubeClient

log = logging.getLogger(__name__)

ClientSource = Callable[[], Awaitable[ActionsClient]]


class CleanupFailedError(Exception):
    """Some runners could not be deleted or removed; ``errors`` holds each failure."""

    def __init__(self, errors: list[BaseException]) -> None:
        self.errors = errors
        first = errors[0]
        super().__init__(f"{len(errors)} runner cleanup step(s) failed; first: {type(first).__name__}: {first}")


@dataclass
class CleanupResult:
    deleted: list[str]
    removed: list[str]
    busy: list[str]


async def execute_cleanup(
    kube: KubeClient,
    plan: CleanupPlan,
    *,
    client: ClientSource,
    concurrency: int = 10,
    on_deleted: Callable[[str], None] | None = None,
    removed: RemovedRegistrations | None = None,
) -> CleanupResult:
    """Carry out ``plan``; see the module docstring. ``client`` is called at most once, and only when a
    registered runner must be removed (a missing GitHub secret does not stop deleting done runners).
    ``on_deleted`` is told the name of each runner as soon as its delete returned, also in a pass that fails.
    ``removed`` records each registration GitHub confirmed gone (removed or not found), so the runner's own
    deletion path does not ask again."""
    result = CleanupResult(deleted=[], removed=[], busy=[])
    errors: list[BaseException] = []
    limit = asyncio.Semaphore(max(1, concurrency))
    cached: list[ActionsClient] = []
    client_lock = asyncio.Lock()

    async def github() -> ActionsClient:
        async with client_lock:
            if not cached:
                cached.append(await client())
            return cached[0]

    async def delete(runner: RunnerView) -> None:
        async with limit:
            await kube.delete(EPHEMERAL_RUNNERS, runner.name, namespace=runner.namespace, missing_ok=True)
        result.deleted.append(runner.name)
        if on_deleted is not None:
            on_deleted(runner.name)

    async def remove(runner: RunnerView) -> bool:
        """True when the runner is gone (removed or nothing to remove, then deleted)."""
        if runner.runner_id != 0:
            async with limit:
                outcome = await remove_registration(await github(), runner.runner_id)
            if outcome is Removal.BUSY:
                result.busy.append(runner.name)
                return False
            if removed is not None:
                removed.record(runner.uid, runner.runner_id)
        await delete(runner)
        result.removed.append(runner.name)
        return True

    deletions = await asyncio.gather(*(delete(runner) for runner in plan.delete), return_exceptions=True)
    errors.extend(outcome for outcome in deletions if isinstance(outcome, BaseException))

    if plan.remove_limit is None:
        removals = await asyncio.gather(*(remove(runner) for runner in plan.remove), return_exceptions=True)
        errors.extend(outcome for outcome in removals if isinstance(outcome, BaseException))
    else:
        errors.extend(await _remove_up_to(plan.remove, plan.remove_limit, remove, concurrency=concurrency))
    for error in errors:
        if isinstance(error, asyncio.CancelledError):
            raise error
    for error in errors:
        if isinstance(error, ConfigurationError):
            raise error  # bad input, the cause of every removal failing: report it as such
    if errors:
        raise CleanupFailedError(errors)
    if result.busy:
        log.info("runners kept because GitHub says they run a job: %s", ", ".join(result.busy))
    return result


async def _remove_up_to(
    candidates: list[RunnerView],
    limit: int,
    remove: Callable[[RunnerView], Awaitable[bool]],
    *,
    concurrency: int,
) -> list[Exception]:
    """Remove candidates in order until ``limit`` are gone (``remove`` answers True), at most ``concurrency``
    at once and never more than ``limit`` gone or under way; the errors of the failed ones.

    Concurrent like the creations of a scale-up: one removal after the other (as ARC does) made a scale-down
    of 200 idle runners wait on 200 GitHub round trips in a row (bench/README.md). A worker stops once
    enough are gone or under way; one whose removal came back busy or failed takes the next candidate.
    """
    pending = iter(candidates)
    errors: list[Exception] = []
    gone = under_way = 0

    async def worker() -> None:
        nonlocal gone, under_way
        while gone + under_way < limit:
            runner = next(pending, None)
            if runner is None:
                return
            under_way += 1
            try:
                # Awaited before `gone` is read: `gone += await ...` would add to a value read before the wait.
                done = await remove(runner)
                gone += 1 if done else 0
            except Exception as exc:  # keep trying the other candidates; report at the end
                errors.append(exc)
            finally:
                under_way -= 1

    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, limit)))))
    return errors
