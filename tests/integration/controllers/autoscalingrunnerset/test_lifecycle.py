"""An AutoscalingRunnerSet from creation to deletion, on the real control plane with the simulated GitHub:
the scale set registered, every child with the spec's names, labels, annotations and owners; then deleted
in order, down to the scale set on GitHub and the cleanup-protection finalizers."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.listener_config import ListenerConfig
from arc_scaleset.kube import resources
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    PAT,
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster


def owner_kinds(obj: dict[str, Any]) -> list[tuple[str, str, bool]]:
    return [(r["kind"], r["name"], r.get("controller", False)) for r in obj["metadata"].get("ownerReferences") or []]


async def test_create_registers_the_scale_set_and_builds_every_child(start_env: EnvFactory) -> None:
    async with start_env() as env:
        await env.create_ars(minRunners=1, maxRunners=5, runnerScaleSetLabels=["linux", "x64"],
                             labels={"app.kubernetes.io/version": "0.1.0", "team": "a"})  # fmt: skip
        ars = await eventually(env.running, "the scale set to be Running")

        # The scale set on GitHub, and what the ARS records of it.
        (scale_set,) = env.sim.state.scale_sets.values()
        assert scale_set.name == "arc-runners"
        assert [label["name"] for label in scale_set.labels] == ["arc-runners", "linux", "x64"]
        meta = ars["metadata"]
        assert "autoscalingrunnerset.actions.github.com/finalizer" in meta["finalizers"]
        assert meta["annotations"]["runner-scale-set-id"] == str(scale_set.id)
        assert meta["annotations"]["actions.github.com/runner-scale-set-name"] == "arc-runners"
        assert meta["annotations"]["actions.github.com/runner-group-name"] == "Default"
        assert meta["labels"]["actions.github.com/organization"] == "org"
        assert ars["spec"]["runnerScaleSetName"] == "arc-runners"

        # The EphemeralRunnerSet: the ARS's name, owned by it, revision 0.
        ers = await env.ers()
        assert ers is not None
        assert owner_kinds(ers) == [("AutoscalingRunnerSet", "arc-runners", True)]
        assert ers["spec"]["actionableRevision"] == 0
        assert ers["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] == scale_set.id
        assert ers["metadata"]["labels"]["app.kubernetes.io/component"] == "runner-set"
        assert ers["metadata"]["labels"]["team"] == "a"

        # The AutoscalingListener in the controller namespace, and its children.
        name = env.listener_name(ars)
        listener = await env.listener(name)
        assert listener is not None
        assert (listener["spec"]["minRunners"], listener["spec"]["maxRunners"]) == (1, 5)
        assert listener["spec"]["runnerScaleSetId"] == scale_set.id
        assert listener["spec"]["image"] == env.settings.controller_image

        pod = await eventually(lambda: env.listener_pod(name), "the listener pod")
        assert owner_kinds(pod) == [("AutoscalingListener", name, True)]
        assert pod["spec"]["serviceAccountName"] == name
        assert pod["spec"]["containers"][0]["command"] == ["arc-scaleset", "listener"]
        sa = await env.get(resources.SERVICE_ACCOUNTS, name, env.controller_namespace)
        assert sa is not None
        assert owner_kinds(sa) == [("AutoscalingListener", name, True)]
        role = await env.get(resources.ROLES, name)
        assert role is not None
        assert role["rules"][0]["resourceNames"] == ["arc-runners"]
        assert role["metadata"]["labels"]["auto-scaling-listener-name"] == name
        binding = await env.get(resources.ROLE_BINDINGS, name)
        assert binding is not None
        assert binding["subjects"][0]["namespace"] == env.controller_namespace

        config_secret = await env.get(resources.SECRETS, f"{name}-config", env.controller_namespace)
        assert config_secret is not None
        config = ListenerConfig.from_json(base64.b64decode(config_secret["data"]["config.json"]))
        assert config.github_token == PAT
        assert config.runner_scale_set_id == scale_set.id
        annotations = pod["metadata"]["annotations"]
        assert (
            annotations["actions.github.com/listener-config-resource-version"]
            == (config_secret["metadata"]["resourceVersion"])
        )

        reasons = await env.event_reasons(regarding="arc-runners")
        assert {"ScaleSetRegistered", "EphemeralRunnerSetCreated", "ListenerCreated"} <= reasons


async def test_delete_removes_everything_in_order_and_the_scale_set_on_github(start_env: EnvFactory) -> None:
    async with start_env(secret=False) as env:
        # A Helm-style install: the GitHub secret is cleanup-protected and named in the ARS annotations.
        await env.kube.create(
            resources.SECRETS,
            {"metadata": {"name": "gh-secret", "finalizers": ["actions.github.com/cleanup-protection"]},
             "stringData": {"github_token": PAT}},
            namespace=env.namespace,
        )  # fmt: skip
        body = env.ars_body()
        body["metadata"]["annotations"] = {"actions.github.com/cleanup-github-secret-name": "gh-secret"}
        await env.kube.create(AUTOSCALING_RUNNER_SETS, body, namespace=env.namespace)
        ars = await eventually(env.running, "the scale set to be Running")
        name = env.listener_name(ars)
        await eventually(lambda: env.listener_pod(name), "the listener pod")
        assert len(env.sim.state.scale_sets) == 1

        await env.kube.delete(AUTOSCALING_RUNNER_SETS, "arc-runners", namespace=env.namespace)

        async def ars_gone() -> bool:
            return await env.get(AUTOSCALING_RUNNER_SETS, "arc-runners") is None

        await eventually(ars_gone, "the AutoscalingRunnerSet to be deleted")
        assert not env.sim.state.scale_sets
        assert await env.ers() is None
        assert await env.listener(name) is None
        for resource, namespace, child in (
            (resources.PODS, env.controller_namespace, name),
            (resources.SERVICE_ACCOUNTS, env.controller_namespace, name),
            (resources.SECRETS, env.controller_namespace, f"{name}-config"),
            (resources.ROLES, env.namespace, name),
            (resources.ROLE_BINDINGS, env.namespace, name),
        ):
            assert await env.get(resource, child, namespace) is None, f"{resource.kind} {child} still exists"
        secret = await env.get(resources.SECRETS, "gh-secret")
        assert secret is not None
        assert not secret["metadata"].get("finalizers")
        assert {"ScaleSetDeleted"} <= await env.event_reasons(regarding="arc-runners")
