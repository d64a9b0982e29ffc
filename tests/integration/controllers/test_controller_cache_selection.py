"""The controller caches the Pods, ServiceAccounts, Roles and RoleBindings of its scale sets, not every one in the
cluster (issue 26): an object without the children's label never reaches its cache (cmd/controller_setup.py)."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.cmd.controller_setup import CHILD_LABEL
from arc_scaleset.kube import resources
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
