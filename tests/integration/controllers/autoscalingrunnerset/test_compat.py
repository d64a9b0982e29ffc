"""What ARC's users rely on, on the real control plane with the simulated GitHub: scale sets labelled with
ARC's chart versions run, ARC's credential rule, the runner-group annotation restored at once, runner group
and scale-set name changes reaching GitHub, and a ``kubernetes`` container-mode install released on deletion."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.credentials import BOTH_PROVIDED
from arc_scaleset.api.listener_config import ListenerConfig
from arc_scaleset.kube import resources
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset_lab.harness.helm import Helm
from arc_scaleset_lab.harness.waiting import eventually
from tests.charts.paths import SCALE_SET_CHART
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    PAT,
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

VERSION_LABEL = "app.kubernetes.io/version"
RUNNER_GROUP_ANNOTATION = "actions.github.com/runner-group-name"
SCALE_SET_NAME_ANNOTATION = "actions.github.com/runner-scale-set-name"
CLEANUP_PROTECTION = "actions.github.com/cleanup-protection"
APP_KEYS = {
    "github_app_id": "12345",
    "github_app_installation_id": "678",
    "github_app_private_key": "-----BEGIN RSA PRIVATE KEY-----\nnot-used\n-----END RSA PRIVATE KEY-----",
}


async def degraded(env: ControllerHarness, name: str = "arc-runners") -> dict[str, Any] | None:
    obj = await env.ars(name)
    condition = get_condition((obj.get("status") or {}).get("conditions"), "Degraded")
    return condition if condition and condition["status"] == "True" else None


async def annotation(env: ControllerHarness, key: str, name: str = "arc-runners") -> str | None:
    value = ((await env.ars(name))["metadata"].get("annotations") or {}).get(key)
    return str(value) if value is not None else None


# --- versions ---------------------------------------------------------------------------------------------


async def test_a_scale_set_labelled_with_arcs_chart_version_gets_its_runner_set_and_listener(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        await env.create_ars(labels={VERSION_LABEL: "0.13.1"})
        ars = await eventually(env.running, "the scale set labelled 0.13.1 to be Running")
        assert await env.ers() is not None
        assert await env.listener(env.listener_name(ars)) is not None
        assert "UnsupportedVersion" not in await env.event_reasons(regarding="arc-runners")


async def test_a_version_outside_the_range_is_reported_until_the_controller_accepts_any_version(
    start_env: EnvFactory,
) -> None:
    async with start_env(cleanup=False) as env:
        await env.create_ars(labels={VERSION_LABEL: "0.8.3"})
        condition = await eventually(lambda: degraded(env), "a Degraded condition")
        assert condition["reason"] == "UnsupportedVersion"
        assert "0.9.0 through 0.14.x" in condition["message"]
        assert "--accept-any-version-label" in condition["message"]
        assert await env.ers() is None
        assert await env.ars() is not None, "reported, never deleted"

    # The same controller started with --accept-any-version-label (a restart with the flag).
    async with start_env(secret=False, accept_any_version_label=True) as env:
        await eventually(env.running, "the scale set to run once any version is accepted")
        assert await env.ers() is not None


# --- credentials ------------------------------------------------------------------------------------------


async def test_a_token_beside_a_complete_app_is_refused_with_arcs_message(start_env: EnvFactory) -> None:
    async with start_env(secret=False) as env:
        await env.create_secret(data={"github_token": PAT, **APP_KEYS})
        await env.create_ars()
        condition = await eventually(lambda: degraded(env), "a Degraded condition")
        assert condition["reason"] == "InvalidSecret"
        assert BOTH_PROVIDED in condition["message"]
        assert PAT not in condition["message"]
        assert not env.sim.state.scale_sets, "nothing is registered with ambiguous credentials"


async def test_a_token_beside_part_of_an_app_runs_with_the_token_alone_in_the_listener_config(
    start_env: EnvFactory,
) -> None:
    async with start_env(secret=False) as env:
        await env.create_secret(data={"github_token": PAT, "github_app_id": APP_KEYS["github_app_id"]})
        await env.create_ars()
        ars = await eventually(env.running, "the scale set to run with the token")
        name = env.listener_name(ars)
        secret = await eventually(
            lambda: env.get(resources.SECRETS, f"{name}-config", env.controller_namespace), "the listener config"
        )
        config = ListenerConfig.from_json(base64.b64decode(secret["data"]["config.json"]))
        assert config.github_token == PAT
        assert (config.github_app_id, config.github_app_installation_id) == ("", 0), "ARC's tidy: the token only"


# --- the scale set on GitHub ------------------------------------------------------------------------------


async def test_a_deleted_runner_group_annotation_is_restored_within_seconds(start_env: EnvFactory) -> None:
    # The periodic check runs every 5 minutes (the default kept here): the restore must not wait for it.
    async with start_env() as env:
        await env.create_ars()
        await eventually(env.running, "the scale set to be Running")
        assert await annotation(env, RUNNER_GROUP_ANNOTATION) == "Default"

        await env.kube.patch(AUTOSCALING_RUNNER_SETS, "arc-runners",
                             {"metadata": {"annotations": {RUNNER_GROUP_ANNOTATION: None}}},
                             namespace=env.namespace)  # fmt: skip
        assert await eventually(lambda: annotation(env, RUNNER_GROUP_ANNOTATION), "the annotation back") == "Default"

        await env.kube.patch(AUTOSCALING_RUNNER_SETS, "arc-runners",
                             {"metadata": {"annotations": {SCALE_SET_NAME_ANNOTATION: None}}},
                             namespace=env.namespace)  # fmt: skip
        restored = await eventually(lambda: annotation(env, SCALE_SET_NAME_ANNOTATION), "the name annotation back")
        assert restored == "arc-runners"
        assert len(env.sim.state.scale_sets) == 1, "restored from the registered scale set, not a new one"


async def test_changing_the_runner_group_moves_the_scale_set_on_github(start_env: EnvFactory) -> None:
    async with start_env() as env:
        env.sim.state.add_runner_group("ci-runners")
        await env.create_ars()
        await eventually(env.running, "the scale set to be Running")
        (scale_set,) = env.sim.state.scale_sets.values()
        assert scale_set.runner_group_name == "Default"

        await env.kube.patch(AUTOSCALING_RUNNER_SETS, "arc-runners", {"spec": {"runnerGroup": "ci-runners"}},
                             namespace=env.namespace)  # fmt: skip

        async def moved() -> bool:
            return scale_set.runner_group_name == "ci-runners" and (
                await annotation(env, RUNNER_GROUP_ANNOTATION) == "ci-runners"
            )

        await eventually(moved, "the scale set in runner group ci-runners")
        ars = await eventually(env.running, "the scale set to be Running again")
        assert list(env.sim.state.scale_sets) == [scale_set.id], "the same scale set, moved"
        listeners = await env.listeners()
        assert [listener["metadata"]["name"] for listener in listeners] == [env.listener_name(ars)]


async def test_changing_the_scale_set_name_renames_it_on_github(start_env: EnvFactory) -> None:
    async with start_env() as env:
        await env.create_ars(runnerScaleSetName="linux-small")
        await eventually(env.running, "the scale set to be Running")
        (scale_set,) = env.sim.state.scale_sets.values()
        assert scale_set.name == "linux-small"

        await env.kube.patch(AUTOSCALING_RUNNER_SETS, "arc-runners", {"spec": {"runnerScaleSetName": "linux-large"}},
                             namespace=env.namespace)  # fmt: skip

        async def renamed() -> bool:
            return scale_set.name == "linux-large" and (
                await annotation(env, SCALE_SET_NAME_ANNOTATION) == "linux-large"
            )

        await eventually(renamed, "the scale set renamed linux-large on GitHub")
        assert list(env.sim.state.scale_sets) == [scale_set.id], "the same scale set, renamed"
        assert [label["name"] for label in scale_set.labels] == ["linux-large"], "runs-on: the new name"


# --- deletion in kubernetes container mode ----------------------------------------------------------------


async def test_deleting_a_kubernetes_mode_scale_set_releases_its_role_binding_and_service_account(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        # What ARC's chart (and this project's, with ARC's values) installs for containerMode kubernetes.
        helm = Helm()
        try:
            values = {
                "githubConfigUrl": env.config_url,
                "githubConfigSecret": "gh-secret",
                "controllerServiceAccount": {"namespace": env.controller_namespace, "name": "arc-gha-rs-controller"},
                "containerMode": {
                    "type": "kubernetes",
                    "kubernetesModeWorkVolumeClaim": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                },
            }
            objects = await helm.template(SCALE_SET_CHART, "kube-set", env.namespace, values)
        finally:
            helm.close()
        by_kind = {
            "ServiceAccount": resources.SERVICE_ACCOUNTS,
            "Role": resources.ROLES,
            "RoleBinding": resources.ROLE_BINDINGS,
            "AutoscalingRunnerSet": AUTOSCALING_RUNNER_SETS,
        }
        protected: list[tuple[resources.Resource, str]] = []
        for obj in objects:
            resource = by_kind[obj["kind"]]
            await env.kube.create(resource, obj, namespace=env.namespace)
            if CLEANUP_PROTECTION in (obj["metadata"].get("finalizers") or []):
                protected.append((resource, obj["metadata"]["name"]))
        kube_mode = {(r.kind, name) for r, name in protected if name.endswith("-kube-mode")}
        assert kube_mode == {
            ("ServiceAccount", "kube-set-gha-rs-kube-mode"),
            ("Role", "kube-set-gha-rs-kube-mode"),
            ("RoleBinding", "kube-set-gha-rs-kube-mode"),
        }
        await eventually(lambda: env.running("kube-set"), "the kubernetes-mode scale set to be Running")

        await env.kube.delete(AUTOSCALING_RUNNER_SETS, "kube-set", namespace=env.namespace)

        async def ars_gone() -> bool:
            return await env.get(AUTOSCALING_RUNNER_SETS, "kube-set") is None

        await eventually(ars_gone, "the scale set to be deleted")
        assert not env.sim.state.scale_sets
        for resource, name in protected:
            released = await env.get(resource, name)
            # Deleting them is helm's job (uninstall); the controller releases them.
            assert released is not None, f"{resource.kind} {name} deleted"
            finalizers = released["metadata"].get("finalizers") or []
            assert CLEANUP_PROTECTION not in finalizers, f"{resource.kind} {name}"
