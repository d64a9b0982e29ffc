"""Manager pieces that need no API server: addresses, cache routing across namespaces, probes, stopping.

The client points at a closed loopback port: informers fail to list (for real) and never sync.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import aiohttp
import pytest

from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Controller, Request, Result
from arc_scaleset.kube.credentials import ConnectionConfig
from arc_scaleset.kube.manager import Manager, NamespaceNotCachedError, _parse_address
from arc_scaleset.kube.resources import CONFIG_MAPS, NAMESPACES
from arc_scaleset_lab.harness.waiting import eventually


def unreachable_client() -> KubeClient:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return KubeClient(ConnectionConfig(server=f"http://127.0.0.1:{port}"), retries=0)


def cm(namespace: str, name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "resourceVersion": "1", "labels": labels}}


@pytest.mark.parametrize(
    ("address", "parsed"),
    [
        (":8080", (None, 8080)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("[::1]:9090", ("::1", 9090)),
        ("0", None),
        ("", None),
        (None, None),
    ],
)
def test_addresses_follow_the_go_convention_and_zero_or_empty_disable(
    address: str | None, parsed: tuple[str | None, int] | None
) -> None:
    assert _parse_address(address) == parsed


def test_a_malformed_address_is_refused() -> None:
    with pytest.raises(ValueError, match="host:port"):
        _parse_address("localhost")


def test_a_namespace_restricted_cache_routes_reads_and_refuses_other_namespaces() -> None:
    manager = Manager(unreachable_client(), namespaces={"a", "b"}, metrics_address=None)
    cache = manager.cache(CONFIG_MAPS)
    informers = {informer.namespace: informer for informer in manager._informer_list(CONFIG_MAPS)}
    assert set(informers) == {"a", "b"}, "one informer per watched namespace"
    informers["a"].store.upsert(cm("a", "x", app="web"))
    informers["b"].store.upsert(cm("b", "x", app="web"))
    informers["b"].store.upsert(cm("b", "y"))

    x_in_b = cache.get("b", "x")
    assert x_in_b is not None
    assert x_in_b["metadata"]["namespace"] == "b"
    assert sorted(o["metadata"]["name"] for o in cache.list("b")) == ["x", "y"]
    assert len(cache.list()) == len(cache) == 3
    assert len(cache.by_label("app", "web")) == 2
    with pytest.raises(NamespaceNotCachedError):
        cache.get("c", "x")
    with pytest.raises(NamespaceNotCachedError):
        cache.list("c")


def test_cluster_scoped_resources_get_one_informer_even_with_namespaces() -> None:
    manager = Manager(unreachable_client(), namespaces={"a", "b"}, metrics_address=None)
    manager.cache(NAMESPACES)
    assert [informer.namespace for informer in manager._informer_list(NAMESPACES)] == [None]
    assert manager.cache(NAMESPACES).get(None, "anything") is None


def test_a_custom_index_applies_to_every_namespace() -> None:
    manager = Manager(unreachable_client(), namespaces={"a", "b"}, metrics_address=None)
    manager.add_index(CONFIG_MAPS, "first-letter", lambda o: [o["metadata"]["name"][0]])
    for informer in manager._informer_list(CONFIG_MAPS):
        informer.store.upsert(cm(informer.namespace or "", "xylophone"))
    assert len(manager.cache(CONFIG_MAPS).by_index("first-letter", "x")) == 2


async def test_probes_report_not_ready_until_caches_sync_and_stop_ends_run() -> None:
    client = unreachable_client()
    manager = Manager(client, metrics_address="127.0.0.1:0", health_address="127.0.0.1:0")
    manager.cache(CONFIG_MAPS)
    task = asyncio.create_task(manager.run())
    try:
        await eventually(lambda: {"health", "metrics"} <= manager.bound.keys(), "both servers bound", timeout=5)
        host, port = manager.bound["health"]
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            async with http.get(f"http://{host}:{port}/healthz") as response:
                assert response.status == 200
            async with http.get(f"http://{host}:{port}/readyz") as response:
                assert response.status == 500  # controller-runtime's answer for a failing check
                assert "caches not synced" in await response.text()
            host, port = manager.bound["metrics"]
            async with http.get(f"http://{host}:{port}/metrics") as response:
                assert response.status == 200
        assert not task.done()
    finally:
        manager.request_stop()
        await asyncio.wait_for(task, 10)
        await client.close()


async def test_a_manager_refuses_two_controllers_of_one_name_and_a_second_run() -> None:
    async def reconcile(request: Request) -> Result:
        return Result()

    manager = Manager(unreachable_client(), metrics_address=None)
    manager.add(Controller("same", CONFIG_MAPS, reconcile))
    with pytest.raises(ValueError, match="already registered"):
        manager.add(Controller("same", CONFIG_MAPS, reconcile))
    manager.request_stop()
    await asyncio.wait_for(manager.run(), 10)
    with pytest.raises(RuntimeError, match="runs once"):
        await manager.run()
    await manager.client.close()
