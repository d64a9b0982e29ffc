"""A controller with owned children and an extra watch, run by a manager against the real API server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Controller, Request, Result
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.manager import Cache, Manager, NamespaceNotCachedError
from arc_scaleset.kube.ownerrefs import controller_ref
from arc_scaleset.kube.resources import CONFIG_MAPS, SECRETS
from arc_scaleset_lab.harness.waiting import eventually

pytestmark = pytest.mark.cluster

PARENT_LABEL = "arc-scaleset.dev/parent"


class SecretParentReconciler:
    """Reconciles Secrets; records each reconcile with the owned ConfigMaps it found in the cache."""

    def __init__(self, secrets: Cache, config_maps: Cache) -> None:
        self.secrets = secrets
        self.config_maps = config_maps
        self.seen: list[tuple[Request, frozenset[str]]] = []
        self.fail_next = 0

    async def __call__(self, request: Request) -> Result:
        if self.fail_next:
            self.fail_next -= 1
            raise RuntimeError(f"injected failure for {request}")
        # Reconcilers read through the cache, never the API, for the objects they watch.
        parent = self.secrets.get(request.namespace, request.name)
        children = self.config_maps.by_owner(parent["metadata"]["uid"]) if parent is not None else []
        self.seen.append((request, frozenset(o["metadata"]["name"] for o in children)))
        return Result()

    def count(self, name: str) -> int:
        return sum(1 for request, _ in self.seen if request.name == name)

    def last_children(self, name: str) -> frozenset[str] | None:
        for request, names in reversed(self.seen):
            if request.name == name:
                return names
        return None


def parent_of_labelled(obj: Object) -> list[Request]:
    """Extra watch: a ConfigMap labelled with a parent's name concerns that parent (no owner reference)."""
    meta = obj["metadata"]
    parent = (meta.get("labels") or {}).get(PARENT_LABEL)
    return [Request(meta["namespace"], parent)] if parent else []


@pytest.fixture
async def running(kube: KubeClient, namespace: str) -> AsyncIterator[tuple[Manager, SecretParentReconciler]]:
    manager = Manager(kube, namespaces={namespace}, metrics_address="127.0.0.1:0", health_address="127.0.0.1:0")
    reconciler = SecretParentReconciler(manager.cache(SECRETS), manager.cache(CONFIG_MAPS))
    manager.add(
        Controller(
            "secret-parents",
            SECRETS,
            reconciler,
            owns=[CONFIG_MAPS],
            watches=[(CONFIG_MAPS, parent_of_labelled)],
        )
    )
    task = asyncio.create_task(manager.run())
    await eventually(lambda: manager.ready or task.done(), "the manager's caches to sync")
    try:
        yield manager, reconciler
    finally:
        manager.request_stop()
        await asyncio.wait_for(task, 30)


def child(name: str, parent: dict[str, Any], **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "ownerReferences": [controller_ref(parent)], "labels": labels},
        "data": {"v": "1"},
    }


async def test_a_change_to_an_owned_child_reconciles_its_controller_owner(
    kube: KubeClient, namespace: str, running: tuple[Manager, SecretParentReconciler]
) -> None:
    _, reconciler = running
    parent = await kube.create(SECRETS, {"metadata": {"name": "p"}, "stringData": {"k": "v"}}, namespace=namespace)
    await eventually(lambda: reconciler.count("p") >= 1, "the reconcile of the new parent")

    before = reconciler.count("p")
    await kube.create(CONFIG_MAPS, child("c1", parent), namespace=namespace)
    await eventually(lambda: reconciler.last_children("p") == frozenset({"c1"}), "a reconcile seeing child c1")
    assert reconciler.count("p") > before

    before = reconciler.count("p")
    await kube.patch(CONFIG_MAPS, "c1", {"data": {"v": "2"}}, namespace=namespace)
    await eventually(lambda: reconciler.count("p") > before, "a reconcile after the child changed")

    await kube.delete(CONFIG_MAPS, "c1", namespace=namespace)
    await eventually(lambda: reconciler.last_children("p") == frozenset(), "a reconcile after the child was deleted")


async def test_children_of_other_kinds_and_unrelated_objects_trigger_nothing(
    kube: KubeClient, namespace: str, running: tuple[Manager, SecretParentReconciler]
) -> None:
    _, reconciler = running
    other_parent = await kube.create(CONFIG_MAPS, {"metadata": {"name": "cm-parent"}}, namespace=namespace)
    await kube.create(CONFIG_MAPS, child("owned-by-a-configmap", other_parent), namespace=namespace)
    await kube.create(CONFIG_MAPS, {"metadata": {"name": "loner"}}, namespace=namespace)
    # A later, related event: once its reconcile is seen, every earlier event has been handled (FIFO queue,
    # one worker), so anything wrongly mapped would have been reconciled by now.
    await kube.create(SECRETS, {"metadata": {"name": "marker"}}, namespace=namespace)
    await eventually(lambda: reconciler.count("marker") >= 1, "the marker's reconcile")
    assert {request.name for request, _ in reconciler.seen} == {"marker"}


async def test_an_extra_watch_maps_objects_to_requests(
    kube: KubeClient, namespace: str, running: tuple[Manager, SecretParentReconciler]
) -> None:
    _, reconciler = running
    await kube.create(SECRETS, {"metadata": {"name": "p2"}}, namespace=namespace)
    await eventually(lambda: reconciler.count("p2") >= 1, "the reconcile of p2")
    before = reconciler.count("p2")
    await kube.create(
        CONFIG_MAPS, {"metadata": {"name": "pointer", "labels": {PARENT_LABEL: "p2"}}}, namespace=namespace
    )
    await eventually(lambda: reconciler.count("p2") > before, "a reconcile of p2 caused by the labelled ConfigMap")


async def test_a_failing_reconcile_is_retried_and_the_manager_keeps_running(
    kube: KubeClient, namespace: str, running: tuple[Manager, SecretParentReconciler]
) -> None:
    manager, reconciler = running
    reconciler.fail_next = 2
    await kube.create(SECRETS, {"metadata": {"name": "flaky"}}, namespace=namespace)
    await eventually(lambda: reconciler.count("flaky") >= 1, "the reconcile that finally succeeds")
    assert reconciler.fail_next == 0
    assert manager.controllers[0].running


async def test_the_manager_serves_metrics_and_probes(
    kube: KubeClient, namespace: str, running: tuple[Manager, SecretParentReconciler]
) -> None:
    manager, reconciler = running
    await kube.create(SECRETS, {"metadata": {"name": "p3"}}, namespace=namespace)
    await eventually(lambda: reconciler.count("p3") >= 1, "the reconcile of p3")
    metrics_host, metrics_port = manager.bound["metrics"]
    health_host, health_port = manager.bound["health"]
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        async with http.get(f"http://{metrics_host}:{metrics_port}/metrics") as response:
            assert response.status == 200
            text = await response.text()
        async with http.get(f"http://{health_host}:{health_port}/healthz") as response:
            assert response.status == 200
        async with http.get(f"http://{health_host}:{health_port}/readyz") as response:
            assert response.status == 200
    assert 'controller_runtime_reconcile_total{controller="secret-parents",result="success"}' in text
    assert 'workqueue_adds_total{controller="secret-parents",name="secret-parents"}' in text


async def test_reading_a_namespace_the_manager_does_not_watch_is_an_error(
    running: tuple[Manager, SecretParentReconciler],
) -> None:
    manager, _ = running
    with pytest.raises(NamespaceNotCachedError):
        manager.cache(SECRETS).get("some-other-namespace", "x")
