"""What a group's pass costs per member (issue 30: a pass that parsed every member, at every member's status write,
made each member's set-up cost grow with the size of its group): MemberVerdicts judges again only the members that
changed, and concerns_group lets a member's status write queue no pass."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from arc_scaleset.api.listener_group import ANNOTATION_SHARED
from arc_scaleset.controllers.sharedlistener.members import MemberVerdicts, concerns_group, select_members
from tests.unit.controllers.sharedlistener.test_shared_listener_plan import group_label, listener_of, scale_set


class Group:
    """Scale sets and their listeners as a cache holds them (each with a resourceVersion)."""

    def __init__(self, count: int) -> None:
        self.sets = {f"s{i:03}": scale_set(f"s{i:03}") for i in range(count)}
        self.listeners = {name: listener_of(ars) for name, ars in self.sets.items()}
        for listener in self.listeners.values():
            listener["metadata"]["resourceVersion"] = "1"
        self.name = group_label(next(iter(self.listeners.values())))

    def scale_set_of(self, listener: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return self.sets.get(listener["spec"]["autoscalingRunnerSetName"])

    def select(self, verdicts: MemberVerdicts, names: list[str] | None = None) -> list[str]:
        found = verdicts.select(self._candidates(names), **self._arguments())
        assert found == select_members(self._candidates(names), **self._arguments()), "the pure function's answer"
        return [member.name for member in found]

    def _candidates(self, names: list[str] | None) -> list[dict[str, Any]]:
        return [self.listeners[name] for name in names or self.listeners]

    def _arguments(self) -> dict[str, Any]:
        return {"group": self.name, "controller_namespace": "arc-system", "scale_set_of": self.scale_set_of}


def changed(obj: dict[str, Any]) -> dict[str, Any]:
    """A new version of ``obj`` (as an informer replaces it: a new dict under a new resourceVersion)."""
    new = copy.deepcopy(obj)
    new["metadata"]["resourceVersion"] = str(int(new["metadata"]["resourceVersion"]) + 1)
    return new


def test_a_pass_over_members_that_did_not_change_judges_none_of_them_again() -> None:
    group, verdicts = Group(100), MemberVerdicts()
    first = group.select(verdicts)
    assert len(first) == 100
    assert verdicts.judged == 100
    for _ in range(5):
        assert group.select(verdicts) == first
    assert verdicts.judged == 100, "each later pass recalls every verdict: its cost does not grow with the group"


def test_a_listener_or_scale_set_that_changed_is_judged_again_and_its_verdict_follows_the_change() -> None:
    group, verdicts = Group(3), MemberVerdicts()
    assert len(group.select(verdicts)) == 3
    judged = verdicts.judged
    deleting = changed(group.listeners["s000"])
    deleting["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    group.listeners["s000"] = deleting
    opted_out = changed(group.sets["s001"])
    opted_out["metadata"]["annotations"].pop(ANNOTATION_SHARED)
    group.sets["s001"] = opted_out
    remaining = group.select(verdicts)
    assert verdicts.judged == judged + 2, "only the two that changed are judged again"
    assert remaining == [group.listeners["s002"]["metadata"]["name"]]


def test_only_the_current_candidates_verdicts_are_kept() -> None:
    group, verdicts = Group(3), MemberVerdicts()
    group.select(verdicts)
    assert len(group.select(verdicts, ["s001"])) == 1
    assert verdicts.judged == 3
    group.select(verdicts)
    assert verdicts.judged == 5, "the two that were not candidates in the last pass are judged afresh"


def test_objects_without_a_resource_version_are_judged_in_every_pass() -> None:
    group, verdicts = Group(2), MemberVerdicts()
    for listener in group.listeners.values():
        del listener["metadata"]["resourceVersion"]
    group.select(verdicts)
    group.select(verdicts)
    assert verdicts.judged == 4


def test_a_listeners_status_write_does_not_concern_its_group_and_any_other_change_does() -> None:
    listener = Group(1).listeners["s000"]
    status_only = changed(listener)
    status_only["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    status_only["metadata"]["managedFields"] = [{"manager": "arc-scaleset", "subresource": "status"}]
    assert not concerns_group(listener, status_only)
    for edit in (
        lambda obj: obj["metadata"].update(deletionTimestamp="2026-12-06T00:00:00Z"),
        lambda obj: obj["metadata"]["labels"].clear(),
        lambda obj: obj["metadata"]["annotations"].update(note="x"),
        lambda obj: obj["metadata"].update(finalizers=[]),
        lambda obj: obj["spec"].update(maxRunners=9),
        lambda obj: obj.pop("spec"),
    ):
        edited = changed(status_only)
        edit(edited)
        assert concerns_group(status_only, edited)
        assert concerns_group(edited, status_only)
