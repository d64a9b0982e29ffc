"""Issue 30: a group is bounded below its config Secret's limit; sets past the bound go to another group of the
same key, each set in exactly one, and no member is moved when the next set spills over (api/group_shards.py)."""

from __future__ import annotations

import asyncio
import collections

import pytest

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.listener_group import ANNOTATION_GROUP_SHARD, LABEL_GROUP, group_object_name
from arc_scaleset.kube import resources
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)
from tests.integration.controllers.sharedlistener.test_shared_listener import (
    create_shared,
    group_of,
    group_pod,
    published,
    role_sets,
)

pytestmark = pytest.mark.cluster

MAX_MEMBERS = 2


async def listener_annotations(env: ControllerHarness, ars_name: str) -> dict[str, str]:
    for listener in await env.listeners():
        view = ObjectView(listener)
        if view.spec.get("autoscalingRunnerSetName") == ars_name and not view.is_deleting:
            return dict(view.annotations)
    raise AssertionError(f"no listener of {ars_name}")


def cached_members(env: ControllerHarness, group: str) -> set[str]:
    """The scale sets whose listeners the controllers' cache shows in ``group``: the members a joining set's pass
    counts."""
    assert env.ctx is not None
    listeners = env.ctx.cache(AUTOSCALING_LISTENERS).by_label(LABEL_GROUP, group)
    return {str(ObjectView(listener).spec.get("autoscalingRunnerSetName")) for listener in listeners}


async def roles_name(env: ControllerHarness, group: str, sets: list[str]) -> bool:
    return sorted(await role_sets(env, group, env.namespace)) == sets


async def test_a_group_over_its_bound_splits_and_its_members_keep_their_pod(start_env: EnvFactory) -> None:
    async with start_env(shared_listener_max_members=MAX_MEMBERS) as env:
        for name in ("alpha", "beta"):
            await create_shared(env, name)
        first = await group_of(env, "alpha")
        assert await group_of(env, "beta") == first
        await published(env, first, 2)
        pod = await group_pod(env, first)
        assert ANNOTATION_GROUP_SHARD not in await listener_annotations(env, "alpha"), "shard 0: as before shards"

        # The third set spills over into a second group of the same key: its own pod, Secret and Role.
        await create_shared(env, "gamma")
        second = await group_of(env, "gamma")
        assert second != first
        assert (await listener_annotations(env, "gamma"))[ANNOTATION_GROUP_SHARD] == "1"
        assert len(await published(env, second, 1)) == 1
        await group_pod(env, second)
        await eventually(lambda: roles_name(env, second, ["gamma"]), "the second group's Role naming gamma")
        assert await roles_name(env, first, ["alpha", "beta"])
        # The first group's members were not moved: same keys, same pod.
        assert len(await published(env, first, 2)) == 2
        still = await env.listener_pod(group_object_name(first))
        assert still is not None
        assert ObjectView(still).uid == ObjectView(pod).uid, "the members of the full group kept their pod"

        # A fourth set fills the second group; each set is in exactly one group.
        await create_shared(env, "delta")
        assert await group_of(env, "delta") == second
        keys = {**await published(env, first, 2), **await published(env, second, 2)}
        assert len(keys) == 4, "each set's key in exactly one group's Secret"
        pods = (await env.kube.list(resources.PODS, namespace=env.controller_namespace)).items
        assert {ObjectView(p).name for p in pods} == {group_object_name(first), group_object_name(second)}

        # A place freed in the first group is taken by the next set that joins, not by a member of the second.
        await env.kube.delete(AUTOSCALING_RUNNER_SETS, "beta", namespace=env.namespace)
        await published(env, first, 1)
        # The place is free once beta's listener is gone from the cache a set's pass counts members in, which is
        # later than its key leaving the Secret (its listener's pass removes the key, then its finalizer).
        await eventually(lambda: cached_members(env, first) == {"alpha"}, "beta's listener gone from the cache")
        await create_shared(env, "epsilon")
        assert await group_of(env, "epsilon") == first
        assert await group_of(env, "gamma") == second
        assert await group_of(env, "delta") == second


async def test_sets_created_together_never_pass_a_groups_member_limit(start_env: EnvFactory) -> None:
    names = ["one", "two", "three", "four", "five"]
    async with start_env(shared_listener_max_members=MAX_MEMBERS) as env:
        # All at once: their passes choose a shard side by side, before the cache shows any of their listeners.
        await asyncio.gather(*(create_shared(env, name) for name in names))
        groups = [await group_of(env, name) for name in names]
        sizes = sorted(collections.Counter(groups).values(), reverse=True)
        assert sizes == [2, 2, 1], f"{len(names)} sets in groups of at most {MAX_MEMBERS}"
        for group, size in collections.Counter(groups).items():
            await published(env, group, size)
