"""Which pod runs a listener, for ``status`` and ``explain``: its own, or its shared listener's."""

from __future__ import annotations

from typing import Any

from arc_scaleset.diagnose.snapshot import serves

GROUP = "0123456789"


def listener(labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "set-abc-listener", "namespace": "arc", "uid": "al-uid", "labels": labels or {}}}


def pod(name: str, *, owner: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "arc", "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "kind": "AutoscalingListener", "name": "x", "controller": True}]
    return {"metadata": meta}


def test_a_listener_is_run_by_the_pod_it_owns() -> None:
    assert serves(pod("set-abc-listener", owner="al-uid"), listener())
    assert not serves(pod("set-abc-listener", owner="other"), listener())


def test_a_member_is_run_by_its_groups_pod_only() -> None:
    member = listener({"listener.arc-scaleset.dev/group": GROUP})
    group_labels = {"listener.arc-scaleset.dev/group": GROUP}
    assert serves(pod(f"arc-shared-listener-{GROUP}", labels=group_labels), member)
    assert not serves(pod("arc-shared-listener-other", labels={"listener.arc-scaleset.dev/group": "other"}), member)
    assert not serves(pod(f"arc-shared-listener-{GROUP}"), member), "a pod without the group label is not the group's"
    assert not serves(pod(f"arc-shared-listener-{GROUP}", labels=group_labels), listener())
