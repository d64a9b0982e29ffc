"""Handing placeholders' room to new runners (controllers/warmcapacity/handover.py): a member set's rise in
``replicas`` counts for its pool; the placeholders released hold room on a node, highest index first."""

from __future__ import annotations

from typing import Any

from arc_scaleset.api.keys import LABEL_SCALE_SET_NAME
from arc_scaleset.controllers.warmcapacity.handover import ReplicaGrowth, replicas_changed, to_release
from arc_scaleset.kube.controller import Request

POOL = "8a8ca605"


def runner_set(replicas: int, *, scale_set: str = "linux", uid: str = "ers-1", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": scale_set, "namespace": "team-a", "uid": uid, "labels": {LABEL_SCALE_SET_NAME: scale_set},
                     **meta},
        "spec": {"replicas": replicas},
    }  # fmt: skip


def growth() -> ReplicaGrowth:
    pools = {("team-a", "linux"): POOL}
    return ReplicaGrowth(lambda namespace, name: pools.get((namespace, name)))


def test_a_rise_in_a_member_sets_replicas_counts_for_its_pool_once() -> None:
    feed = growth()
    assert list(feed.note(runner_set(0))) == [], "the first sight of a set only remembers its figure"
    assert list(feed.note(runner_set(4))) == [Request("", POOL)]
    assert list(feed.note(runner_set(4))) == []  # seen again: no new rise
    feed.note(runner_set(3))  # down: nothing
    feed.note(runner_set(5))
    assert feed.take(POOL) == 4 + 2
    assert feed.take(POOL) == 0, "room not released at a pass is not owed later"


def test_other_scale_sets_and_sets_going_are_not_counted() -> None:
    feed = growth()
    for ers in (runner_set(0, scale_set="windows", uid="w"), runner_set(0, uid="g")):
        feed.note(ers)
    assert list(feed.note(runner_set(3, scale_set="windows", uid="w"))) == []  # no member of a pool
    assert list(feed.note(runner_set(3, uid="g", deletionTimestamp="2026-01-15T09:00:00Z"))) == []
    assert feed.take(POOL) == 0


def test_only_replica_changes_pass_the_update_predicate() -> None:
    assert replicas_changed(runner_set(1), runner_set(2))
    assert not replicas_changed(runner_set(2), runner_set(2, annotations={"x": "y"}))


def placeholder(index: int, *, node: str | None = "node-1", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"warm-{POOL}-{index}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-15T09:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}}


def test_released_placeholders_hold_room_on_a_node_highest_index_first() -> None:
    pods = [placeholder(0), placeholder(1, node=None), placeholder(2), placeholder(3, deleting=True), placeholder(4)]
    pods.append({"metadata": {"name": "warm-ffff-9"}, "spec": {"nodeName": "node-1"}})  # another pool's name
    names = [pod["metadata"]["name"] for pod in to_release(POOL, pods, 2)]
    assert names == [f"warm-{POOL}-4", f"warm-{POOL}-2"]
    assert len(to_release(POOL, pods, 10)) == 3
    assert to_release(POOL, pods, 0) == []
