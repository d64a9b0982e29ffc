"""What reaches a controller's workqueue from a watched resource (an update predicate) and from a Source.

Events are fed to a real, unstarted informer as its watch would deliver them; no API is involved.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from arc_scaleset.clock import FakeClock
from arc_scaleset.kube.client import KubeClient, WatchEvent
from arc_scaleset.kube.controller import Controller, Request, Result, Watch
from arc_scaleset.kube.credentials import ConnectionConfig
from arc_scaleset.kube.informer import Informer, Object
from arc_scaleset.kube.resources import CONFIG_MAPS, Resource
from arc_scaleset_lab.harness.waiting import eventually

RUNNER_SETS = Resource("actions.github.com", "v1alpha1", "ephemeralrunnersets", "EphemeralRunnerSet")


def runner_set(version: str, *, note: str, replicas: int) -> dict[str, object]:
    return {
        "metadata": {"namespace": "team", "name": "rs", "resourceVersion": version, "annotations": {"note": note}},
        "spec": {"replicas": replicas},
    }


def note_changed(old: Object, new: Object) -> bool:
    return bool(old["metadata"]["annotations"]["note"] != new["metadata"]["annotations"]["note"])


def recording() -> tuple[list[Request], Callable[[Request], Awaitable[Result]]]:
    """A reconcile that records the keys it is called with, and the list it records them in."""
    reconciled: list[Request] = []

    async def reconcile(request: Request) -> Result:
        reconciled.append(request)
        return Result()

    return reconciled, reconcile


async def test_a_watched_resources_updates_are_mapped_only_when_the_predicate_accepts_them() -> None:
    informer = Informer(KubeClient(ConnectionConfig(server="http://127.0.0.1:1")), RUNNER_SETS)
    reconciled, reconcile = recording()
    controller = Controller(
        "listeners",
        CONFIG_MAPS,
        reconcile,
        watches=[Watch(RUNNER_SETS, lambda obj: [Request("ctl", "listener")], on_update_if=note_changed)],
        clock=FakeClock(),
    )
    controller.start(lambda resource: [informer] if resource == RUNNER_SETS else [])
    informer._apply(WatchEvent("ADDED", runner_set("1", note="a", replicas=1)))
    await eventually(lambda: len(reconciled) == 1)
    for version, replicas in (("2", 2), ("3", 3), ("4", 1)):  # scaling: the predicate says no
        informer._apply(WatchEvent("MODIFIED", runner_set(version, note="a", replicas=replicas)))
    informer._apply(WatchEvent("MODIFIED", runner_set("5", note="b", replicas=1)))
    await eventually(lambda: len(reconciled) == 2)
    await eventually(lambda: controller.queue.processing == 0 and len(controller.queue) == 0)
    assert reconciled == [Request("ctl", "listener")] * 2
    await controller.stop()


async def test_a_primary_objects_updates_are_mapped_only_when_the_primary_predicate_accepts_them() -> None:
    informer = Informer(KubeClient(ConnectionConfig(server="http://127.0.0.1:1")), RUNNER_SETS)
    reconciled, reconcile = recording()
    controller = Controller(
        "groups",
        RUNNER_SETS,
        reconcile,
        primary_keys=lambda obj: [Request("ctl", "group")],
        primary_update_if=note_changed,
        clock=FakeClock(),
    )
    controller.start(lambda resource: [informer] if resource == RUNNER_SETS else [])
    informer._apply(WatchEvent("ADDED", runner_set("1", note="a", replicas=1)))
    await eventually(lambda: len(reconciled) == 1 and controller.queue.processing == 0)
    for version, replicas in (("2", 2), ("3", 3)):  # the predicate says no
        informer._apply(WatchEvent("MODIFIED", runner_set(version, note="a", replicas=replicas)))
    assert len(controller.queue) == 0, "an update the predicate refuses queues nothing (handlers run synchronously)"
    informer._apply(WatchEvent("MODIFIED", runner_set("4", note="b", replicas=3)))
    assert len(controller.queue) == 1
    await eventually(lambda: len(reconciled) == 2)
    informer._apply(WatchEvent("DELETED", runner_set("5", note="b", replicas=3)))  # a delete always is
    await eventually(lambda: len(reconciled) == 3)
    await eventually(lambda: controller.queue.processing == 0 and len(controller.queue) == 0)
    assert reconciled == [Request("ctl", "group")] * 3
    await controller.stop()


class RecordingSource:
    def __init__(self) -> None:
        self.enqueue: Callable[[Request], None] | None = None
        self.stopped = False

    def start(self, enqueue: Callable[[Request], None]) -> None:
        self.enqueue = enqueue

    async def stop(self) -> None:
        self.stopped = True


async def test_a_source_is_started_with_the_controller_queues_keys_and_is_stopped_with_it() -> None:
    reconciled, reconcile = recording()
    source = RecordingSource()
    controller = Controller("demo", CONFIG_MAPS, reconcile, sources=[source], clock=FakeClock())
    controller.start(lambda _: [])
    assert source.enqueue is not None
    source.enqueue(Request("ns", "a"))
    await eventually(lambda: reconciled == [Request("ns", "a")])
    await controller.stop()
    assert source.stopped


async def test_primary_keys_map_primary_objects_to_group_keys_the_old_and_the_new_on_an_update() -> None:
    informer = Informer(KubeClient(ConnectionConfig(server="http://127.0.0.1:1")), RUNNER_SETS)
    reconciled, reconcile = recording()
    controller = Controller(
        "pools",
        RUNNER_SETS,
        reconcile,
        primary_keys=lambda obj: [Request("", f"group-{obj['metadata']['annotations']['note']}")],
        clock=FakeClock(),
    )
    controller.start(lambda resource: [informer] if resource == RUNNER_SETS else [])
    informer._apply(WatchEvent("ADDED", runner_set("1", note="a", replicas=1)))
    await eventually(lambda: reconciled == [Request("", "group-a")])
    informer._apply(WatchEvent("MODIFIED", runner_set("2", note="b", replicas=1)))  # moves from group a to b
    await eventually(lambda: sorted(reconciled[1:]) == [Request("", "group-a"), Request("", "group-b")])
    assert Request("team", "rs") not in reconciled, "the object's own key is not queued"
    await controller.stop()
