"""A running AutoscalingRunnerSet + AutoscalingListener controller pair against the real control plane and the
simulated GitHub, for the integration tests of those two controllers.

``start_env`` (a fixture factory) gives a :class:`ScaleSetEnv`: a fresh scale-set namespace (the ``namespace``
fixture), a second namespace playing the controller namespace, a simulated GitHub with a PAT, the GitHub
Secret, and a manager running both reconcilers in-process. Tests import the fixtures from here::

    from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
        controller_namespace_fixture, sim_fixture, start_env_fixture,
    )
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import ANNOTATION_LISTENER_STATE
from arc_scaleset.api.listener_state import ListenerPhase, ListenerState
from arc_scaleset.clock import REAL_CLOCK
from arc_scaleset.cmd.controller_setup import cache_label_selectors
from arc_scaleset.controllers.autoscalinglistener.reconciler import AutoscalingListenerReconciler
from arc_scaleset.controllers.autoscalingrunnerset.reconciler import AutoscalingRunnerSetReconciler
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.github import ActionsClientPool, SystemInfo, TransportOptions
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.manager import Manager
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim import SimConfig, SimulatedGitHub

PAT = "ghp_controller_integration_token"
IMAGE = "ghcr.io/example/arc-scaleset:test"
RUNNER_TEMPLATE: dict[str, Any] = {
    "spec": {
        "containers": [{"name": "runner", "image": "ghcr.io/actions/actions-runner:latest", "command": ["run.sh"]}]
    }
}


@dataclass
class ScaleSetEnv:
    kube: KubeClient
    namespace: str
    controller_namespace: str
    sim: SimulatedGitHub
    manager: Manager
    ctx: ControllerContext
    ars_reconciler: AutoscalingRunnerSetReconciler
    al_reconciler: AutoscalingListenerReconciler
    config_url: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def settings(self) -> ControllerSettings:
        return self.ctx.settings

    async def create_secret(self, name: str = "gh-secret", data: dict[str, str] | None = None) -> dict[str, Any]:
        body = {"metadata": {"name": name}, "stringData": data if data is not None else {"github_token": PAT}}
        return await self.kube.create(resources.SECRETS, body, namespace=self.namespace)

    def ars_body(self, name: str = "arc-runners", **spec: Any) -> dict[str, Any]:
        labels = spec.pop("labels", None)
        body: dict[str, Any] = {
            "githubConfigUrl": self.config_url,
            "githubConfigSecret": "gh-secret",
            "template": RUNNER_TEMPLATE,
            **spec,
        }
        meta: dict[str, Any] = {"name": name}
        if labels:
            meta["labels"] = labels
        return {"apiVersion": "actions.github.com/v1alpha1", "kind": "AutoscalingRunnerSet", "metadata": meta,
                "spec": body}  # fmt: skip

    async def create_ars(self, name: str = "arc-runners", **spec: Any) -> dict[str, Any]:
        return await self.kube.create(AUTOSCALING_RUNNER_SETS, self.ars_body(name, **spec), namespace=self.namespace)

    async def get(self, resource: resources.Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return await self.kube.get(resource, name, namespace=namespace or self.namespace)
        except NotFound:
            return None

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


EnvFactory = Callable[..., AbstractAsyncContextManager[ScaleSetEnv]]


@pytest.fixture(name="sim")
async def sim_fixture() -> AsyncIterator[SimulatedGitHub]:
    async with await SimulatedGitHub.start(
        config=SimConfig(long_poll_seconds=0.2), clock=REAL_CLOCK, host="127.0.0.1", port=0, tls=False
    ) as running:
        running.credentials.add_token(PAT)
        yield running


@contextlib.asynccontextmanager
async def temporary_namespace(kube: KubeClient, prefix: str) -> AsyncIterator[str]:
    """A namespace ``<prefix>-xxxxxx`` for one test (another team's, or the controller's), deleted after it."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await kube.create(resources.NAMESPACES, {"metadata": {"name": name, "labels": {"arc-scaleset.dev/test": "true"}}})
    try:
        yield name
    finally:
        await kube.delete(resources.NAMESPACES, name, missing_ok=True)


@pytest.fixture(name="controller_namespace")
async def controller_namespace_fixture(kube: KubeClient) -> AsyncIterator[str]:
    async with temporary_namespace(kube, "t-arc-system") as name:
        yield name


@pytest.fixture(name="start_env")
def start_env_fixture(
    kube: KubeClient, namespace: str, controller_namespace: str, sim: SimulatedGitHub, crds_installed: list[str]
) -> EnvFactory:
    """``async with start_env(**settings) as env``: both reconcilers running until the block ends.

    ``secret=False`` skips creating the GitHub Secret; ``cleanup=False`` leaves the scale sets in place when the
    block ends (for a second ``start_env`` in the same test: a controller restart); ``more_namespaces``: other
    namespaces the manager caches too (another team's, for the tenancy tests; the test cleans them up).
    """

    @asynccontextmanager
    async def start(
        *, secret: bool = True, cleanup: bool = True, more_namespaces: tuple[str, ...] = (), **settings: Any
    ) -> AsyncIterator[ScaleSetEnv]:
        options: dict[str, Any] = {
            "controller_namespace": controller_namespace,
            "controller_image": IMAGE,
            "listener_restart_backoff_base": 1.0,
            "listener_restart_backoff_cap": 8.0,
            **settings,
        }
        # The controller's cache: only the Pods, ServiceAccounts, Roles and RoleBindings with the children's label.
        selectors = cache_label_selectors(options.get("exclude_label_prefixes", ()))
        manager = Manager(kube, namespaces={namespace, controller_namespace, *more_namespaces},
                          label_selectors=selectors, metrics_address=None, health_address=None)  # fmt: skip
        pool = ActionsClientPool(
            system_info=SystemInfo(subsystem="controller-test"),
            transport=TransportOptions(request_timeout=10.0, retry_max=1, retry_wait_min=0.05, retry_wait_max=0.1),
        )
        ctx = ControllerContext.create(kube, manager, ControllerSettings(**options), pool=pool, environ={})
        ars_reconciler = AutoscalingRunnerSetReconciler(ctx)
        al_reconciler = AutoscalingListenerReconciler(ctx)
        manager.add(ars_reconciler.controller())
        manager.add(al_reconciler.controller())
        env = ScaleSetEnv(
            kube=kube, namespace=namespace, controller_namespace=controller_namespace, sim=sim, manager=manager,
            ctx=ctx, ars_reconciler=ars_reconciler, al_reconciler=al_reconciler, config_url=sim.config_url("org"),
        )  # fmt: skip
        if secret:
            await env.create_secret()
        task = asyncio.create_task(manager.run())

        async def ready() -> bool:
            if task.done():
                task.result()
            return manager.ready

        await eventually(ready, "the manager's caches to sync")
        try:
            yield env
        finally:
            try:
                if cleanup:
                    await _clean_up(env)
            finally:
                # Stopped whatever the clean-up did: a manager left running on the shared client would add
                # requests (and reconciles) to every later test of the run.
                manager.request_stop()
                await asyncio.wait_for(task, 30)
                await ctx.github.pool.aclose()

    return start


async def _clean_up(env: ScaleSetEnv) -> None:
    """Delete the test's scale sets through the running controllers (bounded), then strip what is left, so
    the namespaces can go away."""
    kube = env.kube
    listed = await kube.list(AUTOSCALING_RUNNER_SETS, namespace=env.namespace)
    for item in listed.items:
        with contextlib.suppress(NotFound):
            await kube.delete(AUTOSCALING_RUNNER_SETS, item["metadata"]["name"], namespace=env.namespace)

    async def gone() -> bool:
        return not (await kube.list(AUTOSCALING_RUNNER_SETS, namespace=env.namespace)).items

    with contextlib.suppress(TimeoutError):  # what is left is stripped below
        await eventually(gone, "the scale sets to be deleted", timeout=20)
    for resource, namespace in (
        (AUTOSCALING_RUNNER_SETS, env.namespace),
        (AUTOSCALING_LISTENERS, env.controller_namespace),
        (resources.SECRETS, env.namespace),
    ):
        for item in (await kube.list(resource, namespace=namespace)).items:
            if item["metadata"].get("finalizers"):
                with contextlib.suppress(NotFound):
                    await kube.patch(resource, item["metadata"]["name"], {"metadata": {"finalizers": None}},
                                     namespace=namespace)  # fmt: skip
