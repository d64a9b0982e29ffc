"""What the manager's caches keep of an object (arc_scaleset.kube.informer.compact), against the real API server."""

from __future__ import annotations

import asyncio

import pytest

from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.manager import Manager
from arc_scaleset.kube.resources import CONFIG_MAPS
from arc_scaleset_lab.harness.waiting import eventually

pytestmark = pytest.mark.cluster


async def test_the_manager_caches_objects_without_managed_fields_and_otherwise_whole(
    kube: KubeClient, namespace: str
) -> None:
    created = await kube.create(
        CONFIG_MAPS,
        {"metadata": {"name": "cached", "labels": {"app": "x"}, "annotations": {"a": "b"}}, "data": {"k": "v"}},
        namespace=namespace,
    )
    assert created["metadata"].get("managedFields")
    manager = Manager(kube, namespaces=[namespace], metrics_address=None)
    cache = manager.cache(CONFIG_MAPS)
    running = asyncio.create_task(manager.run())
    try:
        cached = await eventually(lambda: cache.get(namespace, "cached"), "the ConfigMap in the cache", timeout=30)
        server = await kube.get(CONFIG_MAPS, "cached", namespace=namespace)
        del server["metadata"]["managedFields"]

        assert "managedFields" not in cached["metadata"]
        assert cached == server
    finally:
        manager.request_stop()
        await running
