"""Owner references and the pure finalizer check."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.kube.finalizers import has_finalizer
from arc_scaleset.kube.ownerrefs import (
    Owner,
    children_of,
    claimed_owner,
    controller_of,
    controller_ref,
    is_controlled_by,
)

OWNER = {"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunnerSet",
         "metadata": {"name": "ers", "uid": "uid-1", "namespace": "arc"}}  # fmt: skip


def test_controller_ref_points_at_the_owner_and_blocks_its_deletion() -> None:
    assert controller_ref(OWNER) == {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "name": "ers",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_controller_ref_needs_a_uid() -> None:
    with pytest.raises(ValueError, match=r"without metadata\.uid"):
        controller_ref({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})


def test_controller_of_ignores_non_controller_owners() -> None:
    child = {"metadata": {"ownerReferences": [{"uid": "x", "name": "other"}, controller_ref(OWNER)]}}
    assert controller_of(child) == controller_ref(OWNER)
    assert controller_of({"metadata": {"ownerReferences": [{"uid": "x"}]}}) is None
    assert controller_of({}) is None


def test_is_controlled_by_matches_the_owners_namespace_group_kind_name_and_uid() -> None:
    child = {"metadata": {"namespace": "arc", "ownerReferences": [controller_ref(OWNER)]}}
    assert is_controlled_by(child, OWNER)
    assert is_controlled_by(child, Owner.of(OWNER))
    # Another version of the owner's group names the same owner.
    other_version = {**OWNER, "apiVersion": "actions.github.com/v1"}
    assert is_controlled_by(child, other_version)
    assert not is_controlled_by(child, {**OWNER, "metadata": {**OWNER["metadata"], "uid": "uid-2"}})
    assert not is_controlled_by(child, {**OWNER, "metadata": {**OWNER["metadata"], "name": "other"}})
    assert not is_controlled_by(child, {**OWNER, "kind": "AutoscalingRunnerSet"})
    assert not is_controlled_by(child, {**OWNER, "apiVersion": "example.com/v1alpha1"})
    assert not is_controlled_by(child, {"metadata": {"name": "ers", "namespace": "arc"}})
    # The UID alone is not enough: a child in another namespace claiming the owner's UID is not its child.
    elsewhere = {"metadata": {"namespace": "team-b", "ownerReferences": [controller_ref(OWNER)]}}
    assert not is_controlled_by(elsewhere, OWNER)
    assert claimed_owner(elsewhere) == Owner("team-b", "actions.github.com", "EphemeralRunnerSet", "ers", "uid-1")


def test_children_of_narrows_by_uid_and_keeps_only_the_owners_children() -> None:
    mine = {"metadata": {"name": "a", "namespace": "arc", "ownerReferences": [controller_ref(OWNER)]}}
    foreign = {"metadata": {"name": "b", "namespace": "team-b", "ownerReferences": [controller_ref(OWNER)]}}

    class Cache:
        def by_owner(self, uid: str) -> list[dict[str, Any]]:
            return [mine, foreign] if uid == "uid-1" else []

    assert children_of(Cache(), Owner.of(OWNER)) == [mine]
    assert children_of(Cache(), Owner("arc", "actions.github.com", "EphemeralRunnerSet", "ers", "")) == []


def test_has_finalizer() -> None:
    assert has_finalizer({"metadata": {"finalizers": ["a", "b"]}}, "b")
    assert not has_finalizer({"metadata": {"finalizers": ["a"]}}, "b")
    assert not has_finalizer({"metadata": {}}, "b")
