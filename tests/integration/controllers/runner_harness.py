"""The :class:`~tests.integration.controllers.harness.ControllerHarness` of the EphemeralRunner and
EphemeralRunnerSet integration tests: ``harness(kube, namespace)``.

The two runner controllers, started by the test (``await h.start()``; ``h.start("EphemeralRunnerSet")`` runs
that one only), with the test's namespace as the controller's, a simulated GitHub of their own with one scale
set registered, and the GitHub Secret (``SECRET_NAME``, holding ``PAT``) in the namespace. Tests take it as the
fixture ``h``, imported from here: ``harness_fixture`` (not started) or ``started_harness_fixture``::

    from tests.integration.controllers.runner_harness import harness_fixture  # noqa: F401 - fixture
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from arc_scaleset.github import ActionsClient, PersonalAccessToken, SystemInfo, parse_config_url
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.resources import SECRETS
from arc_scaleset_lab.sim import SimConfig, SimulatedGitHub
from tests.integration.controllers.harness import ORG, RUNNER_CONTROLLERS, ControllerHarness

PAT = "ghp_runner_controllers_0123456789"
SECRET_NAME = "github-secret"
SHUTDOWN_TIMEOUT = 5.0  # a stop lets in-flight reconciles finish for this long


def runner_template(image: str = "ghcr.io/actions/actions-runner:latest") -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "runner", "image": image}]}}


async def create_github_secret(kube: KubeClient, namespace: str, name: str = SECRET_NAME, token: str = PAT) -> None:
    await kube.create(
        SECRETS,
        {
            "metadata": {"name": name, "namespace": namespace},
            "data": {"github_token": base64.b64encode(token.encode()).decode()},
        },
    )


@contextlib.asynccontextmanager
async def harness(kube: KubeClient, namespace: str, **options: Any) -> AsyncIterator[ControllerHarness]:
    """The harness, its controllers not started yet; ``options``: further :class:`ControllerHarness` fields.
    At the end the controllers stop and the runners and sets left are released, so the namespace can go."""
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
    defaults = {
        "controller_image": "arc-scaleset:test",
        "runner_create_concurrency": 20,
        "runner_max_concurrent_reconciles": 4,
        "runner_pending_timeout": 900.0,
    }
    h = ControllerHarness(
        kube=kube,
        namespace=namespace,
        controller_namespace=namespace,
        sim=sim,
        config_url=config_url,
        github_secret=SECRET_NAME,
        token=PAT,
        template=runner_template(),
        kinds=RUNNER_CONTROLLERS,
        defaults=defaults,
        scale_set_id=scale_set.id,
        shutdown_timeout=SHUTDOWN_TIMEOUT,
        **options,
    )
    try:
        yield h
    finally:
        try:
            await h.close()
            await h.release_runners()
        finally:
            await sim.stop()


@pytest.fixture(name="h")
async def harness_fixture(
    kube: KubeClient, namespace: str, crds_installed: list[str]
) -> AsyncIterator[ControllerHarness]:
    """``h``: the harness of the test's namespace, its controllers not started (the test starts them)."""
    async with harness(kube, namespace) as running:
        yield running


@pytest.fixture(name="h")
async def started_harness_fixture(
    kube: KubeClient, namespace: str, crds_installed: list[str]
) -> AsyncIterator[ControllerHarness]:
    """``h``: the harness of the test's namespace, both runner controllers running."""
    async with harness(kube, namespace) as running:
        await running.start()
        yield running
