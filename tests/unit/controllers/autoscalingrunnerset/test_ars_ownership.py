"""Which listeners and runner sets are a scale set's own (``autoscalingrunnerset/ownership.py``): by what they say
of their scale set, never by a name another scale set can come to share (issue 26, items 2 and 3)."""

from __future__ import annotations

from typing import Any

from arc_scaleset.controllers.autoscalingrunnerset.ownership import (
    INDEX_CLAIMED_SCALE_SET,
    REASON_LISTENER_NAME_CONFLICT,
    claimed_scale_set_index,
    conflict_candidates,
    listener_is_own,
    listener_name_conflict,
    runner_set_conflict,
    runner_sets_to_delete,
)
from arc_scaleset.kube.informer import Store
from arc_scaleset.kube.ownerrefs import Owner

UID_ANNOTATION = "actions.github.com/autoscaling-runner-set-uid"
SPEC_HASH = "actions.github.com/runner-spec-hash"
SCALE_SET = Owner("team-a", "actions.github.com", "AutoscalingRunnerSet", "arc-runners", "uid-a")


def listener(namespace: str = "team-a", name: str = "arc-runners", **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingListener",
        "metadata": {"name": "arc-runners-12345678-listener", "namespace": "arc-system", "annotations": annotations},
        "spec": {"autoscalingRunnerSetNamespace": namespace, "autoscalingRunnerSetName": name},
    }


def test_a_listener_made_for_the_scale_set_is_its_own() -> None:
    assert listener_is_own(listener(**{UID_ANNOTATION: "uid-a"}), SCALE_SET)


def test_arcs_listener_of_the_same_scale_set_without_a_uid_annotation_is_its_own_to_replace() -> None:
    assert listener_is_own(listener(**{SPEC_HASH: "abc"}), SCALE_SET)


def test_the_listener_of_a_deleted_namesake_is_its_own_to_replace() -> None:
    assert listener_is_own(listener(**{UID_ANNOTATION: "uid-of-a-deleted-scale-set"}), SCALE_SET)


def test_another_scale_sets_listener_under_the_same_name_is_not_its_own_and_is_a_conflict() -> None:
    other = listener("team-b", **{UID_ANNOTATION: "uid-b"})
    assert not listener_is_own(other, SCALE_SET)
    assert not listener_is_own(listener("team-b", **{SPEC_HASH: "abc"}), SCALE_SET)
    conflict = listener_name_conflict(other, SCALE_SET)
    assert conflict is not None
    assert conflict.reason == REASON_LISTENER_NAME_CONFLICT == "ListenerNameConflict"
    assert "arc-system/arc-runners-12345678-listener" in conflict.message
    assert "AutoscalingRunnerSet team-b/arc-runners" in conflict.message
    assert listener_name_conflict(None, SCALE_SET) is None
    assert listener_name_conflict(listener(**{UID_ANNOTATION: "uid-a"}), SCALE_SET) is None


def runner_set(name: str, owner: str = "arc-runners", uid: str = "uid-a") -> dict[str, Any]:
    ref = {"apiVersion": "actions.github.com/v1alpha1", "kind": "AutoscalingRunnerSet", "name": owner, "uid": uid,
           "controller": True}  # fmt: skip
    return {"metadata": {"name": name, "namespace": "team-a", "ownerReferences": [ref]}}


def test_the_set_named_after_the_scale_set_is_deleted_with_it_unless_it_names_another_owner() -> None:
    own = [runner_set("arc-runners-x7k2p")]
    assert runner_sets_to_delete(SCALE_SET, own, None, name="arc-runners") == ["arc-runners", "arc-runners-x7k2p"]
    assert runner_sets_to_delete(SCALE_SET, own, runner_set("arc-runners"), name="arc-runners") == [
        "arc-runners",
        "arc-runners-x7k2p",
    ]
    unowned = {"metadata": {"name": "arc-runners", "namespace": "team-a"}}
    assert runner_sets_to_delete(SCALE_SET, [], unowned, name="arc-runners") == ["arc-runners"]
    # Scale set "y" controls a set named like this scale set: it is y's.
    others = runner_set("arc-runners", owner="y", uid="uid-y")
    assert runner_sets_to_delete(SCALE_SET, own, others, name="arc-runners") == ["arc-runners-x7k2p"]


def test_a_set_naming_one_scale_set_with_anothers_uid_is_a_conflict_on_both_and_foreign_sets_on_neither() -> None:
    other = Owner("team-a", "actions.github.com", "AutoscalingRunnerSet", "y", "uid-y")
    # Names this scale set by name, scale set y by UID.
    stray = runner_set("stray", owner="arc-runners", uid="uid-y")
    elsewhere = {
        **runner_set("copied", uid="uid-a"),
        "metadata": {**runner_set("copied")["metadata"], "namespace": "team-b"},
    }
    sets = [runner_set("arc-runners"), runner_set("y", owner="y", uid="uid-y"), stray, elsewhere]
    mine = runner_set_conflict(SCALE_SET, sets)
    assert mine is not None
    assert mine[0] == "RunnerSetOwnershipConflict"
    assert "stray (names this scale set with UID uid-y" in mine[1]
    theirs = runner_set_conflict(other, sets)
    assert theirs is not None
    assert "stray (names AutoscalingRunnerSet arc-runners with this scale set's UID)" in theirs[1]
    assert "copied" not in mine[1] + theirs[1]
    assert runner_set_conflict(SCALE_SET, [runner_set("arc-runners"), elsewhere]) is None


def test_the_indexed_candidates_give_the_conflict_a_scan_of_the_namespace_gives() -> None:
    """The AutoscalingRunnerSet pass reads only the sets naming its UID or its name (two indexes), not every set of
    the namespace: the same report, in time independent of the namespace's size."""
    other = Owner("team-a", "actions.github.com", "AutoscalingRunnerSet", "y", "uid-y")
    stray = runner_set("stray", owner="arc-runners", uid="uid-y")
    by_uid = runner_set("by-uid", owner="renamed", uid="uid-a")
    elsewhere = {**runner_set("copied"), "metadata": {**runner_set("copied")["metadata"], "namespace": "team-b"}}
    unrelated = [runner_set(f"z{i}", owner=f"z{i}", uid=f"uid-z{i}") for i in range(50)]
    no_owner = {"metadata": {"name": "orphan", "namespace": "team-a"}}
    store = Store()
    store.add_index(INDEX_CLAIMED_SCALE_SET, claimed_scale_set_index)
    for obj in (runner_set("arc-runners"), runner_set("y", owner="y", uid="uid-y"), stray, by_uid, elsewhere,
                no_owner, *unrelated):  # fmt: skip
        store.upsert(obj)
    for scale_set in (SCALE_SET, other):
        candidates = conflict_candidates(store, scale_set)
        names = [c["metadata"]["name"] for c in candidates]
        assert len(names) == len(set(names)), "a set naming both the UID and the name is read once"
        assert not {name for name in names if name.startswith("z")}, "sets naming other scale sets are not read"
        assert runner_set_conflict(scale_set, candidates) == runner_set_conflict(scale_set, store.list("team-a"))
    assert runner_set_conflict(SCALE_SET, conflict_candidates(store, SCALE_SET)) is not None
    assert claimed_scale_set_index(no_owner) == ()
