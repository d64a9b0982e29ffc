"""The :class:`~tests.integration.controllers.harness.ControllerHarness` of the AutoscalingRunnerSet and
AutoscalingListener integration tests: the ``start_env`` fixture.

``start_env`` (a fixture factory) gives the harness running those two controllers: a fresh scale-set namespace
(the ``namespace`` fixture), a second namespace playing the controller namespace, a simulated GitHub with a
PAT, the GitHub Secret, and a manager running both reconcilers in-process. Tests import the fixtures from
here::

    from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
        controller_namespace_fixture, sim_fixture, start_env_fixture,
    )
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.clock import REAL_CLOCK
from arc_scaleset.github import TransportOptions
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import NotFound
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim import SimConfig, SimulatedGitHub
from tests.integration.controllers.harness import ORG, SCALE_SET_CONTROLLERS, ControllerHarness

PAT = "ghp_controller_integration_token"
SECRET_NAME = "gh-secret"
UID_ANNOTATION = "actions.github.com/autoscaling-runner-set-uid"
IMAGE = "ghcr.io/example/arc-scaleset:test"
RUNNER_TEMPLATE: dict[str, Any] = {
    "spec": {
        "containers": [{"name": "runner", "image": "ghcr.io/actions/actions-runner:latest", "command": ["run.sh"]}]
    }
}
DEFAULTS: dict[str, Any] = {
    "controller_image": IMAGE,
    "listener_restart_backoff_base": 1.0,
    "listener_restart_backoff_cap": 8.0,
}
CLIENT_OPTIONS = TransportOptions(request_timeout=10.0, retry_max=1, retry_wait_min=0.05, retry_wait_max=0.1)


EnvFactory = Callable[..., AbstractAsyncContextManager[ControllerHarness]]


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
    ) -> AsyncIterator[ControllerHarness]:
        env = ControllerHarness(
            kube=kube,
            namespace=namespace,
            controller_namespace=controller_namespace,
            sim=sim,
            config_url=sim.config_url(ORG),
            github_secret=SECRET_NAME,
            token=PAT,
            template=RUNNER_TEMPLATE,
            kinds=SCALE_SET_CONTROLLERS,
            defaults=DEFAULTS,
            client_options=CLIENT_OPTIONS,
        )
        if secret:
            await env.create_secret()
        try:
            await env.start(more_namespaces=more_namespaces, **settings)
            yield env
        finally:
            try:
                if cleanup:
                    await _clean_up(env)
            finally:
                # Stopped whatever the clean-up did: a manager left running on the shared client would add
                # requests (and reconciles) to every later test of the run.
                await env.close()

    return start


@asynccontextmanager
async def listener_by_hand(
    kube: KubeClient,
    namespace: str,
    controller_namespace: str,
    sim: SimulatedGitHub,
    *,
    config_secret: str = SECRET_NAME,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """An AutoscalingListener written by hand, not made by a scale set: the body of ``arc-runners-listener`` (for
    the test to create in ``controller_namespace``), vouched for by the UID of the AutoscalingRunnerSet
    ``arc-runners``, which this creates in ``namespace`` (its Secret ``gh-secret`` is the test's to create).

    The listener's spec names the Secret ``config_secret``; ``annotations`` and ``labels`` go on its metadata too.
    When the block ends, the finalizers come off both (no controller may be left to remove them), so the
    namespaces can go.
    """
    ars = await kube.create(
        AUTOSCALING_RUNNER_SETS,
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "AutoscalingRunnerSet",
            "metadata": {"name": "arc-runners"},
            "spec": {"githubConfigUrl": sim.config_url(ORG), "githubConfigSecret": SECRET_NAME, "template": {}},
        },
        namespace=namespace,
    )
    name = "arc-runners-listener"
    metadata: dict[str, Any] = {
        "name": name,
        "annotations": {UID_ANNOTATION: ars["metadata"]["uid"], **(annotations or {})},
    }
    if labels:
        metadata["labels"] = dict(labels)
    listener = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingListener",
        "metadata": metadata,
        "spec": {
            "githubConfigUrl": sim.config_url(ORG),
            "githubConfigSecret": config_secret,
            "runnerScaleSetId": 1,
            "autoscalingRunnerSetNamespace": namespace,
            "autoscalingRunnerSetName": "arc-runners",
            "ephemeralRunnerSetName": "arc-runners",
            "maxRunners": 3,
            "minRunners": 0,
            "image": IMAGE,
        },
    }
    try:
        yield listener
    finally:
        for resource, ns in ((AUTOSCALING_LISTENERS, controller_namespace), (AUTOSCALING_RUNNER_SETS, namespace)):
            with contextlib.suppress(NotFound):
                await kube.patch(resource, "arc-runners" if ns == namespace else name,
                                 {"metadata": {"finalizers": None}}, namespace=ns)  # fmt: skip


async def _clean_up(env: ControllerHarness) -> None:
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
