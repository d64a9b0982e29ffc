"""Issue 30's request budget: a scale set's passes read its credentials Secret from the API server once per
change of the Secret, not once per pass (controllers/referenced_data.py)."""

from __future__ import annotations

import pytest

from arc_scaleset.controllers.referenced_objects import Reference
from arc_scaleset.kube import resources
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

PASSES = 8
ROTATED = "ghp_controller_integration_token_rotated"


def secret_gets(env: ControllerHarness) -> int:
    """GETs of Secrets in the scale set's namespace (the listener's own config Secret is in the controller's)."""
    return env.kube.namespace_request_counts[("get", resources.SECRETS.plural, env.namespace)]


async def resolutions(env: ControllerHarness, count: int) -> None:
    """Until the controllers have resolved the scale set's credentials ``count`` more times from memory."""
    reads = env.ctx.github.reads
    target = reads.reuses + count
    await eventually(lambda: reads.reuses >= target, f"{count} more resolutions of the credentials")


async def test_passes_of_a_scale_set_read_its_secret_once_per_change(start_env: EnvFactory) -> None:
    # Every pass checks the scale set on GitHub (each 0.2 s), and so resolves its credentials.
    async with start_env(scale_set_verify_interval=0.2) as env:
        secret = Reference("Secret", env.namespace, "gh-secret")
        reads = env.ctx.github.reads
        await env.create_ars()
        await eventually(env.running, "Running")
        # The listener exists: its credentials Secret is watched (metadata only) from now on.
        watched = await eventually(lambda: env.ctx.references.resource_version(secret), "the Secret to be watched")
        await resolutions(env, 1)  # the data for the version the watch shows, fetched by then

        gets, fetches = secret_gets(env), reads.fetches
        await resolutions(env, PASSES)
        assert secret_gets(env) == gets, "a pass of an unchanged scale set read its Secret from the API server"
        assert reads.fetches == fetches

        # A rotated Secret is read again once the watch has seen it, and once only (the scale set's passes and
        # the listener, rebuilt with the new credentials, share the read).
        env.sim.credentials.add_token(ROTATED)
        await env.kube.patch(resources.SECRETS, "gh-secret", {"stringData": {"github_token": ROTATED}},
                             namespace=env.namespace)  # fmt: skip

        def rotated() -> bool:
            return env.ctx.references.resource_version(secret) not in (None, watched)

        await eventually(rotated, "the watch to see the rotated Secret")
        await eventually(lambda: reads.fetches == fetches + 1, "the rotated Secret to be read")
        await resolutions(env, PASSES)
        assert reads.fetches == fetches + 1
        assert secret_gets(env) == gets + 1
        assert await env.running() is not None
