"""Carrying out a :class:`~arc_scaleset.controllers.ephemeralrunnerset.scaling.CleanupPlan` against Kubernetes
and GitHub.

- ``delete``: done runners; deleted outright (their registration is already gone or their own finalizer
  removes it). NotFound counts as deleted.
- ``remove``: live runners; each is first removed from GitHub (``RemoveRunner``) and only then deleted, so a
  runner that picked up a job since our cache last saw it is never deleted: GitHub answers JobStillRunning
  and the runner is skipped. A runner without a runner ID has nothing to remove and is deleted directly
  (its deletion path still unregisters it if the JIT Secret shows it registered meanwhile: so a batch never
  deletes the JIT Secret of a runner with no runner ID on record).

The runners to delete -- the done ones and the removed ones -- are deleted once every removal has been tried:
those that carry a ``runner.arc-scaleset.dev/instance`` label in batches of up to :data:`BATCH_SIZE`, three
requests per batch (``deletecollection`` with a label selector naming their instances: the EphemeralRunners,
then their pods, then their JIT Secrets), the others one by one. Each pod and Secret a batch deleted is
recorded in ``children``, so the runner's own deletion path only drops its finalizers: a scale-down of N
runners costs the client's rate limit about N requests instead of 4N (docs/controllers.md "Deleting runners
in batches"). The runners go first: a runner controller that sees its pod deleted while the runner is not
being deleted would treat it as a failure. A runner's deletion path that runs before its batch's pod and Secret
requests returned waits for them (:class:`~arc_scaleset.controllers.handoff.DeletedChildren`); what a batch did
not delete, its deletion path deletes, as without batches.

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
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.keys import LABEL_RUNNER_INSTANCE
from arc_scaleset.controllers.ephemeralrunnerset.runner_index import controller_uid
from arc_scaleset.controllers.ephemeralrunnerset.scaling import CleanupPlan
from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.controllers.handoff import DeletedChildren, RemovedRegistrations
from arc_scaleset.controllers.runner_classification import RunnerView
from arc_scaleset.controllers.runner_github import Removal, remove_registration
from arc_scaleset.github import ActionsClient
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import Forbidden
from arc_scaleset.kube.resources import PODS, SECRETS

log = logging.getLogger(__name__)

BATCH_SIZE: Final = 100
"""Runners per ``deletecollection`` request: a selector of 100 instances is about 3.5 kB of URL."""

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
    children: DeletedChildren | None = None,
) -> CleanupResult:
    """Carry out ``plan``; see the module docstring. ``client`` is called at most once, and only when a
    registered runner must be removed (a missing GitHub secret does not stop deleting done runners).
    ``on_deleted`` is told the name of each runner as soon as its delete returned, also in a pass that fails.
    ``removed`` records each registration GitHub confirmed gone (removed or not found), so the runner's own
    deletion path does not ask again; ``children`` each pod and JIT Secret a batch deleted."""
    result = CleanupResult(deleted=[], removed=[], busy=[])
    errors: list[BaseException] = []
    limit = asyncio.Semaphore(max(1, concurrency))
    cached: list[ActionsClient] = []
    client_lock = asyncio.Lock()
    doomed: list[RunnerView] = list(plan.delete)
    removed_names: set[str] = set()

    async def github() -> ActionsClient:
        async with client_lock:
            if not cached:
                cached.append(await client())
            return cached[0]

    async def remove(runner: RunnerView) -> bool:
        """True when the runner may go (removed from GitHub, or nothing to remove): it is then deleted below."""
        if runner.runner_id != 0:
            async with limit:
                outcome = await remove_registration(await github(), runner.runner_id)
            if outcome is Removal.BUSY:
                result.busy.append(runner.name)
                return False
            if removed is not None:
                removed.record(runner.uid, runner.runner_id)
        doomed.append(runner)
        removed_names.add(runner.name)
        return True

    if plan.remove_limit is None:
        removals = await asyncio.gather(*(remove(runner) for runner in plan.remove), return_exceptions=True)
        errors.extend(outcome for outcome in removals if isinstance(outcome, BaseException))
    else:
        errors.extend(await _remove_up_to(plan.remove, plan.remove_limit, remove, concurrency=concurrency))

    def deleted(runner: RunnerView) -> None:
        result.deleted.append(runner.name)
        if runner.name in removed_names:
            result.removed.append(runner.name)
        if on_deleted is not None:
            on_deleted(runner.name)

    errors.extend(await _delete_runners(kube, doomed, limit=limit, children=children, deleted=deleted))
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


async def _delete_runners(
    kube: KubeClient,
    runners: Sequence[RunnerView],
    *,
    limit: asyncio.Semaphore,
    children: DeletedChildren | None,
    deleted: Callable[[RunnerView], None],
) -> list[BaseException]:
    """Delete ``runners``: in batches where they carry an instance label, else one by one (see the module
    docstring); ``deleted`` is told of each as soon as its request returned. NotFound counts as deleted.
    The errors of the requests that failed."""
    labelled = [runner for runner in runners if runner.instance]
    alone = [runner for runner in runners if not runner.instance]

    async def one(runner: RunnerView) -> None:
        async with limit:
            await kube.delete(EPHEMERAL_RUNNERS, runner.name, namespace=runner.namespace, missing_ok=True)
        deleted(runner)

    async def batch(namespace: str, chunk: Sequence[RunnerView]) -> None:
        # A runner with no runner ID on record may still be registered: its ID reaches the status a few seconds
        # after registration, and until then only its JIT Secret holds it. Its Secret is left to its own
        # deletion path, which reads the ID there and removes the registration before deleting the Secret.
        targets = {PODS: chunk, SECRETS: [runner for runner in chunk if runner.runner_id != 0]}
        unsettled = {(runner.uid, resource.plural) for resource, named in targets.items() for runner in named}
        if children is not None:
            for uid, plural in unsettled:
                children.expect(uid, plural)
        try:
            try:
                async with limit:
                    await kube.delete_collection(
                        EPHEMERAL_RUNNERS, namespace=namespace, label_selector=_instances_selector(chunk)
                    )
            except Forbidden:
                # A role without `deletecollection` (ARC's, or a copy of it): one by one, as without batches;
                # the runners' own deletion paths then delete their pods and Secrets (settled below).
                _warn_no_deletecollection(EPHEMERAL_RUNNERS.plural)
                await asyncio.gather(*(one(runner) for runner in chunk))
                return
            for runner in chunk:
                deleted(runner)
            for resource, named in targets.items():
                if not named:
                    continue
                gone: list[dict[str, Any]] = []
                try:
                    async with limit:
                        gone = await kube.delete_collection(
                            resource, namespace=namespace, label_selector=_instances_selector(named)
                        )
                except Forbidden:
                    _warn_no_deletecollection(resource.plural)
                # Settled from the answer: deleted is only what this request deleted (a pod whose template
                # overrode the label was not: the runner's deletion path deletes it).
                hit = set(map(controller_uid, gone))
                for runner in named:
                    unsettled.discard((runner.uid, resource.plural))
                    if children is not None:
                        children.settle(runner.uid, resource.plural, deleted=runner.uid in hit)
        finally:
            if children is not None:
                for uid, plural in unsettled:
                    children.settle(uid, plural, deleted=False)

    # One namespace: the runners of a plan are one set's, and a set owns only runners of its own namespace.
    batches = [batch(chunk[0].namespace, chunk) for chunk in _chunks(labelled, BATCH_SIZE)]
    outcomes = await asyncio.gather(*batches, *(one(runner) for runner in alone), return_exceptions=True)
    return [outcome for outcome in outcomes if isinstance(outcome, BaseException)]


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


def _chunks(items: Sequence[RunnerView], size: int) -> list[Sequence[RunnerView]]:
    """``items`` cut into consecutive slices of at most ``size``."""
    return [items[start : start + size] for start in range(0, len(items), size)]


def _instances_selector(runners: Sequence[RunnerView]) -> str:
    """The label selector of exactly ``runners``' objects (their runner, pod and JIT Secret)."""
    return f"{LABEL_RUNNER_INSTANCE} in ({','.join(runner.instance for runner in runners)})"


@functools.cache
def _warn_no_deletecollection(plural: str) -> None:
    """Once per process and resource: the controller's role does not grant ``deletecollection``."""
    log.warning(
        "the controller may not deletecollection %s: runners are deleted one by one, at up to four requests"
        ' each (grant the verb: docs/controllers.md, "Deleting runners in batches")',
        plural,
    )
