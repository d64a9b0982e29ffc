"""Owner references and the pure finalizer check."""

from __future__ import annotations

import pytest

from arc_scaleset.kube.finalizers import has_finalizer
from arc_scaleset.kube.ownerrefs import controller_of, controller_ref, is_controlled_by

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


def test_is_controlled_by_matches_on_uid() -> None:
    child = {"metadata": {"ownerReferences": [controller_ref(OWNER)]}}
    assert is_controlled_by(child, OWNER)
    assert not is_controlled_by(child, {"metadata": {"name": "ers", "uid": "uid-2"}})
    assert not is_controlled_by(child, {"metadata": {"name": "ers"}})


def test_has_finalizer() -> None:
    assert has_finalizer({"metadata": {"finalizers": ["a", "b"]}}, "b")
    assert not has_finalizer({"metadata": {"finalizers": ["a"]}}, "b")
    assert not has_finalizer({"metadata": {}}, "b")
