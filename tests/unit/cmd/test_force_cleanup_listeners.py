"""Which listeners ``force-cleanup`` deletes and releases: only the scale set's own, never a decoy that merely
names it in its spec (issue 26: anybody who may create AutoscalingListeners somewhere can write one)."""

from __future__ import annotations

from typing import Any

from arc_scaleset.cmd.force_cleanup import listeners_to_release

UID_ANNOTATION = "actions.github.com/autoscaling-runner-set-uid"
SCALE_SET = {"metadata": {"name": "runners", "namespace": "team-a", "uid": "uid-a"}}


def listener(name: str, namespace: str, *, uid: str | None, names: tuple[str, str] = ("team-a", "runners")) -> Any:
    annotations = {} if uid is None else {UID_ANNOTATION: uid}
    spec = {"autoscalingRunnerSetNamespace": names[0], "autoscalingRunnerSetName": names[1]}
    return {"metadata": {"name": name, "namespace": namespace, "annotations": annotations}, "spec": spec}


def released(listeners: list[Any], controller_namespace: str | None = None) -> list[str]:
    chosen, _ = listeners_to_release(SCALE_SET, listeners, controller_namespace=controller_namespace)
    return [al["metadata"]["name"] for al in chosen]


def test_the_scale_sets_own_listener_and_arcs_are_released() -> None:
    assert released([listener("ours", "arc-systems", uid="uid-a")]) == ["ours"]
    assert released([listener("arcs", "arc-systems", uid=None)]) == ["arcs"]


def test_a_listener_carrying_another_uid_or_naming_another_scale_set_is_left_alone() -> None:
    assert released([listener("stale", "arc-systems", uid="uid-other")]) == []
    assert released([listener("theirs", "arc-systems", uid="uid-a", names=("team-b", "runners"))]) == []


def test_a_decoy_in_another_namespace_is_never_released_with_the_controller_namespace_given() -> None:
    listeners = [listener("ours", "arc-systems", uid="uid-a"), listener("decoy", "team-b", uid="uid-a")]
    assert released(listeners, controller_namespace="arc-systems") == ["ours"]


def test_without_the_controller_namespace_claims_from_two_namespaces_release_nothing_and_say_why() -> None:
    listeners = [listener("ours", "arc-systems", uid="uid-a"), listener("decoy", "team-b", uid=None)]
    chosen, note = listeners_to_release(SCALE_SET, listeners, controller_namespace=None)
    assert chosen == []
    assert "arc-systems, team-b" in note
    assert "--controller-namespace" in note
