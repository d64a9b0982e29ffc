"""One controller serves many teams: nothing one scale set's objects say may reach another
team's credentials or namespace. On the real control plane: listeners elsewhere or not made by their scale set,
credentials from the scale set, foreign objects in the way, and the listenerTemplate policy."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.naming import listener_config_secret_name, listener_role_binding_name, listener_role_name
from arc_scaleset.cmd.controller_setup import cache_label_selectors
from arc_scaleset.controllers.autoscalinglistener.reconciler import AutoscalingListenerReconciler
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.github import ActionsClientPool, SystemInfo
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.manager import Manager
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim import SimulatedGitHub
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    IMAGE,
    PAT,
    UID_ANNOTATION,
    EnvFactory,
    controller_namespace_fixture,
    listener_by_hand,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

SHAREABLE_LABEL = "actions.github.com/listener-shareable"


async def condition(kube: KubeClient, namespace: str, name: str, type_: str) -> dict[str, Any]:
    try:
        listener = await kube.get(AUTOSCALING_LISTENERS, name, namespace=namespace)
    except NotFound:
        return {}
    return get_condition((listener.get("status") or {}).get("conditions"), type_) or {}


async def degraded(kube: KubeClient, namespace: str, name: str, reason: str) -> dict[str, Any] | None:
    found = await condition(kube, namespace, name, "Degraded")
    return found if found.get("status") == "True" and found.get("reason") == reason else None


async def exists(kube: KubeClient, resource: resources.Resource, name: str, namespace: str) -> bool:
    try:
        await kube.get(resource, name, namespace=namespace)
    except NotFound:
        return False
    return True


async def running_listener(env: ControllerHarness, ars_name: str = "arc-runners") -> dict[str, Any]:
    """The AutoscalingListener of a Running scale set, once its pod exists."""
    ars = await eventually(lambda: env.running(ars_name), f"{ars_name} Running")
    name = env.listener_name(ars)
    await eventually(lambda: env.listener_pod(name), f"the listener pod of {ars_name}")
    listener = await env.listener(name)
    assert listener is not None
    return listener


def listener_name(env: ControllerHarness, ars_name: str = "arc-runners") -> str:
    """The name the scale set's listener will have (before the scale set exists)."""
    body = env.ars_body(ars_name)
    body["metadata"]["namespace"] = env.namespace
    return env.listener_name(body)


def config_token(secret: dict[str, Any]) -> str:
    config = json.loads(base64.b64decode(secret["data"]["config.json"]))
    return str(config["github_token"])


async def poke(kube: KubeClient, namespace: str, name: str, value: str) -> None:
    """Bring a listener back to its controller now (an annotation change), instead of after its retry backoff."""
    await kube.patch(AUTOSCALING_LISTENERS, name, {"metadata": {"annotations": {"test/poke": value}}},
                     namespace=namespace)  # fmt: skip


# -- which listeners are served -----------------------------------------------------------------------------


async def test_a_listener_created_in_a_scale_set_namespace_gets_no_credentials_and_no_pod(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        await env.create_ars()
        real = await running_listener(env)
        # A team that may create AutoscalingListeners in its own namespace copies the real one, UID and all.
        name = "copied-listener"
        forged = {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "AutoscalingListener",
            "metadata": {"name": name, "annotations": real["metadata"]["annotations"]},
            "spec": real["spec"],
        }
        await env.kube.create(AUTOSCALING_LISTENERS, forged, namespace=env.namespace)

        refused = await eventually(
            lambda: degraded(env.kube, env.namespace, name, "NotInControllerNamespace"), "the refusal on the copy"
        )
        assert env.controller_namespace in refused["message"]
        ready = await condition(env.kube, env.namespace, name, "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "NotInControllerNamespace")
        assert not await exists(env.kube, resources.SECRETS, listener_config_secret_name(name), env.namespace)
        assert not await exists(env.kube, resources.PODS, name, env.namespace)
        assert not await exists(env.kube, resources.SERVICE_ACCOUNTS, name, env.namespace)
        copy = await env.kube.get(AUTOSCALING_LISTENERS, name, namespace=env.namespace)
        assert not copy["metadata"].get("finalizers"), "a refused listener is not held by this controller"
        await env.wait_for_event("NotInControllerNamespace", regarding=name)


async def test_a_listener_its_scale_set_did_not_make_gets_no_credentials_and_no_pod(start_env: EnvFactory) -> None:
    async with start_env() as env:
        await env.create_ars()
        real = await running_listener(env)
        name = "forged-listener"
        for claimed in ({}, {UID_ANNOTATION: "00000000-0000-0000-0000-000000000000"}):
            await env.kube.delete(AUTOSCALING_LISTENERS, name, namespace=env.controller_namespace, missing_ok=True)
            await eventually(
                lambda: _gone(env.kube, AUTOSCALING_LISTENERS, name, env.controller_namespace), "the previous one gone"
            )
            forged = {
                "apiVersion": "actions.github.com/v1alpha1",
                "kind": "AutoscalingListener",
                "metadata": {"name": name, "annotations": claimed},
                "spec": real["spec"],
            }
            await env.kube.create(AUTOSCALING_LISTENERS, forged, namespace=env.controller_namespace)
            refused = await eventually(
                lambda: degraded(env.kube, env.controller_namespace, name, "NotOwnedByScaleSet"), "the refusal"
            )
            assert f"AutoscalingRunnerSet {env.namespace}/arc-runners" in refused["message"]
            config = listener_config_secret_name(name)
            assert not await exists(env.kube, resources.SECRETS, config, env.controller_namespace), claimed
            assert not await exists(env.kube, resources.PODS, name, env.controller_namespace), claimed
        # The scale set's own listener runs on.
        assert await env.listener_pod(real["metadata"]["name"]) is not None


async def _gone(kube: KubeClient, resource: resources.Resource, name: str, namespace: str) -> bool:
    return not await exists(kube, resource, name, namespace)


# -- where the credentials come from --------------------------------------------------------------------------


@asynccontextmanager
async def listener_controller_only(
    kube: KubeClient, namespace: str, controller_namespace: str
) -> AsyncIterator[ControllerContext]:
    """The AutoscalingListener controller alone: nothing recreates a listener whose spec a test edits."""
    manager = Manager(kube, namespaces={namespace, controller_namespace}, label_selectors=cache_label_selectors(),
                      metrics_address=None, health_address=None)  # fmt: skip
    pool = ActionsClientPool(system_info=SystemInfo(subsystem="controller-test"))
    settings = ControllerSettings(controller_namespace=controller_namespace, controller_image=IMAGE)
    ctx = ControllerContext.create(kube, manager, settings, pool=pool, environ={})
    manager.add(AutoscalingListenerReconciler(ctx).controller())
    task = asyncio.create_task(manager.run())

    async def ready() -> bool:
        if task.done():
            task.result()
        return manager.ready

    await eventually(ready, "the manager's caches to sync")
    try:
        yield ctx
    finally:
        manager.request_stop()
        await asyncio.wait_for(task, 30)
        await pool.aclose()


async def test_the_listener_config_takes_the_credentials_of_its_scale_set_not_of_the_listeners_spec(
    kube: KubeClient, namespace: str, controller_namespace: str, sim: SimulatedGitHub, crds_installed: list[str]
) -> None:
    other_token = "ghp_another_teams_token"
    for secret, token in (("gh-secret", PAT), ("team-b-secret", other_token)):
        await kube.create(resources.SECRETS, {"metadata": {"name": secret}, "stringData": {"github_token": token}},
                          namespace=namespace)  # fmt: skip
    # Edited: the listener's spec names another Secret than its scale set's.
    async with (
        listener_by_hand(kube, namespace, controller_namespace, sim, config_secret="team-b-secret") as listener,
        listener_controller_only(kube, namespace, controller_namespace),
    ):
        name = listener["metadata"]["name"]
        await kube.create(AUTOSCALING_LISTENERS, listener, namespace=controller_namespace)

        async def config() -> dict[str, Any] | None:
            try:
                return await kube.get(
                    resources.SECRETS, listener_config_secret_name(name), namespace=controller_namespace
                )
            except NotFound:
                return None

        secret = await eventually(config, "the listener config Secret")
        assert config_token(secret) == PAT


# -- objects in the way ---------------------------------------------------------------------------------------


async def test_a_foreign_role_and_role_binding_are_left_untouched_and_named_in_the_listener_condition(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        name = listener_name(env)
        # Both existed before the scale set, made by somebody else for something else.
        foreign_rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
        role = {"metadata": {"name": listener_role_name(name)}, "rules": foreign_rules}
        await env.kube.create(resources.ROLES, role, namespace=env.namespace)
        foreign_subjects = [{"kind": "ServiceAccount", "name": "someone", "namespace": env.namespace}]
        # The binding even carries the labels the controller puts on its own: its roleRef still gives it away.
        labels = {"auto-scaling-listener-namespace": env.controller_namespace, "auto-scaling-listener-name": name}
        binding = {
            "metadata": {"name": listener_role_binding_name(name), "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": foreign_subjects,
        }
        await env.kube.create(resources.ROLE_BINDINGS, binding, namespace=env.namespace)
        await env.create_ars()

        in_the_way = await eventually(
            lambda: degraded(env.kube, env.controller_namespace, name, "ObjectInTheWay"), "the Role in the way"
        )
        assert f"Role {env.namespace}/{listener_role_name(name)}" in in_the_way["message"]
        live = await env.kube.get(resources.ROLES, listener_role_name(name), namespace=env.namespace)
        assert live["rules"] == foreign_rules
        assert not await exists(env.kube, resources.PODS, name, env.controller_namespace)
        await env.wait_for_event("ObjectInTheWay", regarding="arc-runners")

        # The Role goes: the listener gets its own, and the RoleBinding to another role is next in the way.
        await env.kube.delete(resources.ROLES, listener_role_name(name), namespace=env.namespace)
        await poke(env.kube, env.controller_namespace, name, "1")

        async def binding_named() -> dict[str, Any] | None:
            found = await degraded(env.kube, env.controller_namespace, name, "ObjectInTheWay")
            return found if found and "RoleBinding" in found["message"] else None

        named = await eventually(binding_named, "the RoleBinding in the way")
        assert "'view'" in named["message"]
        live = await env.kube.get(resources.ROLE_BINDINGS, listener_role_binding_name(name), namespace=env.namespace)
        assert live["subjects"] == foreign_subjects
        assert live["roleRef"]["name"] == "view"
        assert not await exists(env.kube, resources.PODS, name, env.controller_namespace)


async def test_a_foreign_secret_under_the_config_secrets_name_is_never_overwritten(start_env: EnvFactory) -> None:
    async with start_env() as env:
        name = listener_name(env)
        secret_name = listener_config_secret_name(name)
        await env.kube.create(resources.SECRETS, {"metadata": {"name": secret_name}, "stringData": {"k": "theirs"}},
                              namespace=env.controller_namespace)  # fmt: skip
        await env.create_ars()
        in_the_way = await eventually(
            lambda: degraded(env.kube, env.controller_namespace, name, "ObjectInTheWay"), "the Secret in the way"
        )
        assert f"Secret {env.controller_namespace}/{secret_name}" in in_the_way["message"]
        live = await env.kube.get(resources.SECRETS, secret_name, namespace=env.controller_namespace)
        assert set(live["data"]) == {"k"}, "no credential was written into somebody else's Secret"
        assert not await exists(env.kube, resources.PODS, name, env.controller_namespace)


# -- the listenerTemplate policy ------------------------------------------------------------------------------


async def test_a_listener_template_mounting_another_scale_sets_config_secret_gets_no_pod_and_a_condition_naming_it(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        await env.create_ars("team-b")
        team_b = await running_listener(env, "team-b")
        stolen = listener_config_secret_name(team_b["metadata"]["name"])
        assert await exists(env.kube, resources.SECRETS, stolen, env.controller_namespace)

        template = {
            "spec": {
                "containers": [{"name": "listener", "volumeMounts": [{"name": "loot", "mountPath": "/loot"}]}],
                "volumes": [{"name": "loot", "secret": {"secretName": stolen}}],
            }
        }
        await env.create_ars("team-a", listenerTemplate=template)
        name = listener_name(env, "team-a")
        refused = await eventually(
            lambda: degraded(env.kube, env.controller_namespace, name, "InvalidListenerTemplate"), "the refusal"
        )
        assert "listenerTemplate.spec.volumes[0].secret.secretName" in refused["message"]
        assert stolen in refused["message"]
        ready = await condition(env.kube, env.controller_namespace, name, "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "InvalidListenerTemplate")
        assert not await exists(env.kube, resources.PODS, name, env.controller_namespace)
        await env.wait_for_event("InvalidListenerTemplate", regarding="team-a")


async def test_a_scale_set_labelling_its_own_config_secret_shareable_does_not_share_it(
    start_env: EnvFactory,
) -> None:
    # listenerConfigSecretMetadata is the tenant's to choose: its config Secret may carry the shareable label,
    # but a Secret a listener controls is never shareable, so another team's template still cannot mount it.
    async with start_env() as env:
        await env.create_ars("team-b", listenerConfigSecretMetadata={"labels": {SHAREABLE_LABEL: "true"}})
        team_b = await running_listener(env, "team-b")
        offered = listener_config_secret_name(team_b["metadata"]["name"])
        live = await env.kube.get(resources.SECRETS, offered, namespace=env.controller_namespace)
        assert live["metadata"]["labels"][SHAREABLE_LABEL] == "true"

        template = {
            "spec": {
                "containers": [{"name": "listener", "volumeMounts": [{"name": "loot", "mountPath": "/loot"}]}],
                "volumes": [{"name": "loot", "secret": {"secretName": offered}}],
            }
        }
        await env.create_ars("team-a", listenerTemplate=template)
        name = listener_name(env, "team-a")
        refused = await eventually(
            lambda: degraded(env.kube, env.controller_namespace, name, "InvalidListenerTemplate"), "the refusal"
        )
        assert offered in refused["message"]
        assert not await exists(env.kube, resources.PODS, name, env.controller_namespace)


async def test_a_secret_the_admin_labelled_shareable_may_be_mounted_by_any_listener(start_env: EnvFactory) -> None:
    async with start_env() as env:
        shared = {"metadata": {"name": "corporate-proxy", "labels": {SHAREABLE_LABEL: "true"}},
                  "stringData": {"url": "http://proxy:3128"}}  # fmt: skip
        await env.kube.create(resources.SECRETS, shared, namespace=env.controller_namespace)
        template = {
            "spec": {
                "containers": [
                    {
                        "name": "listener",
                        "env": [
                            {"name": "P", "valueFrom": {"secretKeyRef": {"name": "corporate-proxy", "key": "url"}}}
                        ],
                    }
                ]
            }
        }
        await env.create_ars(listenerTemplate=template)
        listener = await running_listener(env)
        pod = await env.listener_pod(listener["metadata"]["name"])
        assert pod is not None
        env_names = [e["name"] for e in pod["spec"]["containers"][0]["env"]]
        assert "P" in env_names
