"""The listener pod policy and the listener metadata policy through the real AutoscalingListener reconciler, on the
real control plane: a template outside the allow list, a workload-identity annotation or the controller's own
selector label gets a condition naming the field, a Warning Event, and no pod (and no ServiceAccount carrying the
key)."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.naming import listener_service_account_name
from arc_scaleset.kube import resources
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.autoscalinglistener.test_tenancy import condition, degraded, exists, listener_name
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

CONTROLLER_SELECTOR = {"app.kubernetes.io/name": "gha-rs-controller", "app.kubernetes.io/instance": "arc"}


async def test_a_listener_template_outside_the_pod_policy_gets_no_pod_and_a_condition_naming_each_field(
    start_env: EnvFactory,
) -> None:
    template: dict[str, Any] = {
        "spec": {
            "nodeName": "control-plane-1",
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
            "priorityClassName": "system-cluster-critical",
            "runtimeClassName": "unsandboxed",
            "containers": [
                {
                    "name": "listener",
                    "securityContext": {"procMount": "Unmasked", "seLinuxOptions": {"type": "spc_t"}},
                    "resources": {"requests": {"memory": "64Gi"}},
                    "volumeMounts": [{"name": "repo", "mountPath": "/repo"}],
                }
            ],
            "volumes": [{"name": "repo", "gitRepo": {"repository": "https://example.com/x.git"}}],
        }
    }
    async with start_env() as env:
        await env.create_ars(listenerTemplate=template)
        name = listener_name(env)
        refused = await eventually(
            lambda: degraded(env.kube, env.controller_namespace, name, "InvalidListenerTemplate"), "the refusal"
        )
        for field in (
            "listenerTemplate.spec.nodeName",
            "listenerTemplate.spec.tolerations",
            "listenerTemplate.spec.priorityClassName",
            "listenerTemplate.spec.runtimeClassName",
            "listenerTemplate.spec.containers[0].securityContext.procMount",
            "listenerTemplate.spec.containers[0].securityContext.seLinuxOptions.type",
            "listenerTemplate.spec.containers[0].resources.requests.memory",
            "listenerTemplate.spec.volumes[0].gitRepo",
        ):
            assert f"{field}:" in refused["message"], field
        ready = await condition(env.kube, env.controller_namespace, name, "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "InvalidListenerTemplate")
        await env.wait_for_event("InvalidListenerTemplate", regarding="arc-runners")
        assert not await exists(env.kube, resources.PODS, name, env.controller_namespace)


async def test_a_workload_identity_annotation_never_reaches_the_listener_service_account(
    start_env: EnvFactory,
) -> None:
    role = "eks.amazonaws.com/role-arn"
    async with start_env() as env:
        await env.create_ars(
            listenerServiceAccountMetadata={"annotations": {role: "arn:aws:iam::1:role/team-a", "team": "b"}}
        )
        name = listener_name(env)
        refused = await eventually(
            lambda: degraded(env.kube, env.controller_namespace, name, "ForbiddenListenerMetadata"), "the refusal"
        )
        assert f'listenerServiceAccountMetadata.annotations["{role}"]' in refused["message"]
        assert f"--allow-listener-metadata-key={role}" in refused["message"]
        await env.wait_for_event("ForbiddenListenerMetadata", regarding="arc-runners")
        account = await env.get(
            resources.SERVICE_ACCOUNTS, listener_service_account_name(name), env.controller_namespace
        )
        assert role not in ((account or {}).get("metadata", {}).get("annotations") or {})
        assert not await exists(env.kube, resources.PODS, name, env.controller_namespace)


async def test_the_controllers_selector_label_on_a_template_never_reaches_the_listener_pod(
    start_env: EnvFactory,
) -> None:
    template = {"metadata": {"labels": {"app.kubernetes.io/name": "gha-rs-controller"}}}
    async with start_env(controller_selector_labels=CONTROLLER_SELECTOR) as env:
        await env.create_ars(listenerTemplate=template)
        # The scale-set chart's own name labels (the scale set's name) are not the controller's: served.
        await env.create_ars(
            "healthy", listenerTemplate={"metadata": {"labels": {"app.kubernetes.io/name": "healthy"}}}
        )
        name = listener_name(env)
        refused = await eventually(
            lambda: degraded(env.kube, env.controller_namespace, name, "ForbiddenListenerMetadata"), "the refusal"
        )
        assert 'listenerTemplate.metadata.labels["app.kubernetes.io/name"]' in refused["message"]
        healthy = listener_name(env, "healthy")
        pod = await eventually(lambda: env.listener_pod(healthy), "the other scale set's listener pod")
        assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == "healthy"
        assert not await exists(env.kube, resources.PODS, name, env.controller_namespace)


async def test_a_listener_template_claiming_a_device_of_the_controller_namespace_gets_no_pod(
    start_env: EnvFactory,
) -> None:
    # Dynamic resource allocation: a pod names a ResourceClaim (or ResourceClaimTemplate) of its own namespace,
    # here the controller namespace, where other teams' listener pods and their claims live, and asks for a
    # device (a GPU) no resource bound sees.
    template: dict[str, Any] = {
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-of-another-team"}],
            "containers": [{"name": "listener", "resources": {"claims": [{"name": "gpu"}]}}],
        }
    }
    async with start_env() as env:
        await env.create_ars(listenerTemplate=template)
        name = listener_name(env)
        refused = await eventually(
            lambda: degraded(env.kube, env.controller_namespace, name, "InvalidListenerTemplate"), "the refusal"
        )
        assert "listenerTemplate.spec.resourceClaims[0]:" in refused["message"]
        await env.wait_for_event("InvalidListenerTemplate", regarding="arc-runners")
        assert not await exists(env.kube, resources.PODS, name, env.controller_namespace)
