"""A harness for the EphemeralRunner/EphemeralRunnerSet integration tests.

Runs the two reconcilers in-process through a real :class:`~arc_scaleset.kube.manager.Manager` against the
real API server (caches restricted to the test's namespace), with the simulated GitHub over real HTTP and
kwok playing the kubelet. The controllers can be stopped and started again (a restart: a new manager,
fresh caches, no memory of the previous run), and a ``hook`` can stop the ERS controller at a chosen step.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.cmd.controller_setup import cache_label_selectors
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunner.reconciler import EphemeralRunnerReconciler
from arc_scaleset.controllers.ephemeralrunnerset.reconciler import EphemeralRunnerSetReconciler
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.github import ActionsClient, PersonalAccessToken, SystemInfo, parse_config_url
from arc_scaleset.kube.client import KubeClient, PatchType
from arc_scaleset.kube.manager import Manager
from arc_scaleset.kube.resources import PODS, SECRETS
from arc_scaleset_lab.cluster.stages import EXIT_CODE_ANNOTATION, FINISH_ANNOTATION
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim import SimConfig, SimulatedGitHub

PAT = "ghp_runner_controllers_0123456789"
SECRET_NAME = "github-secret"
ORG = "org"


def runner_template(image: str = "ghcr.io/actions/actions-runner:latest") -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "runner", "image": image}]}}


@dataclass
class Harness:
    kube: KubeClient
    namespace: str
    sim: SimulatedGitHub
    scale_set_id: int
    config_url: str
    failed_runner_min_age: float = 60.0
    manager: Manager | None = None
    task: asyncio.Task[None] | None = None
    ers_reconciler: EphemeralRunnerSetReconciler | None = None
    er_reconciler: EphemeralRunnerReconciler | None = None
    ctx: ControllerContext | None = None
    starts: int = 0
    pools: list[Any] = field(default_factory=list)

    # -- controllers ------------------------------------------------------------------------------------

    async def start(
        self,
        *,
        ers: bool = True,
        er: bool = True,
        create_concurrency: int = 20,
        pending_timeout: float | None = 900.0,
        more_namespaces: tuple[str, ...] = (),
        ers_options: Mapping[str, Any] | None = None,
        **settings: Any,
    ) -> None:
        """Run the controllers; ``settings``: further :class:`ControllerSettings` fields; ``more_namespaces``:
        other namespaces the manager caches too (another team's, for the tenancy tests); ``ers_options``: further
        arguments of the :class:`EphemeralRunnerSetReconciler`."""
        assert self.task is None, "already running"
        controller_settings = ControllerSettings(
            controller_namespace=self.namespace,
            controller_image="arc-scaleset:test",
            runner_create_concurrency=create_concurrency,
            runner_max_concurrent_reconciles=4,
            runner_pending_timeout=pending_timeout,
            **settings,
        )
        # The controller's cache: only the Pods, ServiceAccounts, Roles and RoleBindings with the children's label.
        selectors = cache_label_selectors(controller_settings.exclude_label_prefixes)
        manager = Manager(self.kube, namespaces={self.namespace, *more_namespaces}, label_selectors=selectors,
                          metrics_address=None, graceful_shutdown_timeout=5)  # fmt: skip
        ctx = ControllerContext.create(self.kube, manager, controller_settings, environ={})
        self.pools.append(ctx.github.pool)
        self.ctx = ctx
        self.ers_reconciler = EphemeralRunnerSetReconciler(
            ctx, failed_runner_min_age=self.failed_runner_min_age, **(ers_options or {})
        )
        self.er_reconciler = EphemeralRunnerReconciler(ctx)
        if ers:
            manager.add(self.ers_reconciler.controller())
        if er:
            manager.add(self.er_reconciler.controller())
        self.manager = manager
        self.task = asyncio.create_task(manager.run())
        self.starts += 1
        await eventually(lambda: _ready(manager), timeout=30, what="manager caches to sync")

    async def stop(self) -> None:
        if self.manager is None or self.task is None:
            return
        self.manager.request_stop()
        try:
            await asyncio.wait_for(self.task, 30)
        finally:
            self.manager, self.task = None, None

    async def close(self) -> None:
        await self.stop()
        for pool in self.pools:
            await pool.aclose()
        # Let the namespace go: nothing runs our finalizers any more.
        for resource in (EPHEMERAL_RUNNERS, EPHEMERAL_RUNNER_SETS):
            for item in (await self.kube.list(resource, namespace=self.namespace)).items:
                if item["metadata"].get("finalizers"):
                    with contextlib.suppress(Exception):
                        await self.kube.patch(resource, item["metadata"]["name"], {"metadata": {"finalizers": None}},
                                              namespace=self.namespace)  # fmt: skip

    # -- objects ----------------------------------------------------------------------------------------

    def ers_body(self, name: str, *, replicas: int, patch_id: int, revision: int = 0,
                 template: dict[str, Any] | None = None, secret: str = SECRET_NAME,
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
                    "githubConfigSecret": secret,
                    "runnerScaleSetId": self.scale_set_id,
                    **(template or runner_template()),
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
        return (await self.kube.list(PODS, namespace=self.namespace)).items

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
            PODS, name,
            {"metadata": {"annotations": {FINISH_ANNOTATION: outcome, EXIT_CODE_ANNOTATION: str(exit_code)}}},
            namespace=self.namespace,
        )  # fmt: skip

    async def set_pod_status(self, name: str, status: dict[str, Any]) -> None:
        await self.kube.patch(PODS, name, {"status": status}, namespace=self.namespace, subresource="status",
                              patch_type=PatchType.MERGE)  # fmt: skip

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


async def _ready(manager: Manager) -> bool:
    return manager.ready and all(c.running for c in manager.controllers)


async def create_github_secret(kube: KubeClient, namespace: str, name: str = SECRET_NAME, token: str = PAT) -> None:
    await kube.create(
        SECRETS,
        {
            "metadata": {"name": name, "namespace": namespace},
            "data": {"github_token": base64.b64encode(token.encode()).decode()},
        },
    )


@contextlib.asynccontextmanager
async def harness(kube: KubeClient, namespace: str, **options: Any) -> Any:
    sim = await SimulatedGitHub.start(config=SimConfig(long_poll_seconds=0.2))
    sim.credentials.add_token(PAT)
    config_url = sim.config_url(ORG)
    client = ActionsClient(parse_config_url(config_url, environ={}), PersonalAccessToken(PAT),
                           system_info=SystemInfo(subsystem="tests"))  # fmt: skip
    try:
        scale_set = await client.create_runner_scale_set(name=f"set-{namespace[-6:]}", runner_group_id=1)
    finally:
        await client.aclose()
    await create_github_secret(kube, namespace)
    h = Harness(kube=kube, namespace=namespace, sim=sim, scale_set_id=scale_set.id, config_url=config_url, **options)
    try:
        yield h
    finally:
        await h.close()
        await sim.stop()
