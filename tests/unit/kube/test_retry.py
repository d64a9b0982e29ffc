"""retry_on_conflict timing and outcome on a fake clock; merge-patch computation; update_with_retry's requests."""

from __future__ import annotations

import asyncio
import copy
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arc_scaleset.backoff import Backoff
from arc_scaleset.clock import FakeClock
from arc_scaleset.kube.errors import Conflict, NotFound
from arc_scaleset.kube.merge_patch import merge_patch
from arc_scaleset.kube.resources import CONFIG_MAPS as CM
from arc_scaleset.kube.retry import default_backoff, retry_on_conflict, update_with_retry


def _conflict() -> Conflict:
    return Conflict(409, "Conflict", "the object has been modified; please apply your changes to the latest version")


class Flaky:
    """Raises Conflict for the first ``failures`` calls, recording the fake time of every call."""

    def __init__(self, clock: FakeClock, failures: int) -> None:
        self.clock = clock
        self.failures = failures
        self.calls: list[float] = []

    async def __call__(self) -> str:
        self.calls.append(self.clock.monotonic())
        if len(self.calls) <= self.failures:
            raise _conflict()
        return "written"


async def _drive(clock: FakeClock, task: asyncio.Task[Any]) -> Any:
    """Advance the fake clock whenever the task sleeps, until it finishes."""
    while not task.done():
        await asyncio.sleep(0)
        if clock.sleepers:
            await clock.advance(1.0)
    return task.result()


async def test_returns_the_result_once_a_conflict_clears() -> None:
    clock = FakeClock()
    flaky = Flaky(clock, failures=2)
    task = asyncio.ensure_future(retry_on_conflict(flaky, clock=clock, backoff=Backoff(base=0.01, factor=5, jitter=0)))
    assert await _drive(clock, task) == "written"
    assert len(flaky.calls) == 3


async def test_sleeps_follow_client_go_default_backoff_without_jitter() -> None:
    clock = FakeClock()
    flaky = Flaky(clock, failures=3)
    backoff = Backoff(base=0.010, factor=5.0, cap=10.0, jitter=0.0)
    task = asyncio.ensure_future(retry_on_conflict(flaky, clock=clock, backoff=backoff))
    # Advance exactly by each expected delay; a call happens right after each one.
    for delay in (0.010, 0.050, 0.250):
        for _ in range(100):
            if clock.sleepers:
                break
            await asyncio.sleep(0)
        await clock.advance(delay - 1e-9)
        assert clock.sleepers == 1, f"woke before {delay}s"
        await clock.advance(1e-9)
    assert await task == "written"
    gaps = [round(b - a, 6) for a, b in zip(flaky.calls, flaky.calls[1:], strict=False)]
    assert gaps == [0.010, 0.050, 0.250]


async def test_reraises_the_last_conflict_after_four_attempts() -> None:
    clock = FakeClock()
    flaky = Flaky(clock, failures=10)
    task = asyncio.ensure_future(retry_on_conflict(flaky, clock=clock))
    with pytest.raises(Conflict, match="the object has been modified"):
        await _drive(clock, task)
    assert len(flaky.calls) == 4


async def test_other_errors_propagate_without_retry() -> None:
    calls = 0

    async def missing() -> None:
        nonlocal calls
        calls += 1
        raise NotFound(404, "NotFound", "gone")

    with pytest.raises(NotFound):
        await retry_on_conflict(missing, clock=FakeClock())
    assert calls == 1


def test_default_backoff_jitter_stays_within_ten_percent() -> None:
    backoff = default_backoff()
    backoff.rng = random.Random(7)
    delays = [backoff.next_delay() for _ in range(3)]
    for delay, base in zip(delays, (0.010, 0.050, 0.250), strict=True):
        assert base <= delay <= base * 1.1


def _apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, written from the RFC's pseudo-code, to check patches by their effect."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _apply_merge_patch(result.get(key), value)
    return result


_leaf = st.one_of(st.integers(-3, 3), st.text(max_size=3), st.booleans(), st.lists(st.integers(0, 3), max_size=3))
_objects = st.recursive(
    st.dictionaries(st.sampled_from("abcde"), _leaf, max_size=4),
    lambda children: st.dictionaries(st.sampled_from("abcde"), st.one_of(_leaf, children), max_size=4),
    max_leaves=8,
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(_objects, _objects)
def test_merge_patch_turns_the_original_into_the_desired_object(
    original: dict[str, Any], desired: dict[str, Any]
) -> None:
    patch = merge_patch(original, desired)
    assert _apply_merge_patch(original, patch) == desired


@given(_objects)
def test_merge_patch_of_equal_objects_is_empty(obj: dict[str, Any]) -> None:
    assert merge_patch(obj, obj) == {}


def test_merge_patch_deletes_removed_keys_and_replaces_lists() -> None:
    original = {"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1", "y": "2"}}}
    desired = {"metadata": {"finalizers": ["a"], "labels": {"x": "1"}}}
    assert merge_patch(original, desired) == {"metadata": {"finalizers": ["a"], "labels": {"y": None}}}


# -- update_with_retry against an object the caller has -----------------------------------------------------


class Store:
    """The API's side of one object for :func:`update_with_retry`: GETs and merge patches under the
    ``resourceVersion`` lock, each request recorded (a collaborator of the function under test)."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.requests: list[str] = []

    async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        self.requests.append("get")
        return copy.deepcopy(self.obj)

    async def patch(self, resource: Any, name: str, patch: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.requests.append("patch")
        if patch["metadata"].pop("resourceVersion") != self.obj["metadata"]["resourceVersion"]:
            raise _conflict()
        self.obj = _apply_merge_patch(self.obj, patch)
        self.obj["metadata"]["resourceVersion"] = str(int(self.obj["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(self.obj)

    def edit(self, **labels: str) -> None:
        """Somebody else's write."""
        self.obj["metadata"].setdefault("labels", {}).update(labels)
        self.obj["metadata"]["resourceVersion"] = str(int(self.obj["metadata"]["resourceVersion"]) + 1)


def _label(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].setdefault("labels", {})["mine"] = "yes"
    return obj


async def _update(store: Store, seen: dict[str, Any] | None) -> dict[str, Any] | None:
    return await update_with_retry(
        store,  # type: ignore[arg-type]
        CM, "cm", namespace="ns", mutate=_label, seen=seen, backoff=Backoff(base=0.0, jitter=0.0),
    )  # fmt: skip


async def test_an_update_against_the_object_the_caller_has_sends_one_request_when_it_is_current() -> None:
    store = Store({"metadata": {"name": "cm", "resourceVersion": "1"}})
    stored = await _update(store, seen=copy.deepcopy(store.obj))
    assert store.requests == ["patch"]
    assert stored is not None
    assert stored["metadata"]["labels"] == {"mine": "yes"}


async def test_an_update_against_a_stale_object_reads_and_keeps_the_concurrent_write() -> None:
    store = Store({"metadata": {"name": "cm", "resourceVersion": "1"}})
    seen = copy.deepcopy(store.obj)
    store.edit(theirs="yes")
    stored = await _update(store, seen=seen)
    assert store.requests == ["patch", "get", "patch"]  # refused by the lock, then read and written again
    assert stored is not None
    assert stored["metadata"]["labels"] == {"theirs": "yes", "mine": "yes"}


async def test_an_update_without_an_object_or_its_version_reads_first() -> None:
    for seen in (None, {"metadata": {"name": "cm"}}):
        store = Store({"metadata": {"name": "cm", "resourceVersion": "1"}})
        await _update(store, seen=seen)
        assert store.requests == ["get", "patch"]
