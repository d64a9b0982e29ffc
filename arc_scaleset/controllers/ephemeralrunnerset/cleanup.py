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
from dataclasses import dataclass, field
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
from arc_scaleset.kube.resources import PODS, SECRETS, Resource

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
    run = _Cleanup(client, asyncio.Semaphore(max(1, concurrency)), removed, on_deleted, doomed=list(plan.delete))
    errors: list[BaseException] = []
    if plan.remove_limit is None:
        removals = await asyncio.gather(*(run.remove(runner) for runner in plan.remove), return_exceptions=True)
        errors.extend(outcome for outcome in removals if isinstance(outcome, BaseException))
    else:
        errors.extend(await _remove_up_to(plan.remove, plan.remove_limit, run.remove, concurrency=concurrency))
    deleter = _Deleter(kube, run.limit, children, run.deleted)
    errors.extend(await deleter.delete(run.doomed))
    _raise_errors(errors)
    if run.result.busy:
        log.info("runners kept because GitHub says they run a job: %s", ", ".join(run.result.busy))
    return run.result


@dataclass
class _Cleanup:
    """The removals of one :func:`execute_cleanup` and what they did: the runners that may go (``doomed``, the
    done ones first) and the result."""

    client: ClientSource
    limit: asyncio.Semaphore
    registrations: RemovedRegistrations | None
    on_deleted: Callable[[str], None] | None
    doomed: list[RunnerView]
    result: CleanupResult = field(default_factory=lambda: CleanupResult(deleted=[], removed=[], busy=[]))
    removed_names: set[str] = field(default_factory=set)
    _github: ActionsClient | None = None
    _github_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def github(self) -> ActionsClient:
        """The GitHub client, made on first use (once, whatever the concurrency)."""
        async with self._github_lock:
            if self._github is None:
                self._github = await self.client()
            return self._github

    async def remove(self, runner: RunnerView) -> bool:
        """True when the runner may go (removed from GitHub, or nothing to remove): it is then deleted."""
        if runner.runner_id != 0:
            async with self.limit:
                outcome = await remove_registration(await self.github(), runner.runner_id)
            if outcome is Removal.BUSY:
                self.result.busy.append(runner.name)
                return False
            if self.registrations is not None:
                self.registrations.record(runner.uid, runner.runner_id)
        self.doomed.append(runner)
        self.removed_names.add(runner.name)
        return True

    def deleted(self, runner: RunnerView) -> None:
        self.result.deleted.append(runner.name)
        if runner.name in self.removed_names:
            self.result.removed.append(runner.name)
        if self.on_deleted is not None:
            self.on_deleted(runner.name)


def _raise_errors(errors: list[BaseException]) -> None:
    """Raise what the cleanup's ``errors`` come to: a cancellation as such, then bad input (the cause of every
    removal failing: reported as such), else all of them as one :class:`CleanupFailedError`."""
    for error in errors:
        if isinstance(error, asyncio.CancelledError):
            raise error
    for error in errors:
        if isinstance(error, ConfigurationError):
            raise error
    if errors:
        raise CleanupFailedError(errors)


@dataclass
class _Deleter:
    """Deletes runners: in batches where they carry an instance label, else one by one (see the module
    docstring); ``deleted`` is told of each as soon as its request returned. NotFound counts as deleted."""

    kube: KubeClient
    limit: asyncio.Semaphore
    children: DeletedChildren | None
    deleted: Callable[[RunnerView], None]

    async def delete(self, runners: Sequence[RunnerView]) -> list[BaseException]:
        """Delete ``runners``; the errors of the requests that failed."""
        labelled = [runner for runner in runners if runner.instance]
        alone = [runner for runner in runners if not runner.instance]
        # One namespace: the runners of a plan are one set's, and a set owns only runners of its own namespace.
        batches = [self.batch(chunk[0].namespace, chunk) for chunk in _chunks(labelled, BATCH_SIZE)]
        outcomes = await asyncio.gather(*batches, *(self.one(runner) for runner in alone), return_exceptions=True)
        return [outcome for outcome in outcomes if isinstance(outcome, BaseException)]

    async def one(self, runner: RunnerView) -> None:
        async with self.limit:
            await self.kube.delete(EPHEMERAL_RUNNERS, runner.name, namespace=runner.namespace, missing_ok=True)
        self.deleted(runner)

    async def batch(self, namespace: str, chunk: Sequence[RunnerView]) -> None:
        """The runners of ``chunk``, then their pods and JIT Secrets, by ``deletecollection``."""
        # A runner with no runner ID on record may still be registered: its ID reaches the status a few seconds
        # after registration, and until then only its JIT Secret holds it. Its Secret is left to its own
        # deletion path, which reads the ID there and removes the registration before deleting the Secret.
        targets = {PODS: chunk, SECRETS: [runner for runner in chunk if runner.runner_id != 0]}
        unsettled = {(runner.uid, resource.plural) for resource, named in targets.items() for runner in named}
        if self.children is not None:
            for uid, plural in unsettled:
                self.children.expect(uid, plural)
        try:
            try:
                async with self.limit:
                    await self.kube.delete_collection(
                        EPHEMERAL_RUNNERS, namespace=namespace, label_selector=_instances_selector(chunk)
                    )
            except Forbidden:
                # A role without `deletecollection` (ARC's, or a copy of it): one by one, as without batches;
                # the runners' own deletion paths then delete their pods and Secrets (settled below).
                _warn_no_deletecollection(EPHEMERAL_RUNNERS.plural)
                await asyncio.gather(*(self.one(runner) for runner in chunk))
                return
            for runner in chunk:
                self.deleted(runner)
            for resource, named in targets.items():
                if named:
                    await self.children_of(resource, namespace, named, unsettled)
        finally:
            if self.children is not None:
                for uid, plural in unsettled:
                    self.children.settle(uid, plural, deleted=False)

    async def children_of(
        self, resource: Resource, namespace: str, named: Sequence[RunnerView], unsettled: set[tuple[str, str]]
    ) -> None:
        """Delete the ``resource`` objects (pods or JIT Secrets) of ``named`` runners and settle them."""
        gone: list[dict[str, Any]] = []
        try:
            async with self.limit:
                gone = await self.kube.delete_collection(
                    resource, namespace=namespace, label_selector=_instances_selector(named)
                )
        except Forbidden:
            _warn_no_deletecollection(resource.plural)
        # Settled from the answer: deleted is only what this request deleted (a pod whose template overrode the
        # label was not: the runner's deletion path deletes it).
        hit = set(map(controller_uid, gone))
        for runner in named:
            unsettled.discard((runner.uid, resource.plural))
            if self.children is not None:
                self.children.settle(runner.uid, resource.plural, deleted=runner.uid in hit)


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
