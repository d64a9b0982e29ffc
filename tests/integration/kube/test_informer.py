"""The informer against the real API server: ordered events, resumed watches, relists after 410 Gone."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import AlreadyExists, NotFound
from arc_scaleset.kube.informer import Informer, Object
from arc_scaleset.kube.resources import CONFIG_MAPS, CUSTOM_RESOURCE_DEFINITIONS, Resource
from arc_scaleset_lab.harness.waiting import eventually

pytestmark = pytest.mark.cluster

LABEL = "arc-scaleset.dev/informer-test"


class Recorder:
    """Records handler calls as (event, name, resourceVersion) tuples."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def attach(self, informer: Informer) -> None:
        informer.add_handler(
            on_add=lambda o: self._record("add", o),
            on_update=lambda old, new: self._record("update", new),
            on_delete=lambda o: self._record("delete", o),
        )

    def _record(self, kind: str, obj: Object) -> None:
        meta = obj["metadata"]
        self.events.append((kind, meta["name"], meta["resourceVersion"]))

    def of(self, name: str) -> list[str]:
        return [kind for kind, n, _ in self.events if n == name]


def config_map(name: str, value: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {LABEL: "yes"}}, "data": {"v": value}}


@pytest.fixture
async def informer(kube: KubeClient, namespace: str) -> AsyncIterator[Informer]:
    # The label selector keeps out the kube-root-ca.crt ConfigMap that every namespace gets.
    running = Informer(kube, CONFIG_MAPS, namespace=namespace, label_selector=f"{LABEL}=yes")
    yield running
    await running.stop()


async def api_view(kube: KubeClient, namespace: str) -> dict[str, str]:
    listed = await kube.list(CONFIG_MAPS, namespace=namespace, label_selector=f"{LABEL}=yes")
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in listed.items}


def cache_view(informer: Informer) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.store.list()}


async def test_the_informer_reports_create_update_delete_in_order(
    kube: KubeClient, namespace: str, informer: Informer
) -> None:
    recorder = Recorder()
    recorder.attach(informer)
    informer.start()
    await asyncio.wait_for(informer.wait_synced(), 20)
    assert informer.store.list() == []

    created = await kube.create(CONFIG_MAPS, config_map("a"), namespace=namespace)
    updated = await kube.patch(CONFIG_MAPS, "a", {"data": {"v": "2"}}, namespace=namespace)
    await kube.delete(CONFIG_MAPS, "a", namespace=namespace)
    await kube.create(CONFIG_MAPS, config_map("b"), namespace=namespace)
    await eventually(lambda: recorder.of("b") == ["add"], "the add of b")

    assert recorder.events[:3] == [
        ("add", "a", created["metadata"]["resourceVersion"]),
        ("update", "a", updated["metadata"]["resourceVersion"]),
        ("delete", "a", recorder.events[2][2]),
    ]
    assert informer.store.get(namespace, "a") is None
    cached_b = informer.store.get(namespace, "b")
    assert cached_b is not None
    assert cached_b["data"] == {"v": "1"}
    assert cache_view(informer) == await api_view(kube, namespace)


async def test_a_handler_added_late_is_told_about_every_cached_object(
    kube: KubeClient, namespace: str, informer: Informer
) -> None:
    for name in ("a", "b", "c"):
        await kube.create(CONFIG_MAPS, config_map(name), namespace=namespace)
    informer.start()
    await asyncio.wait_for(informer.wait_synced(), 20)
    late = Recorder()
    late.attach(informer)
    assert sorted(name for kind, name, _ in late.events if kind == "add") == ["a", "b", "c"]


async def test_a_resumed_watch_replays_exactly_the_changes_missed_while_stopped(
    kube: KubeClient, namespace: str, informer: Informer
) -> None:
    for name in ("a", "b", "steady"):
        await kube.create(CONFIG_MAPS, config_map(name), namespace=namespace)
    recorder = Recorder()
    recorder.attach(informer)
    informer.start()
    await asyncio.wait_for(informer.wait_synced(), 20)
    await informer.stop()

    await kube.patch(CONFIG_MAPS, "a", {"data": {"v": "2"}}, namespace=namespace)
    await kube.delete(CONFIG_MAPS, "b", namespace=namespace)
    await kube.create(CONFIG_MAPS, config_map("c"), namespace=namespace)
    recorder.events.clear()
    informer.start()
    await eventually(lambda: "add" in recorder.of("c"), "the add of c")

    assert informer.lists == 1, "the watch resumed; no relist was needed"
    assert [(kind, name) for kind, name, _ in recorder.events] == [("update", "a"), ("delete", "b"), ("add", "c")]
    assert cache_view(informer) == await api_view(kube, namespace)


WIDGETS = Resource("informer-test.arc-scaleset.dev", "v1", "widgets", "Widget")


@pytest.fixture(scope="module")
async def widgets(kube: KubeClient) -> Resource:
    """A throwaway custom resource. Its watch cache starts when the CRD is created, so the API server
    answers a watch from resourceVersion 1 with 410 Gone -- a real expired watch, on demand. (Built-in
    kinds such as ConfigMaps are cached from the API server's start and may still serve version 1.)"""
    name = f"{WIDGETS.plural}.{WIDGETS.group}"
    crd = {
        "metadata": {"name": name},
        "spec": {
            "group": WIDGETS.group,
            "scope": "Namespaced",
            "names": {"plural": WIDGETS.plural, "singular": "widget", "kind": WIDGETS.kind},
            "versions": [
                {
                    "name": WIDGETS.version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }
    with contextlib.suppress(AlreadyExists):
        await kube.create(CUSTOM_RESOURCE_DEFINITIONS, crd)

    async def served() -> bool:
        try:
            await kube.list(WIDGETS, namespace="default")
        except NotFound:
            return False
        return True

    await eventually(served, timeout=30, what=f"the {name} CRD to be served")
    return WIDGETS


def widget(name: str, size: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"size": size}}


async def test_after_410_gone_a_relist_reports_what_changed_and_loses_or_duplicates_nothing(
    kube: KubeClient, namespace: str, widgets: Resource
) -> None:
    informer = Informer(kube, widgets, namespace=namespace)
    try:
        for name in ("a", "b", "steady"):
            await kube.create(widgets, widget(name), namespace=namespace)
        recorder = Recorder()
        recorder.attach(informer)
        informer.start()
        await asyncio.wait_for(informer.wait_synced(), 20)
        await informer.stop()

        updated = await kube.patch(widgets, "a", {"spec": {"size": 2}}, namespace=namespace)
        await kube.delete(widgets, "b", namespace=namespace)
        created = await kube.create(widgets, widget("c"), namespace=namespace)
        recorder.events.clear()
        # Resume from a version the server has forgotten: the watch fails with 410 and the informer relists.
        informer.restart_watch(from_resource_version="1")
        informer.start()
        await eventually(lambda: informer.lists == 2 and "add" in recorder.of("c"), "the relist after 410 Gone")

        assert collections.Counter((kind, name) for kind, name, _ in recorder.events) == {
            ("update", "a"): 1,
            ("delete", "b"): 1,
            ("add", "c"): 1,
        }, "each change reported once; the unchanged object not at all"
        versions = {name: rv for kind, name, rv in recorder.events}
        assert versions["a"] == updated["metadata"]["resourceVersion"]
        assert versions["c"] == created["metadata"]["resourceVersion"]
        listed = await kube.list(widgets, namespace=namespace)
        assert cache_view(informer) == {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in listed.items}

        # And the informer keeps watching after the relist.
        await kube.create(widgets, widget("d"), namespace=namespace)
        await eventually(lambda: recorder.of("d") == ["add"], "the add of d after the relist")
    finally:
        await informer.stop()


async def test_the_store_indexes_follow_the_api(kube: KubeClient, namespace: str, informer: Informer) -> None:
    parent = await kube.create(CONFIG_MAPS, config_map("parent"), namespace=namespace)
    owner_ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "parent",
        "uid": parent["metadata"]["uid"],
        "controller": True,
    }
    child = config_map("child")
    child["metadata"]["ownerReferences"] = [owner_ref]
    child["metadata"]["labels"]["tier"] = "x"
    await kube.create(CONFIG_MAPS, child, namespace=namespace)
    informer.start()
    await asyncio.wait_for(informer.wait_synced(), 20)
    assert [o["metadata"]["name"] for o in informer.store.by_owner(parent["metadata"]["uid"])] == ["child"]
    assert [o["metadata"]["name"] for o in informer.store.by_label("tier", "x")] == ["child"]
    assert sorted(o["metadata"]["name"] for o in informer.store.list(namespace)) == ["child", "parent"]

    await kube.patch(CONFIG_MAPS, "child", {"metadata": {"labels": {"tier": "y"}}}, namespace=namespace)
    await eventually(lambda: bool(informer.store.by_label("tier", "y")), "the relabel")
    assert informer.store.by_label("tier", "x") == []
