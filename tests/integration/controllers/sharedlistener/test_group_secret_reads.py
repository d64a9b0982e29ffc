"""Issue 30: a shared listener's config Secret is read once per change, not on every pass of the group or of a
member (controllers/group_config_secrets.py), and a change made by someone else is still seen."""

from __future__ import annotations

import pytest

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.listener_group import group_object_name
from arc_scaleset.kube import resources
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)
from tests.integration.controllers.sharedlistener.test_shared_listener import (
    SETS,
    create_shared,
    get,
    group_of,
    group_pod,
    published,
)

pytestmark = pytest.mark.cluster

ROUNDS = 5


def config_secret_requests(env: ControllerHarness, verb: str) -> int:
    """Requests of ``verb`` on Secrets in the controller namespace: the group's config Secret is the only one
    there."""
    return env.kube.namespace_request_counts[(verb, resources.SECRETS.plural, env.controller_namespace)]


async def test_the_passes_of_a_group_and_its_members_read_its_config_secret_once_per_change(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        for name in SETS:
            await create_shared(env, name)
        group = await group_of(env, "alpha")
        data = await published(env, group, len(SETS))
        await group_pod(env, group)
        assert env.ctx is not None
        secrets = env.ctx.group_secrets
        await eventually(lambda: secrets.reuses > 0, "a read of the config Secret answered from memory")
        fetched = secrets.fetches
        gets, patches = config_secret_requests(env, "get"), config_secret_requests(env, "patch")

        # Every member's pass and the group's, ROUNDS times over: an annotation on each member wakes both.
        target = secrets.reuses + ROUNDS * len(SETS) * 2
        for round_ in range(ROUNDS):
            for member in data:
                patch = {"metadata": {"annotations": {"test.arc-scaleset.dev/round": str(round_)}}}
                await env.kube.patch(AUTOSCALING_LISTENERS, member, patch, namespace=env.controller_namespace)
        await eventually(lambda: secrets.reuses >= target, f"{target} reads of the config Secret from memory")
        print(f"config Secret: {secrets.reuses} reads from memory, {secrets.fetches} GETs in all")
        assert secrets.fetches == fetched, "a pass read the unchanged config Secret from the API server"
        assert config_secret_requests(env, "get") == gets
        assert config_secret_requests(env, "patch") == patches, "a pass rewrote the unchanged config Secret"

        # Someone else's change is seen: a key no member owns, written by hand, is pruned.
        name = group_object_name(group)
        await env.kube.patch(resources.SECRETS, name, {"data": {"stray": "eA=="}}, namespace=env.controller_namespace)

        async def pruned() -> bool:
            secret = await get(env, resources.SECRETS, name, env.controller_namespace)
            return secret is not None and "stray" not in (secret.get("data") or {})

        await eventually(pruned, "the stray key pruned by the group's pass", timeout=30)
        secret = await get(env, resources.SECRETS, name, env.controller_namespace)
        assert secret is not None
        assert sorted(secret.get("data") or {}) == sorted(data), "the members' keys kept"
