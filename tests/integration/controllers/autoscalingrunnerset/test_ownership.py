"""A scale set's children are its own by identity, not by a UID or a name another team can copy (issue 26, items
2 and 3; docs/controllers.md, "Tenancy"). On the real control plane, with a second team's namespace beside the
scale set's: a runner set there carrying the scale set's UID changes nothing, and a scale set whose listener name
collides with another's takes nothing from it."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS, AutoscalingRunnerSet
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.harness.name_collisions import colliding_config_url
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import harness, runner_template
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    PAT,
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


@pytest.fixture(name="team_b")
async def team_b_fixture(kube: KubeClient) -> AsyncIterator[str]:
    """Another team's namespace, with its own GitHub Secret; its scale sets are stripped of finalizers at the end."""
    name = f"t-team-b-{uuid.uuid4().hex[:6]}"
    await kube.create(resources.NAMESPACES, {"metadata": {"name": name, "labels": {"arc-scaleset.dev/test": "true"}}})
    await kube.create(resources.SECRETS, {"metadata": {"name": "gh-secret"}, "stringData": {"github_token": PAT}},
                      namespace=name)  # fmt: skip
    try:
        yield name
    finally:
        for resource in (AUTOSCALING_RUNNER_SETS, EPHEMERAL_RUNNER_SETS):
            for item in (await kube.list(resource, namespace=name)).items:
                with contextlib.suppress(NotFound):
                    await kube.patch(resource, item["metadata"]["name"], {"metadata": {"finalizers": None}},
                                     namespace=name)  # fmt: skip
        await kube.delete(resources.NAMESPACES, name, missing_ok=True)


async def get(env: ControllerHarness, resource: resources.Resource, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return await env.kube.get(resource, name, namespace=namespace)
    except NotFound:
        return None


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return get_condition((obj.get("status") or {}).get("conditions"), type_) or {}


def live(obj: dict[str, Any] | None) -> str:
    """The UID of an object that exists and is not being deleted (``""`` otherwise)."""
    return "" if obj is None or ObjectView(obj).is_deleting else ObjectView(obj).uid


async def test_a_runner_set_in_another_namespace_carrying_the_scale_sets_uid_changes_nothing(
    start_env: EnvFactory, team_b: str
) -> None:
    async with start_env(more_namespaces=(team_b,)) as env:
        await env.create_ars()
        ars = await eventually(env.running, "the scale set Running")
        own = await env.ers()
        assert own is not None
        # Team B copies the set into its own namespace, under another name, newer than the real one, its controller
        # reference carrying A's scale set (name and UID) under a version the garbage collector cannot resolve.
        view = ObjectView(ars)
        foreign = {
            "apiVersion": own["apiVersion"],
            "kind": own["kind"],
            "metadata": {
                "name": "takeover",
                "ownerReferences": [
                    {
                        "apiVersion": "actions.github.com/v9",
                        "kind": "AutoscalingRunnerSet",
                        "name": view.name,
                        "uid": view.uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {**own["spec"], "replicas": 0},
        }
        foreign = await env.kube.create(EPHEMERAL_RUNNER_SETS, foreign, namespace=team_b)

        # A change the scale set's next pass carries to its current set: by UID alone, that pass found the foreign
        # set current and deleted the scale set's own set as superseded instead.
        await env.kube.patch(AUTOSCALING_RUNNER_SETS, view.name, {"metadata": {"labels": {"team": "a"}}},
                             namespace=env.namespace)  # fmt: skip

        async def labelled() -> dict[str, Any] | None:
            ers = await env.ers()
            return ers if ers is not None and ObjectView(ers).labels.get("team") == "a" else None

        after = await eventually(labelled, "the label on the scale set's own EphemeralRunnerSet")
        assert live(after) == ObjectView(own).uid, "the scale set's own set is kept, not superseded"
        assert after["spec"]["replicas"] == own["spec"].get("replicas")
        assert await get(env, EPHEMERAL_RUNNER_SETS, "takeover", env.namespace) is None, "nothing made in its name"
        names = {
            item["metadata"]["name"]
            for item in (await env.kube.list(EPHEMERAL_RUNNER_SETS, namespace=env.namespace)).items
        }
        assert names == {ObjectView(own).name}
        untouched = await get(env, EPHEMERAL_RUNNER_SETS, "takeover", team_b)
        assert untouched is not None
        assert ObjectView(untouched).resource_version == ObjectView(foreign).resource_version

        # The label also reaches the listener, which is recreated with it; then the scale set is Running again.
        await eventually(env.running, "the scale set Running")
        assert live(await env.ers()) == ObjectView(own).uid


async def test_a_newer_runner_set_in_another_namespace_claiming_the_scale_set_does_not_supersede_its_set(
    kube: KubeClient, namespace: str, team_b: str, crds_installed: list[str]
) -> None:
    async with harness(kube, namespace) as h:
        await h.start(more_namespaces=(team_b,))
        owner = {"apiVersion": "actions.github.com/v1alpha1", "kind": "AutoscalingRunnerSet",
                 "metadata": {"name": "arc-runners", "namespace": namespace},
                 "spec": {"githubConfigUrl": h.config_url, "githubConfigSecret": "github-secret",
                          "template": runner_template()}}  # fmt: skip
        owner = await kube.create(AUTOSCALING_RUNNER_SETS, owner)
        ref = {"kind": "AutoscalingRunnerSet", "name": "arc-runners", "uid": ObjectView(owner).uid, "controller": True}
        own = h.ers_body("arc-runners", replicas=2, patch_id=1)
        own["metadata"]["ownerReferences"] = [{**ref, "apiVersion": "actions.github.com/v1alpha1"}]
        await kube.create(EPHEMERAL_RUNNER_SETS, own)
        await h.wait_running(2)

        # Team B's newer set claims the scale set, from its own namespace: by UID alone it was the current set, and
        # the scale set's own set, superseded, removed its idle runners and created none.
        foreign = h.ers_body("takeover", replicas=0, patch_id=0)
        foreign["metadata"] = {"name": "takeover", "ownerReferences": [{**ref, "apiVersion": "actions.github.com/v9"}]}
        await kube.create(EPHEMERAL_RUNNER_SETS, foreign, namespace=team_b)
        await h.patch_ers("arc-runners", replicas=3, patchID=2)
        await h.wait_running(3)
        assert not ObjectView(await h.get_ers("arc-runners")).is_deleting


async def test_a_scale_set_whose_listener_name_collides_with_anothers_leaves_both_listeners_running(
    start_env: EnvFactory, team_b: str
) -> None:
    async with start_env(more_namespaces=(team_b,)) as env:
        await env.create_ars()
        ars_a = await eventually(env.running, "scale set A Running")
        listener_a = env.listener_name(ars_a)
        await eventually(lambda: env.listener_pod(listener_a), "the listener pod of A")
        a_uid = live(await env.listener(listener_a))

        # Team B's scale set of the same name, first with a URL of its own.
        body = env.ars_body()
        body["spec"]["githubConfigUrl"] = env.sim.config_url("team-b")
        await env.kube.create(AUTOSCALING_RUNNER_SETS, body, namespace=team_b)

        async def b_running() -> dict[str, Any] | None:
            obj = await get(env, AUTOSCALING_RUNNER_SETS, "arc-runners", team_b)
            return obj if obj is not None and (obj.get("status") or {}).get("phase") == "Running" else None

        ars_b = await eventually(b_running, "scale set B Running")
        listener_b = env.listener_name(ars_b)
        assert listener_b != listener_a
        b_uid = live(await eventually(lambda: env.listener(listener_b), "B's listener"))

        # B moves to a URL that gives its listener A's listener's name (a search of about a second).
        parsed = AutoscalingRunnerSet.from_object(ars_a)
        url = colliding_config_url(
            name=parsed.name, namespace=env.namespace, runner_group=parsed.spec.runner_group,
            config_url=parsed.spec.github_config_url, other_namespace=team_b,
            other_url_prefix=env.sim.config_url("team-b-"),
        )  # fmt: skip
        await env.kube.patch(AUTOSCALING_RUNNER_SETS, "arc-runners", {"spec": {"githubConfigUrl": url}},
                             namespace=team_b)  # fmt: skip
        ars_b = await get(env, AUTOSCALING_RUNNER_SETS, "arc-runners", team_b)
        assert ars_b is not None
        assert env.listener_name(ars_b) == listener_a

        async def conflict() -> dict[str, Any] | None:
            obj = await get(env, AUTOSCALING_RUNNER_SETS, "arc-runners", team_b)
            found = condition(obj or {}, "Degraded")
            return found if found.get("reason") == "ListenerNameConflict" and found.get("status") == "True" else None

        reported = await eventually(conflict, "ListenerNameConflict on scale set B", timeout=60)
        assert f"AutoscalingRunnerSet {env.namespace}/arc-runners" in reported["message"], reported
        await env.wait_for_event("ListenerNameConflict", regarding="arc-runners", namespace=team_b)

        # Both listeners run on: A's keeps its name, B's previous one is not deleted before B can have another.
        assert live(await env.listener(listener_a)) == a_uid
        assert live(await env.listener(listener_b)) == b_uid
        assert live(await env.listener_pod(listener_a))
        assert await env.running(), "scale set A is Running, untouched"

        # Deleting B deletes its own listener, never A's under the same name.
        await env.kube.delete(AUTOSCALING_RUNNER_SETS, "arc-runners", namespace=team_b)

        async def b_gone() -> bool:
            return await get(env, AUTOSCALING_RUNNER_SETS, "arc-runners", team_b) is None

        await eventually(b_gone, "scale set B deleted", timeout=60)
        assert await env.listener(listener_b) is None
        assert live(await env.listener(listener_a)) == a_uid
