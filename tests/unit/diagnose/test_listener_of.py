"""Which AutoscalingListener the diagnosis shows for a scale set: only the one made for it (its UID annotation),
in the controller namespace when that is known; a decoy naming the scale set is named in a note, never shown."""

from __future__ import annotations

from typing import Any

from arc_scaleset.api.keys import ANNOTATION_AUTOSCALING_RUNNER_SET_UID
from arc_scaleset.diagnose.listener_of import listener_of

SCALE_SET: dict[str, Any] = {"metadata": {"namespace": "team-a", "name": "arc-runners", "uid": "uid-a"}}


def listener(namespace: str, name: str = "arc-runners-listener", *, uid: str | None = "uid-a") -> dict[str, Any]:
    metadata: dict[str, Any] = {"namespace": namespace, "name": name}
    if uid is not None:
        metadata["annotations"] = {ANNOTATION_AUTOSCALING_RUNNER_SET_UID: uid}
    spec = {"autoscalingRunnerSetNamespace": "team-a", "autoscalingRunnerSetName": "arc-runners"}
    return {"metadata": metadata, "spec": spec}


def test_the_listener_made_for_the_scale_set_is_shown() -> None:
    real = listener("arc-systems")
    choice = listener_of(SCALE_SET, [real], controller_namespace=None)
    assert choice.listener is real
    assert choice.notes == []


def test_a_listener_without_the_scale_sets_uid_is_not_shown_and_is_named() -> None:
    decoy, real = listener("aaa-team-b", uid=None), listener("arc-systems")
    choice = listener_of(SCALE_SET, [decoy, real], controller_namespace=None)
    assert choice.listener is real
    (note,) = choice.notes
    assert note.startswith("AutoscalingListener aaa-team-b/arc-runners-listener names this scale set but was not made")

    forged = listener("aaa-team-b", uid="uid-other")
    assert listener_of(SCALE_SET, [forged], controller_namespace=None).listener is None


def test_a_copy_outside_the_controller_namespace_is_not_shown() -> None:
    copy, real = listener("aaa-team-b"), listener("arc-systems")
    choice = listener_of(SCALE_SET, [copy, real], controller_namespace="arc-systems")
    assert choice.listener is real
    assert choice.notes == [
        "AutoscalingListener aaa-team-b/arc-runners-listener names this scale set but is outside the controller"
        " namespace arc-systems: not shown"
    ]


def test_without_the_controller_namespace_two_claimants_show_none() -> None:
    copy, real = listener("aaa-team-b"), listener("arc-systems")
    choice = listener_of(SCALE_SET, [copy, real], controller_namespace=None)
    assert choice.listener is None
    assert choice.notes == [
        "AutoscalingListeners aaa-team-b/arc-runners-listener, arc-systems/arc-runners-listener all claim this scale"
        " set: none shown (--controller-namespace says which namespace is the controller's)"
    ]


def test_a_listener_of_another_scale_set_is_ignored_silently() -> None:
    other = listener("arc-systems")
    other["spec"]["autoscalingRunnerSetName"] = "other"
    assert listener_of(SCALE_SET, [other], controller_namespace=None) == listener_of(
        SCALE_SET, [], controller_namespace=None
    )


def test_many_decoys_are_counted_not_listed() -> None:
    decoys = [listener(f"team-{i:03}", uid=None) for i in range(500)]
    copies = [listener(f"team-{i:03}") for i in range(500)]
    real = listener("arc-systems")
    choice = listener_of(SCALE_SET, [*decoys, real], controller_namespace=None)
    assert choice.listener is real
    assert len(choice.notes) == 4
    assert choice.notes[-1] == "497 more AutoscalingListeners name this scale set: not shown"

    (claimants,) = listener_of(SCALE_SET, [*copies, real], controller_namespace=None).notes
    assert claimants.startswith("AutoscalingListeners team-000/arc-runners-listener, team-001/arc-runners-listener,")
    assert "and 498 more all claim this scale set: none shown" in claimants
