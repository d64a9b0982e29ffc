"""The controller's reconcile loop: outcomes, retries, concurrency and stopping, on a fake clock.

No API is involved: keys are queued with ``Controller.enqueue`` (the informer side is covered by the
integration tests against the real control plane).
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry

from arc_scaleset.clock import FakeClock
from arc_scaleset.kube.client import KubeClient, WatchEvent
from arc_scaleset.kube.controller import Controller, Request, Result, controller_owner_request
from arc_scaleset.kube.credentials import ConnectionConfig
from arc_scaleset.kube.informer import Informer
from arc_scaleset.kube.resources import CONFIG_MAPS, NAMESPACES, Resource
from arc_scaleset.kube.runtime_metrics import RuntimeMetrics
from arc_scaleset.kube.workqueue import ItemExponentialRateLimiter
from arc_scaleset_lab.harness.waiting import eventually

KEY = Request("ns", "a")
RUNNER_SETS = Resource("actions.github.com", "v1alpha1", "ephemeralrunnersets", "EphemeralRunnerSet")


def no_informers(_: Resource) -> list[Informer]:
    return []


async def test_a_failing_reconcile_is_retried_with_exponential_backoff_until_it_succeeds() -> None:
    clock = FakeClock()
    registry = CollectorRegistry()
    calls: list[float] = []

    async def reconcile(request: Request) -> Result:
        calls.append(clock.monotonic())
        if len(calls) <= 3:
            raise RuntimeError("boom\nsecond line")
        return Result()

    controller = Controller(
        "demo", CONFIG_MAPS, reconcile, clock=clock, rate_limiter=ItemExponentialRateLimiter(base=1.0, cap=60.0)
    )
    controller.start(no_informers, metrics=RuntimeMetrics(registry))
    controller.enqueue(KEY)
    await eventually(lambda: len(calls) == 1 and clock.sleepers == 1)
    for expected_delay, expected_calls in ((1.0, 2), (2.0, 3), (4.0, 4)):
        await clock.advance(expected_delay - 0.001)
        assert len(calls) == expected_calls - 1, "retried before its backoff delay"
        await clock.advance(0.001)
        await eventually(lambda n=expected_calls: len(calls) == n)  # type: ignore[misc]
        await eventually(lambda: controller.queue.processing == 0)
    assert controller.queue.num_requeues(KEY) == 0, "success resets the key's backoff"
    assert registry.get_sample_value("controller_runtime_reconcile_errors_total", {"controller": "demo"}) == 3
    assert (
        registry.get_sample_value("controller_runtime_reconcile_total", {"controller": "demo", "result": "error"}) == 3
    )
    assert (
        registry.get_sample_value("controller_runtime_reconcile_total", {"controller": "demo", "result": "success"})
        == 1
    )
    assert registry.get_sample_value("controller_runtime_active_workers", {"controller": "demo"}) == 0
    assert registry.get_sample_value("workqueue_retries_total", {"name": "demo", "controller": "demo"}) == 3
    await controller.stop()


async def test_a_started_controller_counts_from_zero_before_its_first_reconcile() -> None:
    registry = CollectorRegistry()

    async def reconcile(request: Request) -> Result:
        return Result()

    controller = Controller("fresh", CONFIG_MAPS, reconcile, concurrency=3)
    controller.start(no_informers, metrics=RuntimeMetrics(registry))
    # As controller-runtime's initMetrics: a healthy controller's error rate is 0, not an absent series.
    assert registry.get_sample_value("controller_runtime_reconcile_errors_total", {"controller": "fresh"}) == 0
    for result in ("success", "error", "requeue_after"):
        labels = {"controller": "fresh", "result": result}
        assert registry.get_sample_value("controller_runtime_reconcile_total", labels) == 0
    assert registry.get_sample_value("controller_runtime_active_workers", {"controller": "fresh"}) == 0
    assert registry.get_sample_value("controller_runtime_max_concurrent_reconciles", {"controller": "fresh"}) == 3
    await controller.stop()


async def test_a_reconcile_crash_is_logged_once_with_the_key_and_a_one_line_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    done = asyncio.Event()

    async def reconcile(request: Request) -> Result:
        done.set()
        raise ValueError("first line\n  second line")

    controller = Controller("crashy", CONFIG_MAPS, reconcile, clock=clock)
    controller.start(no_informers)
    with caplog.at_level(logging.ERROR, logger="arc_scaleset.kube.controller"):
        controller.enqueue(KEY)
        await asyncio.wait_for(done.wait(), 2)
        await eventually(lambda: controller.queue.waiting == 1)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "ns/a" in errors[0]
    assert "ValueError: first line second line" in errors[0]
    assert "\n" not in errors[0]
    assert controller.running, "a crash must not stop the controller"
    await controller.stop()


async def test_requeue_after_reconciles_again_after_the_delay_and_not_before() -> None:
    clock = FakeClock()
    calls: list[float] = []

    async def reconcile(request: Request) -> Result:
        calls.append(clock.monotonic())
        return Result(requeue_after=30.0) if len(calls) == 1 else Result()

    controller = Controller("poll", CONFIG_MAPS, reconcile, clock=clock)
    controller.start(no_informers)
    controller.enqueue(KEY)
    await eventually(lambda: len(calls) == 1 and clock.sleepers == 1)
    await clock.advance(29.9)
    assert len(calls) == 1
    await clock.advance(0.1)
    await eventually(lambda: len(calls) == 2)
    assert calls[1] - calls[0] == pytest.approx(30.0)
    await controller.stop()


async def test_one_key_is_never_reconciled_twice_at_once_but_different_keys_are() -> None:
    release = asyncio.Event()
    running: list[Request] = []
    overlaps: list[Request] = []
    started = 0

    async def reconcile(request: Request) -> Result:
        nonlocal started
        if request in running:
            overlaps.append(request)
        running.append(request)
        started += 1
        await release.wait()
        running.remove(request)
        return Result()

    controller = Controller("parallel", CONFIG_MAPS, reconcile, concurrency=3)
    controller.start(no_informers)
    for request in (Request("ns", "a"), Request("ns", "b")):
        controller.enqueue(request)
    await eventually(lambda: len(running) == 2)
    controller.enqueue(Request("ns", "a"))  # while "a" is running: must wait for it
    for _ in range(20):
        await asyncio.sleep(0)
    assert sorted(running) == [Request("ns", "a"), Request("ns", "b")]
    release.set()
    await eventually(lambda: started == 3 and not running)
    assert overlaps == []
    await controller.stop()


async def test_no_more_keys_are_reconciled_at_once_than_the_controller_has_workers() -> None:
    releases = {name: asyncio.Event() for name in "abc"}
    running: list[str] = []
    finished: list[str] = []
    most_at_once = 0

    async def reconcile(request: Request) -> Result:
        nonlocal most_at_once
        running.append(request.name)
        most_at_once = max(most_at_once, len(running))
        await releases[request.name].wait()
        running.remove(request.name)
        finished.append(request.name)
        return Result()

    controller = Controller("bounded", CONFIG_MAPS, reconcile, concurrency=2)
    controller.start(no_informers)
    for name in "abc":
        controller.enqueue(Request("ns", name))
    # Both workers busy and the third key queued; a third worker would take it while the test waits below.
    await eventually(lambda: running == ["a", "b"] and len(controller.queue) == 1)
    releases["b"].set()
    await eventually(lambda: running == ["a", "c"])  # the freed worker takes the key that waited
    releases["a"].set()
    releases["c"].set()
    await eventually(lambda: sorted(finished) == ["a", "b", "c"])
    assert most_at_once == 2, "a third key started with both workers busy"
    await controller.stop()


async def test_a_change_is_reconciled_before_the_objects_replayed_at_start() -> None:
    """The cached objects replayed at start queue at low priority: a change that arrives meanwhile goes first."""
    started = asyncio.Event()
    release = asyncio.Event()
    order: list[str] = []

    async def reconcile(request: Request) -> Result:
        order.append(request.name)
        started.set()
        await release.wait()
        return Result()

    informer = Informer(KubeClient(ConnectionConfig(server="http://127.0.0.1:1")), CONFIG_MAPS)  # fed by hand
    for name in ("cached-1", "cached-2", "cached-3"):
        informer._apply(WatchEvent("ADDED", {"metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"}}))
    controller = Controller("changes-first", CONFIG_MAPS, reconcile)
    controller.start(lambda _: [informer])
    await asyncio.wait_for(started.wait(), 2)
    controller.enqueue(Request("ns", "created"))
    # A watch event for a replayed object is a change: it moves up too.
    informer._apply(
        WatchEvent("MODIFIED", {"metadata": {"name": "cached-3", "namespace": "ns", "resourceVersion": "2"}})
    )
    release.set()
    await eventually(lambda: len(order) == 4)
    assert order[1:] == ["created", "cached-3", "cached-2"]
    await controller.stop()


async def test_stop_with_drain_lets_the_reconcile_in_flight_finish() -> None:
    release = asyncio.Event()
    finished: list[Request] = []

    async def reconcile(request: Request) -> Result:
        await release.wait()
        finished.append(request)
        return Result()

    controller = Controller("drain", CONFIG_MAPS, reconcile)
    controller.start(no_informers)
    controller.enqueue(KEY)
    await eventually(lambda: controller.queue.processing == 1)
    stopping = asyncio.create_task(controller.stop(drain=True))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not stopping.done()
    release.set()
    await asyncio.wait_for(stopping, 2)
    assert finished == [KEY]
    assert not controller.running


async def test_stop_without_drain_cancels_the_reconcile_in_flight() -> None:
    cancelled = asyncio.Event()

    async def reconcile(request: Request) -> Result:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return Result()

    controller = Controller("cancel", CONFIG_MAPS, reconcile)
    controller.start(no_informers)
    controller.enqueue(KEY)
    await eventually(lambda: controller.queue.processing == 1)
    await asyncio.wait_for(controller.stop(drain=False), 2)
    assert cancelled.is_set()


async def test_a_controller_runs_once() -> None:
    async def reconcile(request: Request) -> Result:
        return Result()

    controller = Controller("once", CONFIG_MAPS, reconcile)
    controller.start(no_informers)
    with pytest.raises(RuntimeError, match="already started"):
        controller.start(no_informers)
    await controller.stop()


def owned(*refs: dict[str, object], namespace: str = "ns") -> dict[str, object]:
    return {"metadata": {"name": "child", "namespace": namespace, "ownerReferences": list(refs)}}


def ref(kind: str, api_version: str, name: str = "parent", *, controller: bool = True) -> dict[str, object]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": "u", "controller": controller}


def test_a_child_maps_to_its_controller_owner_of_the_primary_kind() -> None:
    child = owned(ref("EphemeralRunnerSet", "actions.github.com/v1alpha1", "ers-1"))
    assert controller_owner_request(child, RUNNER_SETS) == Request("ns", "ers-1")


def test_the_owner_version_does_not_matter_but_group_and_kind_do() -> None:
    assert controller_owner_request(owned(ref("EphemeralRunnerSet", "actions.github.com/v1beta1")), RUNNER_SETS)
    assert controller_owner_request(owned(ref("EphemeralRunnerSet", "other.example.com/v1alpha1")), RUNNER_SETS) is None
    assert controller_owner_request(owned(ref("ConfigMap", "v1")), RUNNER_SETS) is None
    assert controller_owner_request(owned(ref("ConfigMap", "v1")), CONFIG_MAPS) == Request("ns", "parent")


def test_only_the_controller_reference_counts() -> None:
    child = owned(
        ref("EphemeralRunnerSet", "actions.github.com/v1alpha1", "not-controller", controller=False),
        ref("EphemeralRunnerSet", "actions.github.com/v1alpha1", "controller"),
    )
    assert controller_owner_request(child, RUNNER_SETS) == Request("ns", "controller")
    assert controller_owner_request(owned(), RUNNER_SETS) is None
    assert controller_owner_request({"metadata": {"name": "x"}}, RUNNER_SETS) is None


def test_a_cluster_scoped_owner_gets_a_key_without_namespace() -> None:
    assert controller_owner_request(owned(ref("Namespace", "v1", "team")), NAMESPACES) == Request("", "team")
    assert str(Request("", "team")) == "team"
    assert str(Request("ns", "a")) == "ns/a"


def test_a_controller_lists_each_triggering_resource_once() -> None:
    async def reconcile(request: Request) -> Result:
        return Result()

    controller = Controller(
        "c", RUNNER_SETS, reconcile, owns=[CONFIG_MAPS, CONFIG_MAPS], watches=[(RUNNER_SETS, lambda o: ())]
    )
    assert controller.resources == [RUNNER_SETS, CONFIG_MAPS]
    with pytest.raises(ValueError, match="concurrency"):
        Controller("c", RUNNER_SETS, reconcile, concurrency=0)
