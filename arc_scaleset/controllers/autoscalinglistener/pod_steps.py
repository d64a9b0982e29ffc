"""The pod step of an AutoscalingListener pass: asks :func:`.pod_plan.plan_pod` for the step and executes it
(docs/controllers.md, step 6). Every step records in the pass's report what it found (for ``Ready``) and keeps
``gha_controller_running_listeners`` in line.

A listener with a standby (:mod:`.standby`) has two pods: each gets its own step and its own restart backoff, and
``Ready`` is the active pod's. A pod of the pair is made while its peer may be running and reporting on the set,
so its creation does not mark the set's state as a predecessor's (the pod's creation time still discards a state
older than the pod).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.controllers.autoscalinglistener.deletion import delete_owned, get_or_none
from arc_scaleset.controllers.autoscalinglistener.errors import InvalidListenerTemplate, ObjectInTheWay
from arc_scaleset.controllers.autoscalinglistener.ownership import foreign_reason
from arc_scaleset.controllers.autoscalinglistener.pod import configured_listener_pod, per_set_identity
from arc_scaleset.controllers.autoscalinglistener.pod_plan import PodAction, PodStep, plan_pod
from arc_scaleset.controllers.autoscalinglistener.restart import (
    RestartBackoff,
    listener_pod_failure,
    listener_running,
    recreation_note,
)
from arc_scaleset.controllers.autoscalinglistener.scope import ListenerPass
from arc_scaleset.controllers.autoscalinglistener.standby import (
    StandbyPair,
    one_recreation_at_a_time,
    pair_identities,
    pair_readiness,
)
from arc_scaleset.controllers.autoscalinglistener.status import (
    ListenerReport,
    PodReadiness,
    backoff_readiness,
    created_readiness,
)
from arc_scaleset.controllers.autoscalinglistener.steps import ListenerSteps
from arc_scaleset.controllers.metrics import scale_set_labels
from arc_scaleset.kube.controller import Result
from arc_scaleset.kube.errors import AlreadyExists, BadRequest, Invalid
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.resources import PODS
from arc_scaleset.kube.views import ObjectView

CONFLICT_REQUEUE_SECONDS: Final = 0.5
"""How soon to look again after a write lost a race (a conflict, a pod of that name the cache does not show)."""


class ListenerPod(ListenerSteps):
    """Executes the steps of the listener pod."""

    async def step(self, scope: ListenerPass) -> Result:
        """The phase: one step of the pod, planned from the live pod, the desired one and the restart backoff; with
        a standby (``scope.standby``), one step of each pod of the pair (:meth:`_pair_step`)."""
        if scope.standby is not None:
            return await self._pair_step(scope, scope.standby)
        desired = configured_listener_pod(scope.obj, scope.listener, self.ctx.settings, config_version=scope.stamp)
        live = self.pods.get(scope.listener.namespace, ObjectView(desired).name)
        return await self._step(scope, _Pods(desired, live, scope.memory.restarts))

    async def _pair_step(self, scope: ListenerPass, pair: StandbyPair) -> Result:
        """One step of each pod of the pair, each with its own restart backoff (so each is replaced on its own
        terms while the other keeps running), recreated one at a time (:func:`.standby.one_recreation_at_a_time`);
        ``Ready`` from the active one (:func:`.standby.pair_readiness`)."""
        identity = per_set_identity(scope.obj, scope.listener, config_resource_version=scope.stamp)
        pairs: dict[str, _Pods] = {}
        for second, pod_identity in enumerate(pair_identities(identity)):
            desired = configured_listener_pod(
                scope.obj, scope.listener, self.ctx.settings, config_version=scope.stamp, identity=pod_identity
            )
            live = self.pods.get(pod_identity.namespace, pod_identity.name)
            # Not a new listener's start: the state on the set may be the running peer's (module docstring).
            pairs[pod_identity.name] = _Pods(desired, live, scope.memory.pod_restarts(second=bool(second)), False)
        steps = one_recreation_at_a_time(
            {name: self._plan(scope, pods) for name, pods in pairs.items()},
            {name: listener_running(pods.live or {}) for name, pods in pairs.items()},
            pair,
        )
        report, results = _report(scope), []
        found: dict[str, PodReadiness] = {}
        for name, pods in pairs.items():
            report.pod = None
            results.append(await self._execute(scope, steps[name], pods))
            # None: a create that met a pod of that name the cache does not show yet (it looks again shortly).
            found[name] = report.pod or created_readiness(name)
        report.pod = pair_readiness(pair, found)
        self._set_running(scope, pair.active is not None and found[pair.active].runs)
        waits = [result.requeue_after for result in results if result.requeue_after is not None]
        return Result(requeue_after=min(waits, default=None))

    async def _step(self, scope: ListenerPass, pods: _Pods) -> Result:
        """One step of one pod: planned by :func:`.pod_plan.plan_pod`, then executed."""
        return await self._execute(scope, self._plan(scope, pods), pods)

    def _plan(self, scope: ListenerPass, pods: _Pods) -> PodStep:
        live, restarts = pods.live, pods.restarts
        return plan_pod(
            live,
            pods.desired,
            owner=scope.obj,
            failure=None if live is None else listener_pod_failure(live, now=self.ctx.clock.now()),
            restarts=restarts.state(now=self.ctx.clock.monotonic()),
            counted=live is not None and restarts.is_recorded(pod_uid=ObjectView(live).uid),
        )

    async def _execute(self, scope: ListenerPass, step: PodStep, pods: _Pods) -> Result:
        execute = {
            PodAction.IN_THE_WAY: self._in_the_way,
            PodAction.WAIT_BACKOFF: self._wait_backoff,
            PodAction.CREATE: self._create,
            PodAction.REPLACE_FAILED: self._replace_failed,
            PodAction.WAIT_TERMINATING: self._wait_terminating,
            PodAction.RECREATE: self._recreate,
            PodAction.KEEP: self._keep,
            PodAction.WAIT_PEER: self._wait_peer,
        }[step.action]
        return await execute(scope, step, pods)

    async def _in_the_way(self, scope: ListenerPass, step: PodStep, pods: _Pods) -> Result:
        # Not ours: never deleted, recreated or merged into (it may be anybody's pod of that name).
        raise ObjectInTheWay(step.why)

    async def _wait_backoff(self, scope: ListenerPass, step: PodStep, pods: _Pods) -> Result:
        self._set_running(scope, False)
        _report(scope).pod = step.readiness
        return Result(requeue_after=step.requeue_after)

    async def _create(self, scope: ListenerPass, step: PodStep, pods: _Pods) -> Result:
        self._set_running(scope, False)
        if pods.successor:
            self.health.remember_predecessor(scope)
        namespace = scope.listener.namespace
        try:
            await self.ctx.kube.create(PODS, pods.desired, namespace=namespace)
        except AlreadyExists:
            # The cache holds only pods with the children's label (cmd/controller_setup.py): a pod under this
            # name that the cache does not show may be nobody's of ours. Look before trying again.
            existing = await get_or_none(self.ctx.kube, PODS, namespace, pods.name)
            foreign = None if existing is None else foreign_reason("Pod", existing, scope.obj)
            if foreign is not None:
                raise ObjectInTheWay(foreign) from None
            return Result(requeue_after=CONFLICT_REQUEUE_SECONDS)
        except (Invalid, BadRequest) as exc:
            raise InvalidListenerTemplate(
                f"the API server rejected the listener pod built from listenerTemplate: {exc.message}"
            ) from None
        _report(scope).pod = step.readiness
        await self.events.normal(scope.obj, "ListenerPodCreated", f"created listener pod {pods.name}", action="Create")
        return Result()

    async def _replace_failed(self, scope: ListenerPass, step: PodStep, pods: _Pods) -> Result:
        """Count the failure (once per pod) and delete the pod; recreate it in this pass when no backoff holds it
        back (a healthy run, restart.py), else come back when the backoff lets it be recreated."""
        failure, live = step.failure, pods.live_view
        assert failure is not None
        restarts, now = pods.restarts, self.ctx.clock.monotonic()
        first_sighting = not restarts.is_recorded(pod_uid=live.uid)
        delay = restarts.record_failure(pod_uid=live.uid, now=now, ran_for=failure.ran_for, message=failure.message)
        backoff = restarts.state(now=now)
        await delete_owned(self.ctx.kube, PODS, live.namespace, live.name, uid=live.uid, force=failure.force_delete)
        self._set_running(scope, False)
        if backoff is None:
            # A failed pod is gone once deleted (the API server deletes a terminal pod without a grace period), so
            # the replacement need not wait for the watch to say so: every second here nobody takes the scale set's
            # jobs. One still terminating makes the create wait for the next pass (AlreadyExists).
            result = await self._create(scope, PodStep(PodAction.CREATE, readiness=created_readiness(pods.name)), pods)
        else:
            _report(scope).pod = backoff_readiness(backoff)
            result = Result(requeue_after=max(delay, CONFLICT_REQUEUE_SECONDS))
        if first_sighting:
            self.ctx.metrics.count_listener_restart(_metric_labels(scope))
            note = recreation_note(failure, delay=delay, failures=restarts.failures)
            await self.events.warning(scope.obj, failure.reason, note, action="Recreate")
        return result

    async def _wait_terminating(self, scope: ListenerPass, step: PodStep, pods: _Pods) -> Result:
        # Deleted by a previous pass (a failure's backoff keeps its own Ready reason) or by someone else.
        _report(scope).pod = step.readiness
        return Result(requeue_after=step.requeue_after)

    async def _recreate(self, scope: ListenerPass, step: PodStep, pods: _Pods) -> Result:
        live = pods.live_view
        _report(scope).pod = step.readiness
        await delete_owned(self.ctx.kube, PODS, live.namespace, live.name, uid=live.uid)
        self._set_running(scope, False)
        note = f"recreating listener pod {pods.name}: {step.why}"
        await self.events.normal(scope.obj, "ListenerPodRecreating", note, action="Recreate")
        return Result()

    async def _keep(self, scope: ListenerPass, step: PodStep, pods: _Pods) -> Result:
        assert pods.live is not None
        await self.children.ensure(PODS, pods.desired, pods.live, owner=scope.obj)
        running = step.running
        _report(scope).pod = self.health.running_readiness(scope, pods.live) if running else step.readiness
        self._set_running(scope, running)
        # The referenced Secrets and ConfigMaps are watched (controllers/referenced_objects.py); this pass every
        # interval is the fallback where that watch is not allowed (RBAC) or not running yet.
        return Result(requeue_after=self.ctx.settings.scale_set_verify_interval)

    async def _wait_peer(self, scope: ListenerPass, step: PodStep, pods: _Pods) -> Result:
        # A running pod to be recreated once its peer runs (standby.one_recreation_at_a_time). Left as it is, its
        # metadata too: merging the new config version onto it would hide that it is outdated. Its peer's pod
        # events bring the pass that recreates it.
        assert pods.live is not None
        _report(scope).pod = self.health.running_readiness(scope, pods.live)
        return Result()

    def _set_running(self, scope: ListenerPass, running: bool) -> None:
        self.ctx.metrics.set_listener_running(_metric_labels(scope), running)


@dataclass(frozen=True)
class _Pods:
    """The desired listener pod and the live one (``None``: there is none) of one step, and its restart backoff."""

    desired: dict[str, Any]
    live: Object | None
    restarts: RestartBackoff
    successor: bool = True
    """A pod created here succeeds the listener's previous one: the state its set carries is a predecessor's
    (:meth:`.health.ListenerHealth.remember_predecessor`). Not so for a pod of a standby pair, whose peer may be
    running and reporting."""

    @property
    def name(self) -> str:
        return ObjectView(self.desired).name

    @property
    def live_view(self) -> ObjectView:
        assert self.live is not None
        return ObjectView(self.live)


def _report(scope: ListenerPass) -> ListenerReport:
    assert scope.report is not None, "the pod step runs only in a pass that serves the listener"
    return scope.report


def _metric_labels(scope: ListenerPass) -> dict[str, str]:
    listener = scope.listener
    return scale_set_labels(listener.name, listener.namespace, listener.metadata.labels)
