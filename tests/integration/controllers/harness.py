"""The integration tier's one harness: the project's controllers run in-process against the real control plane.

A :class:`ControllerHarness` runs the reconcilers a test asks for through a real
:class:`~arc_scaleset.kube.manager.Manager` against the real API server (caches restricted to the test's
namespaces and, as the controller's own, to the children's label), with the simulated GitHub over real HTTP and
kwok playing the kubelet. The controllers can be stopped and started again (a restart: a new manager, fresh
caches, no memory of the previous run). Its other methods make and read the objects the tests are about.

Two entry points build one, each with the defaults of its tests:

- ``harness(kube, namespace)`` (runner_harness.py): the EphemeralRunnerSet and EphemeralRunner controllers,
  the controller namespace being the test's, one scale set registered on a simulator of its own;
- the ``start_env`` fixture (scale_set_env.py): the AutoscalingRunnerSet and AutoscalingListener controllers,
  running for the block, with a namespace of their own playing the controller's.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import ANNOTATION_LISTENER_STATE
from arc_scaleset.api.listener_state import ListenerPhase, ListenerState
from arc_scaleset.cmd.controller_setup import cache_label_selectors
from arc_scaleset.controllers.autoscalinglistener.reconciler import AutoscalingListenerReconciler
from arc_scaleset.controllers.autoscalingrunnerset.reconciler import AutoscalingRunnerSetReconciler
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunner.reconciler import EphemeralRunnerReconciler
from arc_scaleset.controllers.ephemeralrunnerset.reconciler import EphemeralRunnerSetReconciler
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.controllers.sharedlistener.reconciler import SharedListenerReconciler
from arc_scaleset.github import ActionsClientPool, SystemInfo, TransportOptions
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient, PatchType
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.manager import DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT, Manager
from arc_scaleset_lab.cluster.stages import EXIT_CODE_ANNOTATION, FINISH_ANNOTATION
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim import SimulatedGitHub

ORG = "org"
Kind = Literal["EphemeralRunnerSet", "EphemeralRunner", "AutoscalingRunnerSet", "AutoscalingListener", "SharedListener"]
RUNNER_CONTROLLERS: tuple[Kind, ...] = ("EphemeralRunnerSet", "EphemeralRunner")
SCALE_SET_CONTROLLERS: tuple[Kind, ...] = ("AutoscalingRunnerSet", "AutoscalingListener", "SharedListener")


@dataclass
class ControllerHarness:
    """The controllers of ``kinds`` (by default) for one test; see the module docstring.

    ``github_secret``/``token``: the GitHub Secret the scale sets name and the PAT it holds; ``template``: the
    runner pod template of the sets it makes; ``scale_set_id``: the scale set registered on the simulator for
    the runner sets it makes; ``defaults``: the :class:`ControllerSettings` fields every start uses unless it
    gives others; ``client_options``: the GitHub clients' transport options (None: the controller's own);
    ``shutdown_timeout``: how long a stop lets in-flight reconciles finish.
    """

    kube: KubeClient
    namespace: str
    controller_namespace: str
    sim: SimulatedGitHub
    config_url: str
    github_secret: str
    token: str
    template: dict[str, Any]
    kinds: tuple[Kind, ...]
    defaults: dict[str, Any]
    scale_set_id: int = 0
    client_options: TransportOptions | None = None
    shutdown_timeout: float = DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT
    failed_runner_min_age: float = 60.0
    manager: Manager | None = None
    task: asyncio.Task[None] | None = None
    ctx: ControllerContext | None = None
    ers_reconciler: EphemeralRunnerSetReconciler | None = None
    er_reconciler: EphemeralRunnerReconciler | None = None
    ars_reconciler: AutoscalingRunnerSetReconciler | None = None
    al_reconciler: AutoscalingListenerReconciler | None = None
    pools: list[ActionsClientPool] = field(default_factory=list)

    @property
    def settings(self) -> ControllerSettings:
        """The settings of the controllers running (or last run)."""
        assert self.ctx is not None, "the controllers never ran"
        return self.ctx.settings

    # -- controllers ------------------------------------------------------------------------------------

    async def start(
        self,
        *kinds: Kind,
        more_namespaces: tuple[str, ...] = (),
        ers_options: Mapping[str, Any] | None = None,
        **settings: Any,
    ) -> None:
        """Run the controllers of ``kinds`` (default: the harness's) until :meth:`stop`, once their caches
        have synced. ``settings``: :class:`ControllerSettings` fields over the harness's; ``more_namespaces``:
        other namespaces the manager caches too (another team's, for the tenancy tests); ``ers_options``:
        further arguments of the :class:`EphemeralRunnerSetReconciler` (collaborators a test injects)."""
        assert self.task is None, "already running"
        controller_settings = ControllerSettings(
            **{"controller_namespace": self.controller_namespace, **self.defaults, **settings}
        )
        # The controller's cache: only the Pods, ServiceAccounts, Roles and RoleBindings with the children's label.
        selectors = cache_label_selectors(controller_settings.exclude_label_prefixes)
        manager = Manager(
            self.kube,
            namespaces={self.namespace, self.controller_namespace, *more_namespaces},
            label_selectors=selectors,
            metrics_address=None,
            health_address=None,
            graceful_shutdown_timeout=self.shutdown_timeout,
        )
        pool = None
        if self.client_options is not None:
            pool = ActionsClientPool(system_info=SystemInfo(subsystem="controller-test"), transport=self.client_options)
        ctx = ControllerContext.create(self.kube, manager, controller_settings, pool=pool, environ={})
        self.pools.append(ctx.github.pool)
        self.ctx = ctx
        for reconciler in self._reconcilers(ctx, kinds or self.kinds, ers_options or {}):
            manager.add(reconciler.controller())
        self.manager = manager
        task = self.task = asyncio.create_task(manager.run())

        async def ready() -> bool:
            if task.done():
                task.result()  # a manager that could not start fails the test with its own error
            return manager.ready and all(c.running for c in manager.controllers)

        await eventually(ready, "the manager's caches to sync", timeout=30)

    def _reconcilers(
        self, ctx: ControllerContext, kinds: tuple[Kind, ...], ers_options: Mapping[str, Any]
    ) -> list[Any]:
        """New reconcilers of ``kinds``, in that order, each kept in its attribute for the tests that look
        inside one. The harness's own kinds are built even when a test runs only some of them: their caches
        (informers the manager runs) stay those the tests were written against."""
        min_age = self.failed_runner_min_age
        builders: dict[Kind, Callable[[], Any]] = {
            "EphemeralRunnerSet": lambda: EphemeralRunnerSetReconciler(
                ctx, failed_runner_min_age=min_age, **ers_options
            ),
            "EphemeralRunner": lambda: EphemeralRunnerReconciler(ctx),
            "AutoscalingRunnerSet": lambda: AutoscalingRunnerSetReconciler(ctx),
            "AutoscalingListener": lambda: AutoscalingListenerReconciler(ctx),
            "SharedListener": lambda: SharedListenerReconciler(ctx),
        }
        unknown = set(kinds) - builders.keys()
        assert not unknown, f"no controller for {sorted(unknown)}"
        made = {kind: builders[kind]() for kind in builders if kind in {*self.kinds, *kinds}}
        self.ers_reconciler = made.get("EphemeralRunnerSet")
        self.er_reconciler = made.get("EphemeralRunner")
        self.ars_reconciler = made.get("AutoscalingRunnerSet")
        self.al_reconciler = made.get("AutoscalingListener")
        return [made[kind] for kind in kinds]

    async def stop(self) -> None:
        """Stop the controllers (they can be started again)."""
        if self.manager is None or self.task is None:
            return
        self.manager.request_stop()
        try:
            await asyncio.wait_for(self.task, 30)
        finally:
            self.manager, self.task = None, None

    async def close(self) -> None:
        """Stop the controllers and close every GitHub client pool they used."""
        await self.stop()
        for pool in self.pools:
            await pool.aclose()

    async def release_runners(self) -> None:
        """Let the namespace go: strip the finalizers of the runner sets and runners left (nothing runs ours)."""
        for resource in (EPHEMERAL_RUNNERS, EPHEMERAL_RUNNER_SETS):
            for item in (await self.kube.list(resource, namespace=self.namespace)).items:
                if item["metadata"].get("finalizers"):
                    with contextlib.suppress(Exception):
                        await self.kube.patch(resource, item["metadata"]["name"], {"metadata": {"finalizers": None}},
                                              namespace=self.namespace)  # fmt: skip

    # -- reading any object -----------------------------------------------------------------------------

    async def get(self, resource: resources.Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return await self.kube.get(resource, name, namespace=namespace or self.namespace)
        except NotFound:
            return None

    async def events(self, *, regarding: str, namespace: str | None = None) -> list[dict[str, Any]]:
        listed = await self.kube.list(resources.EVENTS, namespace=namespace or self.namespace)
        return [e for e in listed.items if (e.get("regarding") or {}).get("name") == regarding]

    async def event_reasons(self, *, regarding: str, namespace: str | None = None) -> set[str]:
        return {e.get("reason", "") for e in await self.events(regarding=regarding, namespace=namespace)}

    async def wait_for_event(self, reason: str, *, regarding: str, namespace: str | None = None) -> None:
        """Until an Event ``reason`` about ``regarding`` exists. A controller writes its Event after the change it
        reports (a patch, a created object), so a test that saw the change must still wait for the Event."""

        async def recorded() -> bool:
            return reason in await self.event_reasons(regarding=regarding, namespace=namespace)

        await eventually(recorded, f"a {reason} Event about {regarding}")

    # -- scale sets and listeners -----------------------------------------------------------------------

    async def create_secret(self, name: str | None = None, data: dict[str, str] | None = None) -> dict[str, Any]:
        """The GitHub Secret (``github_secret``, holding ``token``, unless told otherwise)."""
        body = {
            "metadata": {"name": name or self.github_secret},
            "stringData": data if data is not None else {"github_token": self.token},
        }
        return await self.kube.create(resources.SECRETS, body, namespace=self.namespace)

    def ars_body(self, name: str = "arc-runners", **spec: Any) -> dict[str, Any]:
        labels = spec.pop("labels", None)
        body: dict[str, Any] = {
            "githubConfigUrl": self.config_url,
            "githubConfigSecret": self.github_secret,
            "template": self.template,
            **spec,
        }
        meta: dict[str, Any] = {"name": name}
        if labels:
            meta["labels"] = labels
        return {"apiVersion": "actions.github.com/v1alpha1", "kind": "AutoscalingRunnerSet", "metadata": meta,
                "spec": body}  # fmt: skip

    async def create_ars(self, name: str = "arc-runners", **spec: Any) -> dict[str, Any]:
        return await self.kube.create(AUTOSCALING_RUNNER_SETS, self.ars_body(name, **spec), namespace=self.namespace)

    async def ars(self, name: str = "arc-runners") -> dict[str, Any]:
        obj = await self.get(AUTOSCALING_RUNNER_SETS, name)
        assert obj is not None, f"AutoscalingRunnerSet {name} is gone"
        return obj

    async def ers(self, name: str = "arc-runners") -> dict[str, Any] | None:
        return await self.get(EPHEMERAL_RUNNER_SETS, name)

    async def listener(self, name: str) -> dict[str, Any] | None:
        return await self.get(AUTOSCALING_LISTENERS, name, self.controller_namespace)

    async def listeners(self) -> list[dict[str, Any]]:
        listed = await self.kube.list(AUTOSCALING_LISTENERS, namespace=self.controller_namespace)
        return listed.items

    async def running(self, name: str = "arc-runners") -> dict[str, Any] | None:
        """The ARS once it is Running with observedGeneration == generation (else None)."""
        obj = await self.ars(name)
        status = obj.get("status") or {}
        done = status.get("phase") == "Running" and status.get("observedGeneration") == obj["metadata"]["generation"]
        return obj if done else None

    async def listener_pod(self, listener_name: str) -> dict[str, Any] | None:
        return await self.get(resources.PODS, listener_name, self.controller_namespace)

    async def report_listener_state(
        self,
        phase: ListenerPhase,
        *,
        error: str = "",
        session: str | None = "5e5510e0-0000-4000-8000-000000000001",
        runner_set: str = "arc-runners",
    ) -> ListenerState:
        """Write on the EphemeralRunnerSet what a listener writes about itself (no listener process runs here)."""
        ers = await self.ers(runner_set)
        assert ers is not None, f"EphemeralRunnerSet {runner_set} does not exist"
        scale_set_id = int(ers["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"])
        now = dt.datetime.now(dt.UTC)
        state = ListenerState(
            scale_set_id=scale_set_id,
            owner="listener-pod",
            session_id=session,
            state=phase,
            since=now,
            last_successful_poll=now if phase is ListenerPhase.POLLING else None,
            last_error_class=error,
        )
        patch = {"metadata": {"annotations": {ANNOTATION_LISTENER_STATE: state.to_annotation()}}}
        await self.kube.patch(EPHEMERAL_RUNNER_SETS, runner_set, patch, namespace=self.namespace)
        return state

    def listener_name(self, ars: dict[str, Any]) -> str:
        from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
        from arc_scaleset.controllers.autoscalingrunnerset.desired import listener_name_of

        return listener_name_of(AutoscalingRunnerSet.from_object(ars))

    # -- runner sets and runners ------------------------------------------------------------------------

    def ers_body(self, name: str, *, replicas: int, patch_id: int, revision: int = 0,
                 template: dict[str, Any] | None = None, secret: str | None = None,
                 config_url: str | None = None) -> dict[str, Any]:  # fmt: skip
        return {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "EphemeralRunnerSet",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {
                    "actions.github.com/scale-set-name": name,
                    "actions.github.com/scale-set-namespace": self.namespace,
                },
            },
            "spec": {
                "replicas": replicas,
                "patchID": patch_id,
                "actionableRevision": revision,
                "ephemeralRunnerSpec": {
                    "githubConfigUrl": config_url or self.config_url,
                    "githubConfigSecret": secret or self.github_secret,
                    "runnerScaleSetId": self.scale_set_id,
                    **(template or self.template),
                },
            },
        }

    async def create_ers(self, name: str = "arc", **kw: Any) -> dict[str, Any]:
        return await self.kube.create(EPHEMERAL_RUNNER_SETS, self.ers_body(name, **kw))

    async def patch_ers(self, name: str = "arc", **spec: Any) -> dict[str, Any]:
        return await self.kube.patch(EPHEMERAL_RUNNER_SETS, name, {"spec": spec}, namespace=self.namespace)

    async def get_ers(self, name: str = "arc") -> dict[str, Any]:
        return await self.kube.get(EPHEMERAL_RUNNER_SETS, name, namespace=self.namespace)

    async def runners(self) -> list[dict[str, Any]]:
        return (await self.kube.list(EPHEMERAL_RUNNERS, namespace=self.namespace)).items

    async def live_runners(self) -> list[dict[str, Any]]:
        return [r for r in await self.runners() if not r["metadata"].get("deletionTimestamp")]

    async def pods(self) -> list[dict[str, Any]]:
        return (await self.kube.list(resources.PODS, namespace=self.namespace)).items

    async def wait_runners(self, predicate: Callable[[list[dict[str, Any]]], bool], *, timeout: float = 30,
                           what: str = "runners") -> list[dict[str, Any]]:  # fmt: skip
        async def check() -> tuple[list[dict[str, Any]]] | None:
            runners = await self.runners()
            return (runners,) if predicate(runners) else None  # a tuple: an empty list is a valid answer

        result: tuple[list[dict[str, Any]]] = await eventually(check, timeout=timeout, what=what)
        return result[0]

    async def wait_cached(self, runners: list[dict[str, Any]], *, timeout: float = 30) -> None:
        """Until the controllers' cache holds each of ``runners`` as listed or newer: a test that read a change
        from the API server acts on it only once the controllers, which read their cache, can see it too."""
        assert self.ctx is not None, "the controllers are not running"
        cache = self.ctx.cache(EPHEMERAL_RUNNERS)

        def seen(runner: dict[str, Any]) -> bool:
            cached = cache.get(self.namespace, runner["metadata"]["name"])
            listed = int(runner["metadata"]["resourceVersion"])
            return cached is not None and int(cached["metadata"]["resourceVersion"]) >= listed

        await eventually(lambda: all(map(seen, runners)), timeout=timeout, what="the runners as listed in the cache")

    async def wait_running(self, count: int, *, timeout: float = 45) -> list[dict[str, Any]]:
        """Until exactly ``count`` live runners exist and all are Running with a runner ID."""

        def ok(runners: list[dict[str, Any]]) -> bool:
            live = [r for r in runners if not r["metadata"].get("deletionTimestamp")]
            return (
                len(runners) == count
                and len(live) == count
                and all(
                    (r.get("status") or {}).get("phase") == "Running" and (r.get("status") or {}).get("runnerId")
                    for r in live
                )
            )

        return await self.wait_runners(ok, timeout=timeout, what=f"{count} running runners")

    async def finish_pod(self, name: str, *, exit_code: int) -> None:
        """Make kwok end the runner pod ``name`` with ``exit_code`` (as the runner process would)."""
        outcome = "succeeded" if exit_code == 0 else "failed"
        await self.kube.patch(
            resources.PODS, name,
            {"metadata": {"annotations": {FINISH_ANNOTATION: outcome, EXIT_CODE_ANNOTATION: str(exit_code)}}},
            namespace=self.namespace,
        )  # fmt: skip

    async def set_pod_status(self, name: str, status: dict[str, Any]) -> None:
        await self.kube.patch(resources.PODS, name, {"status": status}, namespace=self.namespace,
                              subresource="status", patch_type=PatchType.MERGE)  # fmt: skip

    async def make_busy(self, er_name: str) -> int:
        """Give runner ``er_name`` a job on the simulated GitHub and record it on the ER as the listener does."""
        request_id = self.sim.state.enqueue_job(
            self.scale_set_name(), repository=f"{ORG}/repo", duration=3600
        ).request_id
        self.sim.state.runner_online(er_name)
        assert self.sim.state.acquire_jobs(self.scale_set_id, [request_id]) == [request_id]
        job = self.sim.state.jobs[request_id]
        assert job.runner_name == er_name
        await self.kube.patch(
            EPHEMERAL_RUNNERS, er_name,
            {"status": {"jobId": job.job_id, "jobRequestId": job.request_id, "jobRepositoryName": f"{ORG}/repo"}},
            namespace=self.namespace, subresource="status",
        )  # fmt: skip
        return request_id

    def scale_set_name(self) -> str:
        return self.sim.state.scale_sets[self.scale_set_id].name

    def registered(self) -> set[str]:
        return {r.name for r in self.sim.state.runners.values()}
