"""Optimistic-concurrency helpers against the real API server: conflicts happen and are won."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import Conflict, Invalid
from arc_scaleset.kube.finalizers import add_finalizer, has_finalizer, patch_out_finalizers, remove_finalizer
from arc_scaleset.kube.retry import update_with_retry

pytestmark = pytest.mark.cluster

CM = resources.CONFIG_MAPS


@pytest.mark.parametrize("method", ["patch", "replace"])
async def test_update_with_retry_wins_against_a_concurrent_writer(
    kube: KubeClient, namespace: str, method: str
) -> None:
    await kube.create(CM, {"metadata": {"name": "shared"}, "data": {"count": "0"}}, namespace=namespace)
    seen_counts: list[str] = []

    async def concurrent_write() -> None:
        await kube.patch(CM, "shared", {"data": {"other": "written-concurrently"}}, namespace=namespace)

    pending_interference = [concurrent_write]

    def increment(obj: dict[str, Any]) -> dict[str, Any]:
        seen_counts.append(obj["data"]["count"])
        obj["data"]["count"] = str(int(obj["data"]["count"]) + 1)
        return obj

    async def racing_get(*args: Any, **kwargs: Any) -> dict[str, Any]:
        current = await original_get(*args, **kwargs)
        if pending_interference:
            # Someone else writes between our read and our write: the first attempt must conflict.
            await pending_interference.pop()()
        return current

    original_get = kube.get
    kube.get = racing_get  # type: ignore[method-assign]
    try:
        result = await update_with_retry(kube, CM, "shared", namespace=namespace, mutate=increment, method=method)  # type: ignore[arg-type]
    finally:
        del kube.get  # back to the class attribute

    assert seen_counts == ["0", "0"]  # a conflict, then a fresh read and a successful write
    assert result is not None
    stored = await kube.get(CM, "shared", namespace=namespace)
    assert stored["data"] == {"count": "1", "other": "written-concurrently"}


async def test_update_with_retry_gives_up_with_conflict_after_four_attempts(kube: KubeClient, namespace: str) -> None:
    await kube.create(CM, {"metadata": {"name": "contended"}, "data": {"n": "0"}}, namespace=namespace)
    attempts = 0
    original_get = kube.get

    async def always_interfered(*args: Any, **kwargs: Any) -> dict[str, Any]:
        nonlocal attempts
        attempts += 1
        current = await original_get(*args, **kwargs)
        await kube.patch(CM, "contended", {"data": {"noise": str(attempts)}}, namespace=namespace)
        return current

    def bump(obj: dict[str, Any]) -> dict[str, Any]:
        obj["data"]["n"] = "1"
        return obj

    kube.get = always_interfered  # type: ignore[method-assign]
    try:
        with pytest.raises(Conflict):
            await update_with_retry(kube, CM, "contended", namespace=namespace, mutate=bump)
    finally:
        del kube.get
    assert attempts == 4
    assert (await kube.get(CM, "contended", namespace=namespace))["data"]["n"] == "0"


async def test_update_with_retry_writes_nothing_when_mutate_returns_none(kube: KubeClient, namespace: str) -> None:
    created = await kube.create(CM, {"metadata": {"name": "noop"}, "data": {"a": "1"}}, namespace=namespace)
    before = kube.request_counts[("patch", "configmaps")]
    assert await update_with_retry(kube, CM, "noop", namespace=namespace, mutate=lambda obj: None) is None
    assert kube.request_counts[("patch", "configmaps")] == before
    stored = await kube.get(CM, "noop", namespace=namespace)
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_finalizers_are_added_and_removed_without_losing_a_concurrent_one(
    kube: KubeClient, namespace: str
) -> None:
    cached = await kube.create(CM, {"metadata": {"name": "fin"}}, namespace=namespace)
    # Another controller adds its finalizer after our (cached) read.
    await kube.patch(CM, "fin", {"metadata": {"finalizers": ["other.example.com/f"]}}, namespace=namespace)

    added = await add_finalizer(kube, CM, cached, "arc-scaleset.dev/test")
    assert added["metadata"]["finalizers"] == ["other.example.com/f", "arc-scaleset.dev/test"]
    assert (await add_finalizer(kube, CM, added, "arc-scaleset.dev/test")) == added  # idempotent, no write

    removed = await remove_finalizer(kube, CM, added, "arc-scaleset.dev/test")
    assert removed is not None
    assert removed["metadata"]["finalizers"] == ["other.example.com/f"]
    assert not has_finalizer(removed, "arc-scaleset.dev/test")


async def test_a_finalizer_added_to_a_current_copy_costs_one_request(kube: KubeClient, namespace: str) -> None:
    current = await kube.create(CM, {"metadata": {"name": "fin-current"}}, namespace=namespace)
    before = collections.Counter(kube.request_counts)
    added = await add_finalizer(kube, CM, current, "arc-scaleset.dev/test")
    spent = collections.Counter(kube.request_counts)
    spent.subtract(before)
    assert +spent == {("patch", "configmaps"): 1}, "the write is made against the copy: no read"
    assert added["metadata"]["finalizers"] == ["arc-scaleset.dev/test"]


async def test_removing_the_last_finalizer_lets_a_deleting_object_go(kube: KubeClient, namespace: str) -> None:
    await kube.create(CM, {"metadata": {"name": "going", "finalizers": ["arc-scaleset.dev/test"]}}, namespace=namespace)
    deleting = await kube.delete(CM, "going", namespace=namespace)
    assert deleting is not None
    assert deleting["metadata"]["deletionTimestamp"]
    await remove_finalizer(kube, CM, deleting, "arc-scaleset.dev/test")
    assert await remove_finalizer(kube, CM, deleting, "arc-scaleset.dev/test") is None  # gone: NotFound is done


async def test_patching_out_a_finalizer_from_a_stale_read_never_drops_a_concurrent_one(
    kube: KubeClient, namespace: str
) -> None:
    stale = await kube.create(
        CM, {"metadata": {"name": "patched", "finalizers": ["arc-scaleset.dev/test"]}}, namespace=namespace
    )
    both = {"metadata": {"finalizers": ["arc-scaleset.dev/test", "other.example.com/f"]}}
    await kube.patch(CM, "patched", both, namespace=namespace)
    with pytest.raises(Invalid):  # the list it read is not the list stored: refused, not overwritten
        await patch_out_finalizers(kube, CM, stale, {"arc-scaleset.dev/test"})
    fresh = await kube.get(CM, "patched", namespace=namespace)
    await patch_out_finalizers(kube, CM, fresh, {"arc-scaleset.dev/test"})
    assert (await kube.get(CM, "patched", namespace=namespace))["metadata"]["finalizers"] == ["other.example.com/f"]
    deleting = await kube.delete(CM, "patched", namespace=namespace)
    assert deleting is not None
    await patch_out_finalizers(kube, CM, deleting, {"other.example.com/f"})
    await patch_out_finalizers(kube, CM, deleting, {"other.example.com/f"})  # gone: NotFound is done
