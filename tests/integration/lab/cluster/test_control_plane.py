"""The local control plane behaves like a real Kubernetes API: the behaviours the operator relies on."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import Conflict, NotFound
from arc_scaleset.kube.resources import Resource
from arc_scaleset_lab.cluster.stages import EXIT_CODE_ANNOTATION, FINISH_ANNOTATION
from arc_scaleset_lab.harness.cluster import TestCluster, install_crds
from arc_scaleset_lab.harness.waiting import eventually

WIDGETS = Resource("test.arc-scaleset.dev", "v1", "widgets", "Widget")

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.test.arc-scaleset.dev"},
    "spec": {
        "group": "test.arc-scaleset.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                            "status": {"type": "object", "properties": {"seen": {"type": "integer"}}},
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture(scope="module")
async def widget_crd(kube: KubeClient) -> None:
    await install_crds(kube, [WIDGET_CRD])


async def _create_widget(kube: KubeClient, namespace: str, **metadata: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "test.arc-scaleset.dev/v1",
        "kind": "Widget",
        "metadata": {"name": "w", **metadata},
        "spec": {"size": 1},
    }
    return await kube.create(WIDGETS, body, namespace=namespace)


@pytest.mark.usefixtures("widget_crd")
async def test_spec_change_bumps_generation_but_status_and_labels_do_not(kube: KubeClient, namespace: str) -> None:
    created = await _create_widget(kube, namespace)
    assert created["metadata"]["generation"] == 1

    after_status = await kube.patch(WIDGETS, "w", {"status": {"seen": 5}}, namespace=namespace, subresource="status")
    after_label = await kube.patch(WIDGETS, "w", {"metadata": {"labels": {"a": "b"}}}, namespace=namespace)
    assert after_status["status"]["seen"] == 5
    assert after_label["metadata"]["generation"] == 1

    after_spec = await kube.patch(WIDGETS, "w", {"spec": {"size": 2}}, namespace=namespace)
    assert after_spec["metadata"]["generation"] == 2
    # The main resource ignores status; the status subresource ignores spec.
    ignored = await kube.patch(WIDGETS, "w", {"status": {"seen": 9}}, namespace=namespace)
    assert ignored["status"]["seen"] == 5


@pytest.mark.usefixtures("widget_crd")
async def test_write_with_stale_resource_version_is_rejected_with_conflict(kube: KubeClient, namespace: str) -> None:
    stale = await _create_widget(kube, namespace)
    await kube.patch(WIDGETS, "w", {"spec": {"size": 3}}, namespace=namespace)

    replacement = copy.deepcopy(stale)
    replacement["spec"]["size"] = 4
    with pytest.raises(Conflict):
        await kube.replace(WIDGETS, replacement)
    with pytest.raises(Conflict):
        await kube.patch(
            WIDGETS,
            "w",
            {"metadata": {"resourceVersion": stale["metadata"]["resourceVersion"]}, "status": {"seen": 1}},
            namespace=namespace,
            subresource="status",
        )


@pytest.mark.usefixtures("widget_crd")
async def test_delete_of_object_with_finalizer_waits_for_finalizer_removal(kube: KubeClient, namespace: str) -> None:
    await _create_widget(kube, namespace, finalizers=["test.arc-scaleset.dev/hold"])
    await kube.delete(WIDGETS, "w", namespace=namespace)

    held = await kube.get(WIDGETS, "w", namespace=namespace)
    assert held["metadata"]["deletionTimestamp"]

    await kube.patch(WIDGETS, "w", {"metadata": {"finalizers": None}}, namespace=namespace)
    with pytest.raises(NotFound):
        await kube.get(WIDGETS, "w", namespace=namespace)


async def test_garbage_collector_deletes_child_after_owner(kube: KubeClient, namespace: str) -> None:
    owner = await kube.create(resources.CONFIG_MAPS, {"metadata": {"name": "owner"}}, namespace=namespace)
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    await kube.create(
        resources.CONFIG_MAPS, {"metadata": {"name": "child", "ownerReferences": [ref]}}, namespace=namespace
    )

    await kube.delete(resources.CONFIG_MAPS, "owner", namespace=namespace)

    async def child_gone() -> bool:
        try:
            await kube.get(resources.CONFIG_MAPS, "child", namespace=namespace)
        except NotFound:
            return True
        return False

    await eventually(child_gone, timeout=60, what="the garbage collector to delete the child")


def _pod(name: str, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "runner", "image": "runner:latest"}]},
    }


async def _wait_phase(kube: KubeClient, namespace: str, name: str, phase: str) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        pod = await kube.get(resources.PODS, name, namespace=namespace)
        return pod if pod.get("status", {}).get("phase") == phase else None

    result: dict[str, Any] = await eventually(reached, timeout=60, what=f"pod {name} to reach {phase}")
    return result


async def test_pod_is_scheduled_onto_kwok_node_and_runs(kube: KubeClient, namespace: str) -> None:
    await kube.create(resources.PODS, _pod("p"), namespace=namespace)

    running = await _wait_phase(kube, namespace, "p", "Running")

    assert running["spec"]["nodeName"] == "kwok-node-0"
    [container] = running["status"]["containerStatuses"]
    assert "running" in container["state"]


@pytest.mark.parametrize(
    ("outcome", "exit_code", "phase"), [("succeeded", "0", "Succeeded"), ("failed", "7", "Failed")]
)
async def test_running_pod_finishes_with_the_requested_exit_code(
    kube: KubeClient, namespace: str, outcome: str, exit_code: str, phase: str
) -> None:
    await kube.create(resources.PODS, _pod("p"), namespace=namespace)
    await _wait_phase(kube, namespace, "p", "Running")

    await kube.patch(
        resources.PODS,
        "p",
        {"metadata": {"annotations": {FINISH_ANNOTATION: outcome, EXIT_CODE_ANNOTATION: exit_code}}},
        namespace=namespace,
    )

    finished = await _wait_phase(kube, namespace, "p", phase)
    [container] = finished["status"]["containerStatuses"]
    assert container["state"]["terminated"]["exitCode"] == int(exit_code)


async def test_pod_read_back_carries_server_defaults(kube: KubeClient, namespace: str) -> None:
    created = await kube.create(resources.PODS, _pod("p"), namespace=namespace)

    spec = created["spec"]
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["terminationGracePeriodSeconds"] == 30
    [container] = spec["containers"]
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["imagePullPolicy"] == "Always"  # :latest tag
    # The ServiceAccount admission plugin mounts the API token, as on a real cluster.
    assert any(v["name"].startswith("kube-api-access-") for v in spec["volumes"])


def test_cluster_components_all_run(cluster: TestCluster) -> None:
    from arc_scaleset_lab.cluster.processes import pid_alive

    assert set(cluster.pids) >= {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
    assert all(pid_alive(pid) for pid in cluster.pids.values())
