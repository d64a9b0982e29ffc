"""The EphemeralRunner controller: one JIT registration, its Secret and its pod, until the runner is done.

A pass has the shape of docs/controllers.md ("The shape of a pass"); the scope is
:class:`~arc_scaleset.controllers.ephemeralrunner.scope.RunnerPass`, the memory slot
:class:`~arc_scaleset.controllers.ephemeralrunner.memory.RunnerMemory`.

Only a pod the runner controls is its pod, and only a JIT Secret it controls its Secret (a controller owner
reference with its UID, :mod:`~arc_scaleset.controllers.ephemeralrunner.ownership`): another object under its
name is in the way, never followed, read for a runner ID or deleted. The runner names it (``ObjectInTheWay``:
a Warning Event and the status's reason and message) and is retried with backoff. Its phases, in order:

1. ``deleting`` -> :mod:`~arc_scaleset.controllers.ephemeralrunner.deletion` (remove the registration, delete
   pod and Secret, drop the finalizers), once per runner in this process;
2. ``own_writes``: the status as this process last made it (a write of the previous pass that the cache does
   not show yet is neither repeated nor undone);
3. ``done`` (Succeeded, Failed, Outdated) -> delete pod and Secret; the EphemeralRunnerSet deletes the runner
   (a runner this process deleted itself, after ``Succeeded``, leaves them to its deletion path);
4. ``finalizers``: ensure both (runners the set creates already carry them: no write);
5. ``awaiting_pod``: a pod this process created and its cache does not show yet is waited for;
6. ``pod_in_the_way``: a cached pod under the runner's name that it does not control -> ``ObjectInTheWay``
   (unless the runner's own pod vanished while it ran: step 9 finds it lost);
7. ``register`` (:mod:`~arc_scaleset.controllers.ephemeralrunner.registration`): no pod yet, or no runner ID
   in the status -> the runner ID from the JIT Secret, or a new registration;
8. ``failures``: more than 5 failures -> delete the runner;
9. ``create_pod`` (the outcome is :mod:`~arc_scaleset.controllers.ephemeralrunner.creation`): inside the
   failure backoff (0/5/10/20/40/80 s) -> wait; a runner seen running whose pod vanished is lost; else create
   the pod, and for a new runner's fresh registration its JIT Secret in the same round (the pod only names the
   Secret; the kubelet waits for it). A pod whose Secret could not be created (or whose name a Secret held
   already) is deleted again, and the runner's next pass in this process reads the Secret before it trusts the
   status. A pod name taken by a pod the cache does not show is read once, and named when it is not the
   runner's. The status changes of
   this step (runner ID and name, phase ``Pending``) are held back: they go out with the write of the pod's
   first state, or on their own after ``REGISTRATION_STATUS_DELAY`` seconds. A pod that starts at once then
   costs one status write instead of two -- the API server's most expensive request of a scale-up -- and the
   Secret stays the record of the runner ID meanwhile (a restart reads it). A pod rejected by the API server
   marks the runner Failed with ARC's reason ``InvalidPod``; a quota rejection waits, for at most 10 minutes
   of the runner's life;
10. ``follow_pod`` (the verdict is :mod:`~arc_scaleset.controllers.ephemeralrunner.outcome`): mirror
   phase/readiness; Succeeded then delete; Outdated and unregister; retry (delete the pod, record the
   failure); delete the runner (a job was lost, or the pod was OOM-killed, evicted or lost with its node);
   or fail fast when it can never start. A pod whose runner has not started within ``runner_pending_timeout``
   is retried like a failed pod; until then the pass comes back when the timeout would pass.

The status is written once, at the end of the pass (:meth:`RunnerPass.write_status`); what must follow it
(delete the runner, unregister, delete the pod to retry) runs after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from datetime import timedelta
from typing import Any, Final

from arc_scaleset.api.ephemeralrunner import DONE_PHASES, EPHEMERAL_RUNNERS
from arc_scaleset.api.job_window import runner_online, timeline_completion
from arc_scaleset.api.keys import (
    EPHEMERAL_RUNNER_FINALIZER,
    EPHEMERAL_RUNNER_REGISTRATION_FINALIZER,
    EphemeralRunnerPhase,
)
from arc_scaleset.api.views import EphemeralRunnerView
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunner.builders import desired_runner_pod
from arc_scaleset.controllers.ephemeralrunner.cost_labels import label_pod_for_cost
from arc_scaleset.controllers.ephemeralrunner.creation import Created, Creation, creation_outcome
from arc_scaleset.controllers.ephemeralrunner.deletion import cleanup_runner_resources, finalize_runner
from arc_scaleset.controllers.ephemeralrunner.memory import RunnerMemory
from arc_scaleset.controllers.ephemeralrunner.outcome import (
    MAX_FAILURES,
    Outcome,
    Verdict,
    backoff_remaining,
    failure_count,
    pod_outcome,
)
from arc_scaleset.controllers.ephemeralrunner.ownership import own_or_in_the_way
from arc_scaleset.controllers.ephemeralrunner.registration import NAME_COLLISION_REQUEUE, register
from arc_scaleset.controllers.ephemeralrunner.scope import RunnerPass
from arc_scaleset.controllers.ephemeralrunner.timeline import JobWaits
from arc_scaleset.controllers.errors import ObjectInTheWay
from arc_scaleset.controllers.failure_report import ReconcileFailureReporter
from arc_scaleset.controllers.metrics import DeletedReason
from arc_scaleset.controllers.reconcile_pass import ObjectMemory, Phase, gather, run_phases
from arc_scaleset.controllers.runner_github import RunnerClients, remove_registration
from arc_scaleset.kube.client import Preconditions
from arc_scaleset.kube.conditions import format_time
from arc_scaleset.kube.controller import Controller, Request, Result
from arc_scaleset.kube.errors import Conflict, NotFound
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.ownerrefs import is_controlled_by
from arc_scaleset.kube.resources import PODS, SECRETS
from arc_scaleset.kube.retry import update_with_retry
from arc_scaleset.kube.views import ObjectView
from arc_scaleset.kube.workqueue import RateLimiter

CONTROLLER_NAME: Final = "ephemeralrunner"
QUOTA_GIVE_UP_AFTER: Final = timedelta(minutes=10)
POD_EXISTS_REQUEUE: Final = 5.0
QUOTA_REQUEUE: Final = 30.0
REGISTRATION_STATUS_DELAY: Final = 5.0
"""Seconds a new runner's ID waits to be written together with its pod's first state (step 9). A runner
without a recorded ID is not yet a candidate for scale-down, so this is also how long that can wait."""
_FINALIZERS: Final = (EPHEMERAL_RUNNER_FINALIZER, EPHEMERAL_RUNNER_REGISTRATION_FINALIZER)


class EphemeralRunnerReconciler:
    """Reconciles EphemeralRunners (primary) and their pods (owned); see the module docstring."""

    def __init__(self, ctx: ControllerContext) -> None:
        self._ctx = ctx
        self._kube = ctx.kube
        self._runners = ctx.cache(EPHEMERAL_RUNNERS)
        self._pods = ctx.cache(PODS)
        self.clients = RunnerClients(ctx.github, clock=ctx.clock)
        self._new_slot = functools.partial(RunnerMemory, clock=ctx.clock, pod_wait=POD_EXISTS_REQUEUE)
        self.memory = ObjectMemory(self._new_slot)
        self._job_waits = JobWaits(ctx.metrics, ctx.traces)
        self._phases: tuple[Phase[RunnerPass], ...] = (
            self._deleting,
            self._own_writes,
            self._done,
            self._finalizers,
            self._awaiting_pod,
            self._pod_in_the_way,
            register,
            self._failures,
            self._create_pod,
            self._follow_pod,
        )

    def controller(self, *, rate_limiter: RateLimiter | None = None) -> Controller:
        return Controller(
            CONTROLLER_NAME,
            EPHEMERAL_RUNNERS,
            self.reconcile,
            owns=[PODS],
            concurrency=self._ctx.settings.runner_max_concurrent_reconciles,
            rate_limiter=rate_limiter,
            clock=self._ctx.clock,
            # An EphemeralRunner's status has no conditions: a failure that lasts is told in Events.
            failure_reporter=ReconcileFailureReporter(self._ctx, EPHEMERAL_RUNNERS, conditions=False),
        )

    async def reconcile(self, request: Request) -> Result:
        er = gather(self._runners, self.memory, request)
        if er is None:
            return Result()
        view = EphemeralRunnerView(er)
        # Only a pod the runner controls is its pod; another under its name is in the way (ownership.py).
        pod, in_the_way = own_or_in_the_way(self._pods.get(request.namespace, request.name), er)
        scope = RunnerPass(request, view, pod, self.memory.slot(request, view.uid), self._ctx, self.clients)
        scope.pod_in_the_way = in_the_way
        try:
            result = await run_phases(scope, self._phases)
        finally:
            await scope.write_status()
        for action in scope.then:
            await action()
        return scope.requeue_for_deferred(result)

    def _forget(self, scope: RunnerPass) -> None:
        """Forget the runner (being deleted, or done); what the rest of this pass notes is not kept."""
        self.memory.forget(scope.request)
        scope.slot = self._new_slot()

    # -- phases -----------------------------------------------------------------------------------------

    async def _deleting(self, scope: RunnerPass) -> Result | None:
        if not scope.runner.is_deleting:
            return None
        if scope.slot.finalized:
            return Result()
        secret_uid = scope.slot.secret_uid
        self._forget(scope)
        result = await finalize_runner(self._ctx, scope.runner.raw, clients=self.clients, secret_uid=secret_uid)
        if result.requeue_after is None:
            self.memory.slot(scope.request, scope.runner.uid).finalized = True
            self._ctx.runner_deletions.forget(scope.runner.uid)
        return result

    async def _own_writes(self, scope: RunnerPass) -> Result | None:
        cached = scope.runner
        status = scope.slot.status(cached.resource_version, cached.status)
        if status is not cached.status:
            scope.runner = EphemeralRunnerView({**cached.raw, "status": status})
        scope.runner_id = scope.runner.runner_id
        return None

    async def _done(self, scope: RunnerPass) -> Result | None:
        if scope.runner.phase not in DONE_PHASES:
            return None
        if scope.slot.deleted:
            return Result()  # deleted by this process: its deletion path deletes the pod and the Secret
        secret_uid = scope.slot.secret_uid
        self._forget(scope)
        await cleanup_runner_resources(self._kube, scope.runner.raw, pod=scope.pod, secret_uid=secret_uid)
        return Result()

    async def _finalizers(self, scope: RunnerPass) -> Result | None:
        if not all(scope.runner.has_finalizer(f) for f in _FINALIZERS):
            await update_with_retry(
                self._kube,
                EPHEMERAL_RUNNERS,
                scope.name,
                namespace=scope.namespace,
                mutate=_add_finalizers,
                clock=self._ctx.clock,
            )
        return None

    async def _awaiting_pod(self, scope: RunnerPass) -> Result | None:
        pod_wait = scope.slot.awaiting_pod(cached=scope.pod is not None)
        if pod_wait > 0 and scope.runner_id:
            # We created the pod a moment ago and our cache has not shown it yet: its event wakes us.
            return Result(requeue_after=pod_wait)
        return None

    async def _pod_in_the_way(self, scope: RunnerPass) -> Result | None:
        """A cached pod under the runner's name that the runner does not control: never followed, never
        deleted; the runner says so and waits (raises). Not when the runner's own pod vanished while it ran:
        that runner is lost (the pod step), whoever holds the name now."""
        if scope.pod_in_the_way is None or self._pod_vanished(scope):
            return None
        await scope.in_the_way("Pod", scope.pod_in_the_way)

    def _pod_vanished(self, scope: RunnerPass) -> bool:
        """The runner had been seen running and its pod is gone without us deleting it (we set the phase back to
        Pending whenever we delete a pod to retry): node lost and pod garbage-collected, or deleted by hand."""
        return scope.runner.phase == EphemeralRunnerPhase.RUNNING and scope.slot.retrying_pod is None

    async def _failures(self, scope: RunnerPass) -> Result | None:
        failures = failure_count(scope.runner.raw)
        if failures <= MAX_FAILURES:
            return None
        await scope.event("Warning", "TooManyFailures", f"the runner pod failed {failures} times")
        await scope.delete_runner(DeletedReason.FAILED)
        return Result()

    async def _create_pod(self, scope: RunnerPass) -> Result | None:
        """No pod: create it (and the JIT Secret of a fresh registration, when the registration gave one)."""
        if scope.pod is not None:
            return None
        if self._pod_vanished(scope):
            # The registration may be mid-job on a dead runner: terminal.
            await self._lost(scope, Outcome(Verdict.LOST, reason="PodDeleted", message="the runner pod disappeared"))
            return Result()
        wait = backoff_remaining(scope.runner.raw, now=self._ctx.clock.now())
        if wait > 0:
            return Result(requeue_after=wait)
        pod = desired_runner_pod(scope.runner.raw, runner_id=scope.runner_id, version=self._ctx.settings.build_version)
        if not scope.runner.phase:
            scope.changes["phase"] = EphemeralRunnerPhase.PENDING
        # The pod and its JIT Secret do not depend on each other at the API server: send both at once.
        created, secret_error = await asyncio.gather(
            self._kube.create(PODS, pod), self._create_new_secret(scope), return_exceptions=True
        )
        return await self._created(scope, creation_outcome(created, secret_error))

    async def _follow_pod(self, scope: RunnerPass) -> Result | None:
        """A pod: act on its verdict."""
        pod = scope.pod
        if pod is None:
            return None
        if scope.slot.retrying_pod == ObjectView(pod).uid:
            return Result()  # the pod we deleted to retry, still on its way out
        await label_pod_for_cost(self._ctx, scope.runner.raw, pod, scope.slot)
        self._job_waits.observe(scope.runner.raw, pod)
        outcome = pod_outcome(
            pod,
            has_job=scope.runner.has_job,
            runner_phase=scope.runner.phase,
            now=self._ctx.clock.now(),
            pending_timeout=self._ctx.settings.runner_pending_timeout,
        )
        return await self._act(scope, pod, outcome)

    # -- executing the outcomes -------------------------------------------------------------------------

    async def _created(self, scope: RunnerPass, creation: Creation) -> Result:
        match creation.outcome:
            case Created.SECRET_EXISTS | Created.SECRET_FAILED:
                return await self._secret_failed(scope, creation)
            case Created.QUOTA_EXCEEDED:
                return await self._quota_exceeded(scope, creation.message)
            case Created.INVALID:
                await scope.event("Warning", "InvalidPod", creation.message)
                await self._mark_done(scope, EphemeralRunnerPhase.FAILED, "InvalidPod", creation.message)
                return Result()
        if creation.outcome is Created.CREATED and scope.runner.reason == ObjectInTheWay.reason:
            scope.changes.update(reason="", message="")  # the object in the way is gone: ours is made
        # Step 9: the status changes wait for the pod's first state (see REGISTRATION_STATUS_DELAY).
        changes, scope.changes = scope.changes, {}
        scope.slot.defer_status(changes, for_seconds=REGISTRATION_STATUS_DELAY)
        if creation.outcome is Created.POD_EXISTS:
            return await self._pod_exists(scope)
        if creation.error is not None:
            raise creation.error
        scope.slot.retrying_pod = None
        scope.slot.created_pod()
        return Result()

    async def _pod_exists(self, scope: RunnerPass) -> Result:
        """The pod's name is taken although the cache shows no pod of the runner: ours, not cached yet, or one
        the cache does not hold (it holds only pods with the scale set's label) in the way. Read to tell."""
        with contextlib.suppress(NotFound):
            existing = await self._kube.get(PODS, scope.name, namespace=scope.namespace)
            if not is_controlled_by(existing, scope.runner.raw):
                await scope.in_the_way("Pod", existing)
        return Result(requeue_after=POD_EXISTS_REQUEUE)

    async def _act(self, scope: RunnerPass, pod: Object, outcome: Outcome) -> Result:
        runner = scope.runner
        match outcome.verdict:
            case Verdict.WAIT:
                return Result(requeue_after=outcome.recheck_after)
            case Verdict.MIRROR:
                if outcome.phase != runner.phase or outcome.ready != runner.ready:
                    scope.changes.update(
                        phase=outcome.phase, ready=outcome.ready, reason=outcome.reason, message=outcome.message
                    )
                    scope.changes.update(runner_online(pod))  # when it went online: a finished pod no longer says
                return Result(requeue_after=outcome.recheck_after)
            case Verdict.SUCCEEDED:
                # Told to the set before the Succeeded is written, not only before the delete: the write's event
                # can reach the set before this pass has its answer, and the set would reap the runner itself
                # (its marker written first, then a second DELETE; controllers/handoff.py).
                self._ctx.runner_deletions.record(runner.uid)
                scope.changes.update(
                    phase=EphemeralRunnerPhase.SUCCEEDED, ready=False, reason=outcome.reason, message=outcome.message
                )
                # The job's timeline outlives the pod: its set keeps it once the runner is gone (api/job_window.py).
                scope.changes.update(timeline_completion(runner.raw, pod))
                scope.then.append(functools.partial(scope.delete_runner, DeletedReason.SUCCEEDED))
            case Verdict.OUTDATED:
                await self._mark_done(scope, EphemeralRunnerPhase.OUTDATED, "Outdated", outcome.message)
            case Verdict.CANNOT_START:
                await scope.event("Warning", outcome.reason, outcome.message)
                await self._mark_done(scope, EphemeralRunnerPhase.FAILED, outcome.reason, outcome.message)
            case Verdict.RETRY:
                await self._retry_pod(scope, ObjectView(pod), outcome)
            case Verdict.DELETE_RUNNER:
                await scope.event("Warning", "RunnerPodFailed", f"{outcome.message}; the job it ran is lost")
                await scope.delete_runner(DeletedReason.POD_FAILED)
                await scope.best_effort_remove(scope.runner_id)
            case Verdict.LOST:
                await self._lost(scope, outcome)
        return Result()

    async def _create_new_secret(self, scope: RunnerPass) -> BaseException | None:
        """Create the JIT Secret of a fresh registration (if any); the error instead of raising it."""
        if scope.new_secret is None:
            return None
        scope.slot.secret_unconfirmed = True
        try:
            created = await self._kube.create(SECRETS, scope.new_secret)
        except Exception as exc:  # every failure is _secret_failed's to judge, after the other writes
            return exc
        scope.slot.secret_unconfirmed = False
        scope.slot.secret_uid = ObjectView(created).uid
        return None

    async def _secret_failed(self, scope: RunnerPass, creation: Creation) -> Result:
        """The JIT Secret of a fresh registration was not created, while the pod may have been. The step's
        status changes are dropped: the runner's next pass reads the Secret before it trusts the status."""
        scope.changes = {}
        if creation.pod_created:
            # A pod must never wait for a Secret nobody will create, nor start with a JIT config that may be
            # somebody else's (a Secret in the way): take it back, under its UID.
            with contextlib.suppress(Exception):
                await self._kube.delete(PODS, scope.name, namespace=scope.namespace,
                                        preconditions=Preconditions(uid=creation.pod_uid), missing_ok=True)  # fmt: skip
        if creation.outcome is Created.SECRET_EXISTS:
            # A leftover of an earlier registration, or a Secret in the way: the next pass reads it and records
            # its runner ID, or names it. Give back the registration made just now.
            await scope.best_effort_remove(scope.runner_id)
            return Result(requeue_after=NAME_COLLISION_REQUEUE)
        assert creation.error is not None  # SECRET_FAILED carries it
        raise creation.error

    async def _mark_done(self, scope: RunnerPass, phase: EphemeralRunnerPhase, reason: str, message: str) -> None:
        """Failed or Outdated: record it, then unregister (the runner will never run a job)."""
        scope.changes.update(phase=phase, reason=reason, message=message, ready=False)
        if scope.runner_id:
            scope.then.append(functools.partial(remove_registration, await scope.github(), scope.runner_id))

    async def _retry_pod(self, scope: RunnerPass, pod: ObjectView, outcome: Outcome) -> None:
        failures = scope.runner.failures
        if pod.uid and pod.uid not in failures:
            scope.changes["failures"] = {pod.uid: format_time(self._ctx.clock.now())}
            await scope.event(
                "Warning", "RunnerPodFailed", f"{outcome.message}; retrying ({len(failures) + 1} of {MAX_FAILURES})"
            )
        # Pending again: the next pod is not running yet, and a missing pod then means "recreate" rather
        # than "lost".
        scope.changes.update(
            ready=False, reason=outcome.reason, message=outcome.message, phase=EphemeralRunnerPhase.PENDING
        )
        # Status first, then the pod: after a crash in between, the runner reads Pending with the failure
        # recorded, and the failed pod is still there to be retried again.
        scope.then.append(functools.partial(self._delete_retried_pod, scope, pod))

    async def _delete_retried_pod(self, scope: RunnerPass, pod: ObjectView) -> None:
        scope.slot.retrying_pod = pod.uid
        if not pod.is_deleting:
            with contextlib.suppress(Conflict):  # gone meanwhile, and the name taken again: not ours to delete
                await self._kube.delete(PODS, scope.name, namespace=scope.namespace,
                                        preconditions=Preconditions(uid=pod.uid), missing_ok=True)  # fmt: skip

    async def _lost(self, scope: RunnerPass, outcome: Outcome) -> None:
        await scope.event("Warning", outcome.reason or "RunnerLost", f"{outcome.message}; deleting the runner")
        await scope.delete_runner(DeletedReason.LOST)

    async def _quota_exceeded(self, scope: RunnerPass, message: str) -> Result:
        created = scope.runner.creation_timestamp
        if created is not None and self._ctx.clock.now() - created > QUOTA_GIVE_UP_AFTER:
            await scope.event("Warning", "QuotaExceeded", f"{message}; giving up after 10 minutes")
            await scope.delete_runner(DeletedReason.QUOTA)
            return Result()
        await scope.event("Warning", "QuotaExceeded", message)
        return Result(requeue_after=QUOTA_REQUEUE)


def _add_finalizers(current: dict[str, Any]) -> dict[str, Any] | None:
    meta = current.setdefault("metadata", {})
    present = list(meta.get("finalizers") or [])
    missing = [f for f in _FINALIZERS if f not in present]
    if not missing:
        return None
    meta["finalizers"] = present + missing
    return current


def setup_ephemeral_runner_controller(ctx: ControllerContext, *, rate_limiter: RateLimiter | None = None) -> Controller:
    """Build the EphemeralRunner controller and register it with the context's manager."""
    controller = EphemeralRunnerReconciler(ctx).controller(rate_limiter=rate_limiter)
    ctx.manager.add(controller)
    return controller
