"""The EphemeralRunner controller: one JIT registration, its Secret and its pod, until the runner is done.

A pass (docs/controllers.md; the pod verdicts are :mod:`~arc_scaleset.controllers.ephemeralrunner.outcome`):

1. being deleted -> :mod:`~arc_scaleset.controllers.ephemeralrunner.deletion` (remove the registration, delete
   pod and Secret, drop the finalizers);
2. done (Succeeded, Failed, Outdated) -> delete pod and Secret; the EphemeralRunnerSet deletes the runner;
3. ensure both finalizers (runners the set creates already carry them: no write);
4. no pod yet, or no runner ID in the status -> ensure the JIT Secret: register the runner with GitHub
   under the runner's name (name collisions: docs/controllers.md) and store the one-shot config. A
   runner's first pass in this process registers without reading the Secret first (see
   :mod:`~arc_scaleset.controllers.ephemeralrunner.memory`; RunnerExists makes it read the Secret);
5. more than 5 failures -> delete the runner; inside the failure backoff (0/5/10/20/40/80 s) -> wait;
6. no pod -> create it; for a new runner's fresh registration the JIT Secret is created in the same round
   (the pod only names the Secret; the kubelet waits for it). A pod whose Secret could not be created is
   deleted again, and the runner's next pass in this process reads the Secret before it trusts the status.
   The status changes of this step (runner ID and name, phase ``Pending``) are held back: they go out with
   the write of the pod's first state, or on their own after ``REGISTRATION_STATUS_DELAY`` seconds. A pod
   that starts at once then costs one status write instead of two -- the API server's most expensive
   request of a scale-up -- and the Secret stays the record of the runner ID meanwhile (a restart reads
   it). A pod rejected by the API server marks the runner Failed with ARC's reason ``InvalidPod`` and message
   ``Failed to create the pod: <the API server's message>``; a quota rejection waits, for at most 10 minutes
   of the runner's life; a pod that vanished after the runner ran is a lost runner; a pod this process
   created and its cache does not show yet is waited for, not created again;
7. a pod -> act on its verdict: mirror phase/readiness; Succeeded then delete; Outdated and unregister;
   retry (delete the pod, record the failure); delete the runner (a job was lost, or the pod was
   OOM-killed, evicted or lost with its node); or fail fast when it can never start. A pod whose runner
   has not started within ``runner_pending_timeout`` is retried like a failed pod; until then the pass
   comes back when the timeout would pass (nothing else may wake it).

Status is written at most once per pass, as a merge patch of the fields this pass changes (the listener
writes the job fields of the same status concurrently; neither write can drop the other's fields). A pass
reads the status through :class:`~arc_scaleset.controllers.ephemeralrunner.memory.RunnerMemory`, so a write of the
previous pass that the cache does not show yet is neither repeated nor undone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta
from typing import Any, Final

from arc_scaleset.api.ephemeralrunner import DONE_PHASES, EPHEMERAL_RUNNERS
from arc_scaleset.api.keys import (
    EPHEMERAL_RUNNER_FINALIZER,
    EPHEMERAL_RUNNER_REGISTRATION_FINALIZER,
    EphemeralRunnerPhase,
)
from arc_scaleset.api.views import EphemeralRunnerView
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunner.builders import (
    desired_jit_secret,
    desired_runner_pod,
    runner_work_folder,
    secret_runner_id,
)
from arc_scaleset.controllers.ephemeralrunner.cost_labels import label_pod_for_cost
from arc_scaleset.controllers.ephemeralrunner.deletion import (
    cleanup_runner_resources,
    finalize_runner,
)
from arc_scaleset.controllers.ephemeralrunner.memory import RunnerMemory
from arc_scaleset.controllers.ephemeralrunner.outcome import (
    MAX_FAILURES,
    Outcome,
    Verdict,
    backoff_remaining,
    failure_count,
    pod_outcome,
)
from arc_scaleset.controllers.ephemeralrunner.timeline import observe_job_wait
from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.controllers.failure_report import ReconcileFailureReporter
from arc_scaleset.controllers.metrics import DeletedReason, runner_set_labels
from arc_scaleset.controllers.runner_github import RunnerClients, remove_registration
from arc_scaleset.github import ActionsClient, GitHubError, RunnerExists
from arc_scaleset.kube.client import PatchType
from arc_scaleset.kube.conditions import format_time
from arc_scaleset.kube.controller import Controller, Request, Result
from arc_scaleset.kube.errors import AlreadyExists, Forbidden, Invalid, NotFound
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.resources import PODS, SECRETS
from arc_scaleset.kube.retry import update_with_retry
from arc_scaleset.kube.views import ObjectView
from arc_scaleset.kube.workqueue import RateLimiter

log = logging.getLogger(__name__)

CONTROLLER_NAME: Final = "ephemeralrunner"
QUOTA_EXCEEDED_MARKER: Final = "exceeded quota:"
QUOTA_GIVE_UP_AFTER: Final = timedelta(minutes=10)
POD_EXISTS_REQUEUE: Final = 5.0
QUOTA_REQUEUE: Final = 30.0
NAME_COLLISION_REQUEUE: Final = 1.0
REGISTRATION_STATUS_DELAY: Final = 5.0
"""Seconds a new runner's ID waits to be written together with its pod's first state (step 6). A runner
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
        self.memory = RunnerMemory(clock=ctx.clock, pod_wait=POD_EXISTS_REQUEUE)
        self.retrying: dict[str, str] = {}
        """Runner UID -> UID of the pod this process deleted to retry it. Our caches may show the pod gone
        before they show our own status write (two watch streams), so "the pod vanished while Running" must
        not be mistaken for a lost pod when we deleted it ourselves."""
        self.finalized: dict[str, str] = {}
        """Key -> UID of a runner whose deletion path this process completed (our finalizers removed). Its pod's
        and Secret's deletion events arrive before the cache shows the runner gone; without this, each of them
        ran the whole path again: a GitHub call, two deletes and a read per event (issue 20)."""

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
        er = self._runners.get(request.namespace, request.name)
        key = str(request)
        if er is None:
            self.memory.forget(key)
            self.finalized.pop(key, None)
            return Result()
        view = EphemeralRunnerView(er)
        if view.is_deleting:
            self.retrying.pop(view.uid, None)
            self.memory.forget(key)
            if self.finalized.get(key) == view.uid:
                return Result()
            result = await finalize_runner(self._ctx, er, clients=self.clients)
            if result.requeue_after is None:
                self.finalized[key] = view.uid
            return result
        status = self.memory.status(key, view.uid, view.resource_version, view.status)
        if status.get("phase") in DONE_PHASES:
            self.memory.forget(key)
            await cleanup_runner_resources(self._kube, er, pod=self._pods.get(request.namespace, request.name))
            return Result()
        if status is not view.status:
            er = {**er, "status": status}
        if not all(view.has_finalizer(f) for f in _FINALIZERS):
            await self._add_finalizers(er)
        return await _RunnerPass(self, er).run()

    async def _add_finalizers(self, er: Object) -> None:
        def add(current: dict[str, Any]) -> dict[str, Any] | None:
            meta = current.setdefault("metadata", {})
            present = list(meta.get("finalizers") or [])
            missing = [f for f in _FINALIZERS if f not in present]
            if not missing:
                return None
            meta["finalizers"] = present + missing
            return current

        view = ObjectView(er)
        await update_with_retry(
            self._kube, EPHEMERAL_RUNNERS, view.name, namespace=view.namespace, mutate=add, clock=self._ctx.clock
        )


class _RunnerPass:
    """One reconcile of a live, not-done EphemeralRunner: gathers status changes, writes them once."""

    def __init__(self, owner: EphemeralRunnerReconciler, er: Object) -> None:
        self._ctx = owner._ctx
        self._kube = owner._kube
        self._er = er
        # The runner as this pass knows it: the cached object, with the status as this process last made it.
        self._view = EphemeralRunnerView(er)
        self._name = self._view.name
        self._namespace = self._view.namespace
        self._key = f"{self._namespace}/{self._name}"
        self._pod = owner._pods.get(self._namespace, self._name)
        self._retrying = owner.retrying
        self._memory = owner.memory
        self._clients = owner.clients
        self._uid = self._view.uid
        self._resource_version = self._view.resource_version
        self._changes: dict[str, Any] = {}
        self._client: ActionsClient | None = None

    # -- the pass ---------------------------------------------------------------------------------------

    async def run(self) -> Result:
        result = await self._run()
        deferred, remaining = self._memory.deferred_status(self._key, self._uid)
        if not deferred:
            return result
        if remaining <= 0:
            await self._flush()
            return result
        if result.requeue_after is None or result.requeue_after > remaining:
            return Result(requeue_after=remaining)
        return result

    async def _run(self) -> Result:
        runner_id = self._view.runner_id
        pod_wait = self._memory.awaiting_pod(self._key, self._uid, cached=self._pod is not None)
        if pod_wait > 0 and runner_id:
            # We created the pod a moment ago and our cache has not shown it yet: its event wakes us.
            return Result(requeue_after=pod_wait)
        new_secret: dict[str, Any] | None = None
        if self._pod is None or runner_id == 0 or self._memory.secret_unconfirmed(self._key, self._uid):
            ensured = await self._ensure_jit_secret()
            if isinstance(ensured, Result):
                return ensured
            if isinstance(ensured, tuple):
                ensured, new_secret = ensured
            if runner_id != ensured:
                runner_id = ensured
                self._changes.update(runnerId=ensured, runnerName=self._name)

        if failure_count(self._er) > MAX_FAILURES:
            await self._event("Warning", "TooManyFailures", f"the runner pod failed {failure_count(self._er)} times")
            await self._delete_runner(DeletedReason.FAILED)
            return Result()

        if self._pod is None:
            return await self._without_pod(runner_id, new_secret=new_secret)
        return await self._with_pod(runner_id, self._pod)

    async def _without_pod(self, runner_id: int, *, new_secret: dict[str, Any] | None = None) -> Result:
        """Create the pod (and ``new_secret``, the JIT Secret of a fresh registration, when given)."""
        if self._view.phase == EphemeralRunnerPhase.RUNNING and self._uid not in self._retrying:
            # The runner had been seen running and the pod is gone without us deleting it (we set the
            # phase back to Pending whenever we delete a pod to retry): node lost and pod garbage-collected,
            # or deleted by hand. The registration may be mid-job on a dead runner: terminal.
            await self._lost(Outcome(Verdict.LOST, reason="PodDeleted", message="the runner pod disappeared"))
            return Result()
        wait = backoff_remaining(self._er, now=self._ctx.clock.now())
        if wait > 0:
            await self._flush()
            return Result(requeue_after=wait)
        pod = desired_runner_pod(self._er, runner_id=runner_id, version=self._ctx.settings.build_version)
        if not self._view.phase:
            self._changes["phase"] = EphemeralRunnerPhase.PENDING
        # The pod and its JIT Secret do not depend on each other at the API server: send both at once.
        created, secret_error = await asyncio.gather(
            self._kube.create(PODS, pod), self._create_new_secret(new_secret), return_exceptions=True
        )
        if secret_error is not None:
            return await self._secret_failed(secret_error, created, runner_id)
        if isinstance(created, Invalid | Forbidden):
            # ARC's wording (reason InvalidPod, "Failed to create the pod: " + the API server's message), which
            # tooling matches; the API server's message alone, never our request line.
            if isinstance(created, Forbidden) and QUOTA_EXCEEDED_MARKER in created.message:
                return await self._quota_exceeded(created.message)
            message = f"Failed to create the pod: {created.message}"
            await self._event("Warning", "InvalidPod", message)
            await self._mark_done(EphemeralRunnerPhase.FAILED, "InvalidPod", message, runner_id)
            return Result()
        # Step 6: the status changes wait for the pod's first state (see REGISTRATION_STATUS_DELAY).
        changes, self._changes = self._changes, {}
        self._memory.defer_status(self._key, self._uid, changes, for_seconds=REGISTRATION_STATUS_DELAY)
        if isinstance(created, AlreadyExists):
            # Our cache has not seen the pod yet (or someone else holds the name): look again shortly.
            return Result(requeue_after=POD_EXISTS_REQUEUE)
        if isinstance(created, BaseException):
            raise created
        self._retrying.pop(self._uid, None)
        self._memory.created_pod(self._key, self._uid)
        return Result()

    async def _with_pod(self, runner_id: int, pod: Object) -> Result:
        if self._retrying.get(self._uid) == ObjectView(pod).uid:
            await self._flush()  # the pod we deleted to retry, still on its way out
            return Result()
        await label_pod_for_cost(self._ctx, self._er, pod)
        observe_job_wait(self._ctx, self._er, pod)
        outcome = pod_outcome(
            pod,
            has_job=self._view.has_job,
            runner_phase=self._view.phase,
            now=self._ctx.clock.now(),
            pending_timeout=self._ctx.settings.runner_pending_timeout,
        )
        match outcome.verdict:
            case Verdict.WAIT:
                await self._flush()
                return Result(requeue_after=outcome.recheck_after)
            case Verdict.MIRROR:
                if outcome.phase != self._view.phase or outcome.ready != self._view.ready:
                    self._changes.update(
                        phase=outcome.phase, ready=outcome.ready, reason=outcome.reason, message=outcome.message
                    )
                await self._flush()
                return Result(requeue_after=outcome.recheck_after)
            case Verdict.SUCCEEDED:
                self._changes.update(
                    phase=EphemeralRunnerPhase.SUCCEEDED, ready=False, reason=outcome.reason, message=outcome.message
                )
                await self._flush()
                await self._delete_runner(DeletedReason.SUCCEEDED)
            case Verdict.OUTDATED:
                await self._mark_done(EphemeralRunnerPhase.OUTDATED, "Outdated", outcome.message, runner_id)
            case Verdict.CANNOT_START:
                await self._event("Warning", outcome.reason, outcome.message)
                await self._mark_done(EphemeralRunnerPhase.FAILED, outcome.reason, outcome.message, runner_id)
            case Verdict.RETRY:
                await self._retry_pod(pod, outcome)
            case Verdict.DELETE_RUNNER:
                await self._event("Warning", "RunnerPodFailed", f"{outcome.message}; the job it ran is lost")
                await self._delete_runner(DeletedReason.POD_FAILED)
                await self._best_effort_remove(runner_id)
            case Verdict.LOST:
                await self._lost(outcome)
        return Result()

    # -- JIT registration -------------------------------------------------------------------------------

    async def _ensure_jit_secret(self) -> int | tuple[int, dict[str, Any]] | Result:
        """The runner ID from the JIT Secret, registering the runner first when there is no Secret.

        The first attempt in this process registers without reading the Secret: a Secret can only exist if
        the runner was registered before, and then the service answers RunnerExists and we read it.
        For a fresh runner without a pod (no phase, no failures), the new Secret is returned with the ID,
        not created: the pod step creates it together with the pod.
        """
        first = self._memory.first_registration(self._key, self._uid)
        if not first:
            existing = await self._secret_runner_id()
            if existing is not None:
                return existing

        client = await self._github()
        scale_set_id = self._view.runner_scale_set_id
        try:
            jit = await client.generate_jit_runner_config(
                scale_set_id, name=self._name, work_folder=runner_work_folder(self._er)
            )
        except RunnerExists:
            if first:
                # Registered by an earlier process, which may have stored the config before it stopped.
                existing = await self._secret_runner_id()
                if existing is not None:
                    return existing
            return await self._name_collision(client, scale_set_id)
        secret_body = desired_jit_secret(
            self._er,
            encoded_jit_config=jit.encoded_jit_config,
            runner_id=jit.runner.id,
            runner_name=jit.runner.name or self._name,
            scale_set_id=scale_set_id,
        )
        fresh = not self._view.phase and not self._view.failures
        if self._pod is None and fresh:
            return jit.runner.id, secret_body
        try:
            await self._kube.create(SECRETS, secret_body)
        except AlreadyExists:
            # Only this runner's reconcile writes this name, one at a time: a leftover from an earlier
            # registration. Use what it holds next time, and give back the registration made just now.
            await self._best_effort_remove(jit.runner.id)
            return Result(requeue_after=NAME_COLLISION_REQUEUE)
        return jit.runner.id

    async def _create_new_secret(self, body: dict[str, Any] | None) -> BaseException | None:
        """Create the JIT Secret ``body`` (if any); the error instead of raising it."""
        if body is None:
            return None
        self._memory.set_secret_unconfirmed(self._key, self._uid, True)
        try:
            await self._kube.create(SECRETS, body)
        except Exception as exc:  # every failure is _secret_failed's to judge, after the other writes
            return exc
        self._memory.set_secret_unconfirmed(self._key, self._uid, False)
        return None

    async def _secret_failed(self, error: BaseException, created: object, runner_id: int) -> Result:
        """The JIT Secret of a fresh registration was not created, while the pod and status writes may
        have landed. The runner's next pass reads the Secret before it trusts the status's runner ID."""
        if isinstance(error, AlreadyExists):
            # A leftover of an earlier registration: the pod names it, so it may stay; the next pass reads
            # the Secret and records its runner ID. Give back the registration made just now.
            if not isinstance(created, BaseException):
                self._memory.created_pod(self._key, self._uid)
            await self._best_effort_remove(runner_id)
            return Result(requeue_after=NAME_COLLISION_REQUEUE)
        if not isinstance(created, BaseException):
            # A pod must never wait for a Secret nobody will create: take it back.
            with contextlib.suppress(Exception):
                await self._kube.delete(PODS, self._name, namespace=self._namespace, missing_ok=True)
        raise error

    async def _secret_runner_id(self) -> int | Result | None:
        """The runner ID the JIT Secret records; ``None`` without a Secret; a requeue after deleting an
        unusable one."""
        try:
            secret = await self._kube.get(SECRETS, self._name, namespace=self._namespace)
        except NotFound:
            return None
        runner_id = secret_runner_id(secret)
        if runner_id is not None:
            return runner_id
        log.warning("JIT secret %s/%s has no usable runnerId; deleting it to register again", self._namespace,
                    self._name)  # fmt: skip
        await self._kube.delete(SECRETS, self._name, namespace=self._namespace, missing_ok=True)
        return Result(requeue_after=NAME_COLLISION_REQUEUE)

    async def _name_collision(self, client: ActionsClient, scale_set_id: int) -> Result:
        existing = await client.get_runner_by_name(self._name)
        if existing is None:
            return Result(requeue_after=NAME_COLLISION_REQUEUE)
        if existing.runner_scale_set_id == scale_set_id:
            # Our own earlier registration whose Secret was lost: remove it and register again.
            await remove_registration(client, existing.id)
            return Result(requeue_after=NAME_COLLISION_REQUEUE)
        await self._event(
            "Warning",
            "RunnerNameTaken",
            f"a runner named {self._name} is registered in another scale set ({existing.runner_scale_set_id});"
            " deleting this EphemeralRunner",
        )
        await self._delete_runner(DeletedReason.NAME_TAKEN)
        return Result()

    async def _github(self) -> ActionsClient:
        if self._client is None:
            try:
                self._client = await self._clients.client_for(namespace=self._namespace, spec=self._view.spec)
            except ConfigurationError as exc:
                await self._event("Warning", exc.reason, exc.message)
                if self._view.reason != exc.reason or self._view.message != exc.message:
                    self._changes.update(reason=exc.reason, message=exc.message)
                await self._flush()
                raise
        return self._client

    # -- actions ----------------------------------------------------------------------------------------

    async def _mark_done(self, phase: EphemeralRunnerPhase, reason: str, message: str, runner_id: int) -> None:
        """Failed or Outdated: record it, then unregister (the runner will never run a job)."""
        self._changes.update(phase=phase, reason=reason, message=message, ready=False)
        await self._flush()
        if runner_id:
            await remove_registration(await self._github(), runner_id)

    async def _retry_pod(self, pod: Object, outcome: Outcome) -> None:
        pod_view = ObjectView(pod)
        uid = pod_view.uid
        failures = self._view.failures
        if uid and uid not in failures:
            self._changes["failures"] = {uid: format_time(self._ctx.clock.now())}
            await self._event(
                "Warning", "RunnerPodFailed", f"{outcome.message}; retrying ({len(failures) + 1} of {MAX_FAILURES})"
            )
        # Pending again: the next pod is not running yet, and a missing pod then means "recreate" rather
        # than "lost".
        self._changes.update(ready=False, reason=outcome.reason, message=outcome.message,
                             phase=EphemeralRunnerPhase.PENDING)  # fmt: skip
        # Status first, then the pod: after a crash in between, the runner reads Pending with the failure
        # recorded, and the failed pod is still there to be retried again.
        await self._flush()
        self._retrying[self._uid] = uid
        if not pod_view.is_deleting:
            await self._kube.delete(PODS, self._name, namespace=self._namespace, missing_ok=True)

    async def _lost(self, outcome: Outcome) -> None:
        await self._event("Warning", outcome.reason or "RunnerLost", f"{outcome.message}; deleting the runner")
        await self._delete_runner(DeletedReason.LOST)

    async def _quota_exceeded(self, message: str) -> Result:
        created = self._view.creation_timestamp
        if created is not None and self._ctx.clock.now() - created > QUOTA_GIVE_UP_AFTER:
            await self._event("Warning", "QuotaExceeded", f"{message}; giving up after 10 minutes")
            await self._delete_runner(DeletedReason.QUOTA)
            return Result()
        await self._event("Warning", "QuotaExceeded", message)
        await self._flush()
        return Result(requeue_after=QUOTA_REQUEUE)

    async def _best_effort_remove(self, runner_id: int) -> None:
        try:
            await remove_registration(await self._github(), runner_id)
        except (GitHubError, ConfigurationError) as exc:
            log.info("could not remove runner %s of %s/%s now (the finalizer retries): %s", runner_id,
                     self._namespace, self._name, exc)  # fmt: skip

    async def _delete_runner(self, reason: str) -> None:
        """Delete the runner; counted in ``gha_controller_ephemeral_runners_deleted_total`` with ``reason``."""
        await self._kube.delete(EPHEMERAL_RUNNERS, self._name, namespace=self._namespace, missing_ok=True)
        self._ctx.metrics.count_deleted(runner_set_labels(self._er), reason, runner=f"{self._namespace}/{self._name}")

    async def _event(self, type_: str, reason: str, note: str) -> None:
        await self._ctx.events.event(self._er, type="Warning" if type_ == "Warning" else "Normal",
                                     reason=reason, note=note, action="Reconcile")  # fmt: skip

    async def _flush(self) -> None:
        """Write the status changes gathered in this pass (one merge patch), if any, together with the
        changes held back by an earlier pass (step 6); those alone are written only once they are due."""
        deferred, remaining = self._memory.deferred_status(self._key, self._uid)
        if not self._changes and (not deferred or remaining > 0):
            return
        changes = {**deferred, **self._changes}  # this pass's changes win (a phase beats the held-back Pending)
        self._changes = {}
        with contextlib.suppress(NotFound):
            await self._kube.patch(
                EPHEMERAL_RUNNERS,
                self._name,
                {"status": changes},
                namespace=self._namespace,
                patch_type=PatchType.MERGE,
                subresource="status",
            )
            self._memory.wrote_status(self._key, self._uid, self._resource_version, changes)
            self._memory.deferred_written(self._key, self._uid)
            if "phase" in changes and changes["phase"] != self._view.phase:
                # Counted where the transition is written: once per runner (a done runner is not rewritten).
                self._ctx.metrics.count_done(str(changes["phase"]), runner_set_labels(self._er))


def setup_ephemeral_runner_controller(ctx: ControllerContext, *, rate_limiter: RateLimiter | None = None) -> Controller:
    """Build the EphemeralRunner controller and register it with the context's manager."""
    controller = EphemeralRunnerReconciler(ctx).controller(rate_limiter=rate_limiter)
    ctx.manager.add(controller)
    return controller
