"""Which EphemeralRunnerSet of a scale set is current (docs/migration.md): the newest not being deleted, whatever
its name; older ones are superseded (to be drained), deleting ones are draining."""

from __future__ import annotations

from typing import Any

from arc_scaleset.api.runner_sets import is_superseded, runner_sets_of, scale_set_of, siblings_of, sort_runner_sets
from arc_scaleset.kube.ownerrefs import Owner
from arc_scaleset.kube.views import ObjectView

ARS_UID = "ars-uid"
SCALE_SET = Owner("arc-runners", "actions.github.com", "AutoscalingRunnerSet", "arc-runners", ARS_UID)


def runner_set(
    name: str, created: str, *, deleting: bool = False, owner_kind: str = "AutoscalingRunnerSet",
    api_version: str = "actions.github.com/v1alpha1", namespace: str = "arc-runners", owner_name: str = "arc-runners",
) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "creationTimestamp": created,
        "ownerReferences": [
            {"apiVersion": api_version, "kind": owner_kind, "name": owner_name, "uid": ARS_UID, "controller": True}
        ],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T13:00:00Z"
    return {"metadata": meta}


def names(sets: Any) -> list[str]:
    return [ObjectView(s).name for s in sets]


def test_arcs_generated_set_alone_is_the_current_one_under_its_own_name() -> None:
    sets = sort_runner_sets([runner_set("arc-runners-x7k2p", "2026-01-01T10:00:00Z")])
    assert sets.current_name == "arc-runners-x7k2p"
    assert (sets.superseded, sets.draining) == ((), ())


def test_the_newest_set_is_current_and_older_ones_are_superseded_whatever_their_names() -> None:
    sets = sort_runner_sets([
        runner_set("arc-runners-x7k2p", "2026-01-01T10:00:00Z"),
        runner_set("arc-runners", "2026-01-01T11:00:00Z"),  # made beside ARC's by an earlier controller
        runner_set("arc-runners-b9d4q", "2026-01-01T09:00:00Z"),
    ])  # fmt: skip
    assert sets.current_name == "arc-runners"
    assert names(sets.superseded) == ["arc-runners-x7k2p", "arc-runners-b9d4q"]


def test_a_set_being_deleted_is_draining_and_never_current() -> None:
    sets = sort_runner_sets([
        runner_set("arc-runners-new", "2026-01-01T11:00:00Z", deleting=True),
        runner_set("arc-runners-old", "2026-01-01T10:00:00Z"),
    ])  # fmt: skip
    assert sets.current_name == "arc-runners-old"
    assert names(sets.draining) == ["arc-runners-new"]
    only_draining = sort_runner_sets([runner_set("arc-runners", "2026-01-01T11:00:00Z", deleting=True)])
    assert only_draining.current is None
    assert names(only_draining.all()) == ["arc-runners"]


def test_sets_made_in_the_same_second_are_ordered_by_name_so_every_pass_picks_the_same_one() -> None:
    a = runner_set("arc-runners-aaaaa", "2026-01-01T10:00:00Z")
    b = runner_set("arc-runners-bbbbb", "2026-01-01T10:00:00Z")
    assert sort_runner_sets([a, b]).current_name == sort_runner_sets([b, a]).current_name == "arc-runners-bbbbb"


def test_a_set_knows_it_is_superseded_by_a_newer_sibling_but_not_by_a_draining_one() -> None:
    old = runner_set("arc-runners-x7k2p", "2026-01-01T10:00:00Z")
    new = runner_set("arc-runners", "2026-01-01T11:00:00Z")
    assert is_superseded(old, [old, new])
    assert not is_superseded(new, [old, new])
    assert not is_superseded(old, [old])
    assert not is_superseded(old, [runner_set("arc-runners", "2026-01-01T11:00:00Z", deleting=True)])


def test_the_scale_set_of_a_set_is_its_controller_autoscalingrunnerset_in_any_version_of_the_group() -> None:
    assert scale_set_of(runner_set("a", "2026-01-01T10:00:00Z")) == SCALE_SET
    # ARC 0.11 to 0.14.1 filled apiVersion from the in-memory object (#4475): the group is what counts.
    assert scale_set_of(runner_set("a", "2026-01-01T10:00:00Z", api_version="actions.github.com/v1")) == SCALE_SET
    assert scale_set_of(runner_set("a", "2026-01-01T10:00:00Z", owner_kind="Deployment")) is None
    assert scale_set_of(runner_set("a", "2026-01-01T10:00:00Z", api_version="apps/v1")) is None
    assert scale_set_of({"metadata": {"name": "hand-made"}}) is None


class Cache:
    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = objects

    def by_owner(self, uid: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if any(ref.get("uid") == uid for ref in o["metadata"]["ownerReferences"])]


def test_a_set_belongs_to_a_scale_set_by_namespace_group_kind_name_and_uid_not_by_uid_alone() -> None:
    own = runner_set("arc-runners", "2026-01-01T10:00:00Z")
    elsewhere = runner_set("takeover", "2026-01-01T11:00:00Z", namespace="team-b")  # another team's namespace
    misnamed = runner_set("misnamed", "2026-01-01T11:00:00Z", owner_name="other-scale-set")
    other_group = runner_set("other-group", "2026-01-01T11:00:00Z", api_version="example.com/v1")
    cache = Cache(own, elsewhere, misnamed, other_group)
    assert names(runner_sets_of(cache, SCALE_SET)) == ["arc-runners"]
    # The newer foreign set is no sibling: the scale set's own set stays current, not superseded.
    assert names(siblings_of(cache, own)) == ["arc-runners"]
    assert not is_superseded(own, siblings_of(cache, own))
    assert names(siblings_of(cache, elsewhere)) == ["takeover"]
    assert siblings_of(cache, {"metadata": {"name": "hand-made", "namespace": "arc-runners"}}) == []
