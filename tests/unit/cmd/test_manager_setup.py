"""``setup_controllers``: the four controllers, the shared-listener controller and the warm-pool controller,
registered with the manager, each with its own workqueue rate limiter from the ``--workqueue-rate-limiter``
factory; ``cache_label_selectors``: what the manager caches; ``start_traces``: the OpenTelemetry SDK only with an
OTLP endpoint."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Hashable

from arc_scaleset.cmd.controller import start_traces
from arc_scaleset.cmd.controller_setup import CHILD_LABEL, cache_label_selectors, setup_controllers
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.credentials import ConnectionConfig
from arc_scaleset.kube.manager import Manager
from arc_scaleset.kube.resources import PODS, ROLE_BINDINGS, ROLES, SERVICE_ACCOUNTS
from arc_scaleset.observability.otlp_traces import OtlpTraceSink


class RecordingLimiter:
    """A rate limiter that remembers which keys its queue asked about."""

    def __init__(self) -> None:
        self.asked: list[Hashable] = []

    def when(self, key: Hashable) -> float:
        self.asked.append(key)
        return 0.0

    def forget(self, key: Hashable) -> None:
        self.asked.append(key)

    def num_requeues(self, key: Hashable) -> int:
        self.asked.append(key)
        return 0


async def test_each_controller_is_registered_and_its_queue_uses_its_own_limiter_from_the_factory() -> None:
    kube = KubeClient(ConnectionConfig(server="http://127.0.0.1:9"), retries=0)  # never contacted
    manager = Manager(kube, metrics_address=None)
    settings = ControllerSettings(controller_namespace="arc-systems", controller_image="ghcr.io/x/c:1")
    ctx = ControllerContext.create(kube, manager, settings, environ={})
    made: list[RecordingLimiter] = []

    def factory() -> RecordingLimiter:
        made.append(RecordingLimiter())
        return made[-1]

    controllers = setup_controllers(ctx, rate_limiter=factory)
    try:
        assert [c.name for c in controllers] == [
            "autoscalingrunnerset", "ephemeralrunnerset", "ephemeralrunner", "autoscalinglistener", "sharedlistener",
            "warmcapacity",
        ]  # fmt: skip
        assert manager.controllers == controllers
        assert len(made) == len(controllers)
        for controller in controllers:
            controller.start(lambda resource: ())
        for index, controller in enumerate(controllers):
            key = Request("team", f"key-{index}")
            controller.queue.num_requeues(key)
            assert [limiter.asked for limiter in made] == [[key] if i == index else [] for i in range(len(made))]
            made[index].asked.clear()
    finally:
        for controller in controllers:
            await controller.stop(drain=False)
        await ctx.github.pool.aclose()
        await kube.close()


async def test_the_warm_pool_controller_is_left_out_when_warm_capacity_is_off() -> None:
    kube = KubeClient(ConnectionConfig(server="http://127.0.0.1:9"), retries=0)  # never contacted
    settings = ControllerSettings(
        controller_namespace="arc-systems", controller_image="ghcr.io/x/c:1", warm_capacity=False
    )
    ctx = ControllerContext.create(kube, Manager(kube, metrics_address=None), settings, environ={})
    try:
        assert "warmcapacity" not in [c.name for c in setup_controllers(ctx)]
    finally:
        await ctx.github.pool.aclose()
        await kube.close()


def test_pods_service_accounts_roles_and_bindings_are_cached_only_with_the_childrens_label() -> None:
    assert cache_label_selectors() == dict.fromkeys((PODS, SERVICE_ACCOUNTS, ROLES, ROLE_BINDINGS), CHILD_LABEL)
    assert cache_label_selectors(["example.com/", "team."]) == cache_label_selectors()


def test_no_selector_when_the_childrens_label_is_kept_off_the_objects_the_controller_makes() -> None:
    assert cache_label_selectors(["actions.github.com/"]) == {}
    assert cache_label_selectors(["actions."]) == {}


def test_the_default_controller_never_imports_opentelemetry() -> None:
    # A fresh interpreter: the controller command's flags and settings, its context and its five controllers,
    # as `arc-scaleset controller` builds them without an OTLP endpoint.
    code = """
import asyncio, sys
from arc_scaleset.cli import build_parser
from arc_scaleset.cmd.controller import settings_from_args, start_traces
from arc_scaleset.cmd.controller_setup import setup_controllers
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.credentials import ConnectionConfig
from arc_scaleset.kube.manager import Manager

async def main():
    env = {"CONTROLLER_MANAGER_POD_NAMESPACE": "arc-systems", "CONTROLLER_MANAGER_CONTAINER_IMAGE": "c:1"}
    settings = settings_from_args(build_parser(["controller"]).parse_args(["controller"]), env)
    traces = start_traces(settings)
    kube = KubeClient(ConnectionConfig(server="http://127.0.0.1:9"), retries=0)
    ctx = ControllerContext.create(kube, Manager(kube, metrics_address=None), settings, environ=env, traces=traces)
    setup_controllers(ctx)
    await ctx.github.pool.aclose()
    await kube.close()
    print(traces, sorted(m for m in sys.modules if m.startswith("opentelemetry")))

asyncio.run(main())
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.stdout.strip() == "None []", result.stderr


def test_an_otlp_endpoint_starts_the_trace_sink() -> None:
    settings = ControllerSettings(
        controller_namespace="arc-systems", controller_image="c:1", otlp_traces_endpoint="http://127.0.0.1:9/v1/traces"
    )
    traces = start_traces(settings)
    assert isinstance(traces, OtlpTraceSink)
    traces.shutdown()  # nothing queued: returns at once
