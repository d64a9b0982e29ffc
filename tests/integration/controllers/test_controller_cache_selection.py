"""The controller caches the Pods, ServiceAccounts, Roles and RoleBindings of its scale sets, not every one in the
cluster (issue 26): an object without the children's label never reaches its cache (cmd/controller_setup.py)."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.naming import listener_pod_name
from arc_scaleset.cmd.controller_setup import CHILD_LABEL
from arc_scaleset.kube import resources
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.resources import Resource
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

POD_SPEC = {"containers": [{"name": "main", "image": "registry.example/app:1"}]}
RULES = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
ROLE_REF = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "some-role"}


def body(resource: Resource, name: str, labels: dict[str, str]) -> dict[str, Any]:
    extra: dict[str, Any] = {
        resources.PODS: {"spec": POD_SPEC},
        resources.ROLES: {"rules": RULES},
        resources.ROLE_BINDINGS: {"roleRef": ROLE_REF, "subjects": []},
    }.get(resource, {})
    return {"metadata": {"name": name, "labels": labels}, **extra}


@pytest.mark.parametrize(
    "resource",
    [resources.PODS, resources.SERVICE_ACCOUNTS, resources.ROLES, resources.ROLE_BINDINGS],
    ids=lambda r: r.kind,
)
async def test_an_object_without_the_childrens_label_is_not_in_the_controllers_cache(
    start_env: EnvFactory, resource: Resource
) -> None:
    async with start_env() as env:
        cache = env.manager.cache(resource)
        for namespace in (env.namespace, env.controller_namespace):
            await env.kube.create(resource, body(resource, "someone-elses", {"app": "other"}), namespace=namespace)
            # Created after the other one: once the cache shows it, its watch has passed the other one too.
            await env.kube.create(resource, body(resource, "a-child", {CHILD_LABEL: "arc-runners"}),
                                  namespace=namespace)  # fmt: skip
            await eventually(lambda ns=namespace: cache.get(ns, "a-child"), f"the labelled {resource.kind} cached")
            assert cache.get(namespace, "someone-elses") is None


async def test_an_uncached_pod_under_the_listener_pods_name_is_named_in_the_way_and_left_alone(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        ars = env.ars_body()
        ars["metadata"]["namespace"] = env.namespace
        name = env.listener_name(ars)
        # Somebody's pod, without the children's label, already holds the listener pod's name.
        pod_name = listener_pod_name(name)
        theirs = await env.kube.create(resources.PODS, body(resources.PODS, pod_name, {"app": "other"}),
                                       namespace=env.controller_namespace)  # fmt: skip
        await env.create_ars()

        async def in_the_way() -> dict[str, Any] | None:
            listener = await env.listener(name)
            found = get_condition(((listener or {}).get("status") or {}).get("conditions"), "Degraded")
            return found if found and found["reason"] == "ObjectInTheWay" else None

        condition = await eventually(in_the_way, "the pod in the way named on the listener")
        assert f"Pod {env.controller_namespace}/{pod_name}" in condition["message"], condition
        live = await env.kube.get(resources.PODS, pod_name, namespace=env.controller_namespace)
        assert live["metadata"]["uid"] == theirs["metadata"]["uid"]
        assert live["metadata"].get("labels") == {"app": "other"}
