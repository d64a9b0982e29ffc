"""The controller chart runs hardened by default: restricted security contexts (overridable key by key, as ARC's
chart allows), and the one value that lets listener templates reach the host."""

from __future__ import annotations

from typing import Any

from arc_scaleset_lab.harness.helm import Helm
from tests.charts.test_controller_chart import controller_settings, manager, only, render

RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
}


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = only(objects, "Deployment")["spec"]["template"]["spec"]
    return spec


async def test_the_controller_runs_restricted_by_default_with_a_writable_tmp_only(helm: Helm) -> None:
    spec = pod_spec(await render(helm))
    assert spec["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    container = manager(only(await render(helm), "Deployment"))
    assert container["securityContext"] == RESTRICTED_CONTAINER
    assert [m["mountPath"] for m in container["volumeMounts"]] == ["/tmp"]


async def test_security_context_values_override_the_defaults_key_by_key(helm: Helm) -> None:
    values = {
        "podSecurityContext": {"fsGroup": 2000, "seccompProfile": None},
        "securityContext": {"runAsUser": 1000, "readOnlyRootFilesystem": False},
    }
    objects = await render(helm, values)
    assert pod_spec(objects)["securityContext"] == {"runAsNonRoot": True, "fsGroup": 2000}
    assert manager(only(objects, "Deployment"))["securityContext"] == {
        **RESTRICTED_CONTAINER,
        "runAsUser": 1000,
        "readOnlyRootFilesystem": False,
    }


async def test_privileged_listener_templates_are_allowed_only_by_the_value(helm: Helm) -> None:
    _, settings = controller_settings(manager(only(await render(helm), "Deployment")))
    assert settings.allow_privileged_listener_template is False
    values = {"flags": {"allowPrivilegedListenerTemplate": True}}
    _, settings = controller_settings(manager(only(await render(helm, values), "Deployment")))
    assert settings.allow_privileged_listener_template is True


async def test_the_controller_may_read_configmaps_in_its_namespace_to_find_shareable_ones(helm: Helm) -> None:
    objects = await render(helm)
    (role,) = [o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == "arc-gha-rs-controller-listener"]
    assert {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]} in role["rules"]


async def test_the_controller_learns_its_own_selector_labels_so_no_listener_pod_may_carry_them(helm: Helm) -> None:
    deployment = only(await render(helm), "Deployment")
    _, settings = controller_settings(manager(deployment))
    assert dict(settings.controller_selector_labels) == deployment["spec"]["selector"]["matchLabels"]
    assert settings.allowed_listener_metadata_keys == ()


async def test_listener_scheduling_resource_bound_and_metadata_keys_are_allowed_only_by_the_values(helm: Helm) -> None:
    _, settings = controller_settings(manager(only(await render(helm), "Deployment")))
    assert settings.allow_listener_template_scheduling is False
    assert set(settings.listener_template_max_resources) == {"cpu", "memory", "ephemeral-storage"}
    values = {
        "flags": {
            "allowListenerTemplateScheduling": True,
            "listenerTemplateMaxResources": "cpu=4,memory=8Gi,nvidia.com/gpu=1",
            "allowListenerMetadataKeys": ["eks.amazonaws.com/role-arn", "iam.gke.io/"],
        }
    }
    _, settings = controller_settings(manager(only(await render(helm, values), "Deployment")))
    assert settings.allow_listener_template_scheduling is True
    assert set(settings.listener_template_max_resources) == {"cpu", "memory", "nvidia.com/gpu"}
    assert settings.allowed_listener_metadata_keys == ("eks.amazonaws.com/role-arn", "iam.gke.io/")
