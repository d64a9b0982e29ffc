"""Events are granted where the controller writes them, not cluster-wide (issue 26): in a scale set's namespace by
the scale-set chart's manager Role (Events on the scale set, its runner sets and runners), in the controller
namespace by the controller chart's Role (Events on listeners). Roles are patched only where scale sets live."""

from __future__ import annotations

from typing import Any

from arc_scaleset_lab.harness.helm import Helm
from tests.charts import test_controller_chart as controller_chart
from tests.charts import test_scale_set_chart as scale_set_chart


def grants(rules: list[dict[str, Any]], resource: str, verb: str) -> bool:
    return any(resource in rule["resources"] and verb in rule["verbs"] for rule in rules)


def roles(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o for o in objects if o["kind"] == kind}


async def test_the_controller_chart_grants_events_in_the_controller_namespace_only(helm: Helm) -> None:
    objects = await controller_chart.render(helm)
    (cluster_role,) = roles(objects, "ClusterRole").values()
    assert not grants(cluster_role["rules"], "events", "create")
    assert not grants(cluster_role["rules"], "events", "patch")
    in_namespace = [r for r in roles(objects, "Role").values() if grants(r["rules"], "events", "create")]
    assert [r["metadata"]["namespace"] for r in in_namespace] == [controller_chart.NAMESPACE]
    assert grants(in_namespace[0]["rules"], "events", "patch")


async def test_watching_one_namespace_grants_events_in_neither_managers_role(helm: Helm) -> None:
    objects = await controller_chart.render(helm, {"flags": {"watchSingleNamespace": "runners"}})
    managers = roles(objects, "Role")
    for key in (f"{controller_chart.NAMESPACE}/arc-gha-rs-controller-single-namespace",
                "runners/arc-gha-rs-controller-single-namespace-watch"):  # fmt: skip
        assert not grants(managers[key]["rules"], "events", "create"), key
    # Roles are patched (a scale set's manager Role released after its binding) where scale sets live only.
    assert grants(managers["runners/arc-gha-rs-controller-single-namespace-watch"]["rules"], "roles", "patch")
    assert not grants(managers[f"{controller_chart.NAMESPACE}/arc-gha-rs-controller-single-namespace"]["rules"],
                      "roles", "patch")  # fmt: skip


async def test_the_scale_set_chart_grants_the_controller_events_in_the_scale_sets_namespace(helm: Helm) -> None:
    objects = await scale_set_chart.render(helm)
    role = scale_set_chart.only(objects, "Role")
    assert role["metadata"]["namespace"] == scale_set_chart.NAMESPACE
    assert {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]} in role["rules"]
