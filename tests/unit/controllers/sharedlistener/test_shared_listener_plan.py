"""The shared listener's pure core: who is a member, what the group's objects are, and what one pass does."""

from __future__ import annotations

import copy
from typing import Any

from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.api.listener_group import ANNOTATION_GROUP_SHARD, ANNOTATION_SHARED, LABEL_GROUP, group_id, shared_key
from arc_scaleset.controllers.autoscalinglistener.group_membership import trusted_group
from arc_scaleset.controllers.autoscalinglistener.pod import configured_listener_pod
from arc_scaleset.controllers.autoscalinglistener.restart import PodFailure
from arc_scaleset.controllers.autoscalingrunnerset.decisions import listener_differences
from arc_scaleset.controllers.autoscalingrunnerset.desired import desired_autoscaling_listener, in_shard
from arc_scaleset.controllers.autoscalingrunnerset.group_shard import kept_shard
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.controllers.sharedlistener.members import Member, select_members
from arc_scaleset.controllers.sharedlistener.plan import GroupPodAction, in_the_way, plan_group, plan_group_pod
from arc_scaleset.kube.resources import ROLES, SECRETS
from tests.unit.controllers.ars_factory import ars_object

SETTINGS = ControllerSettings(controller_namespace="arc-system", controller_image="img:1")


def scale_set(name: str, *, namespace: str = "team", shared: bool = True, **spec: Any) -> dict[str, Any]:
    annotations = {ANNOTATION_SHARED: "true"} if shared else {}
    obj = ars_object(name, namespace, annotations=annotations, **spec)
    obj["metadata"]["uid"] = f"uid-{namespace}-{name}"
    return obj


def listener_of(ars_obj: dict[str, Any]) -> dict[str, Any]:
    """The AutoscalingListener the scale set's controller makes, as read back (with a uid)."""
    listener = desired_autoscaling_listener(
        AutoscalingRunnerSet.from_object(ars_obj), namespace="arc-system", scale_set_id=7,
        ephemeral_runner_set=ars_obj["metadata"]["name"], image="img:1", url_labels={},
    )  # fmt: skip
    listener["metadata"]["uid"] = "al-" + ars_obj["metadata"]["uid"]
    return listener


def members_of(*sets: dict[str, Any], group: str) -> list[Member]:
    by_key = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in sets}
    return select_members(
        [listener_of(s) for s in sets],
        group=group,
        controller_namespace="arc-system",
        scale_set_of=lambda obj: by_key.get((obj["spec"]["autoscalingRunnerSetNamespace"],
                                             obj["spec"]["autoscalingRunnerSetName"])),
    )  # fmt: skip


def group_label(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["labels"][LABEL_GROUP])


def test_sets_of_one_namespace_and_secret_get_one_group_label_and_others_none_or_another() -> None:
    a, b = listener_of(scale_set("a")), listener_of(scale_set("b", maxRunners=3))
    assert group_label(a) == group_label(b)
    assert LABEL_GROUP not in listener_of(scale_set("c", shared=False))["metadata"]["labels"]
    assert group_label(listener_of(scale_set("d", namespace="other"))) != group_label(a)
    assert group_label(listener_of(scale_set("e", githubConfigSecret="other"))) != group_label(a)


def test_the_trusted_group_is_the_scale_sets_not_the_listeners_own_claim() -> None:
    ars = scale_set("a")
    listener = listener_of(ars)
    assert trusted_group(listener, ars) == group_label(listener)
    forged = copy.deepcopy(listener)
    forged["spec"]["githubConfigSecret"] = "another-teams-secret"
    assert trusted_group(forged, ars) == group_label(listener), "credential fields come from the scale set"
    opted_out = copy.deepcopy(ars)
    opted_out["metadata"]["annotations"].pop(ANNOTATION_SHARED)
    assert trusted_group(listener, opted_out) is None


def test_a_listener_in_another_shard_of_its_key_is_trusted_and_its_shard_never_leaves_its_key() -> None:
    ars = scale_set("a")
    first = listener_of(ars)
    key = shared_key(ars["metadata"]["annotations"], first["spec"])
    assert key is not None
    assert kept_shard(first, key) == 0, "a listener of before shards is in shard 0"
    third = in_shard(first, key, 2)
    assert group_label(third) == group_id(key, 2) != group_label(first)
    assert third["metadata"]["annotations"][ANNOTATION_GROUP_SHARD] == "2"
    assert trusted_group(third, ars) == group_label(third)
    assert kept_shard(third, key) == 2
    assert listener_differences(third, in_shard(listener_of(ars), key, 2)) == (), "a kept shard changes nothing"
    assert ANNOTATION_GROUP_SHARD not in in_shard(third, key, 0)["metadata"]["annotations"]
    # The shard annotation names a shard of the scale set's own key only: another team's group is out of reach.
    stranger = scale_set("x", namespace="other")
    assert trusted_group(third, stranger) != group_label(third)
    other_key = shared_key(stranger["metadata"]["annotations"], listener_of(stranger)["spec"])
    assert other_key is not None
    assert kept_shard(third, other_key) is None, "a set that changes key joins the new key's shards afresh"
    assert kept_shard(None, key) is None


def test_members_are_served_listeners_whose_scale_set_makes_that_group() -> None:
    a, b = scale_set("a"), scale_set("b")
    group = group_label(listener_of(a))
    assert [m.name for m in members_of(a, b, group=group)] == sorted(
        [listener_of(a)["metadata"]["name"], listener_of(b)["metadata"]["name"]]
    )
    stranger = scale_set("x", namespace="other")
    stolen = listener_of(stranger)
    stolen["metadata"]["labels"][LABEL_GROUP] = group
    found = select_members([stolen], group=group, controller_namespace="arc-system", scale_set_of=lambda _: stranger)
    assert found == [], "a label naming another namespace's group makes no member"
    not_made_by_it = listener_of(a)
    not_made_by_it["metadata"]["annotations"]["actions.github.com/autoscaling-runner-set-uid"] = "someone-else"
    assert select_members([not_made_by_it], group=group, controller_namespace="arc-system",
                          scale_set_of=lambda _: a) == []  # fmt: skip


def test_the_plan_names_every_members_set_and_prunes_keys_of_non_members() -> None:
    a, b = scale_set("a"), scale_set("b")
    group = group_label(listener_of(a))
    members = members_of(a, b, group=group)
    plan = plan_group(group, members, published=[members[0].name, "gone-listener"],
                      controller_namespace="arc-system", settings=SETTINGS)  # fmt: skip
    assert not plan.delete_all
    assert plan.prune == ("gone-listener",)
    roles = [d.body for d in plan.objects if d.resource is ROLES]
    assert [r["metadata"]["namespace"] for r in roles] == ["arc-system", "team"]
    (reader,) = roles[0]["rules"]
    assert (reader["resources"], reader["resourceNames"]) == (["secrets"], [f"arc-shared-listener-{group}"])
    assert reader["verbs"] == ["get", "list", "watch"]
    assert roles[1]["rules"][0]["resourceNames"] == ["a", "b"]
    (secret,) = [d.body for d in plan.objects if d.resource is SECRETS]
    assert "data" not in secret, "the members publish their own keys"
    assert plan.pod is not None


def test_no_pod_before_a_member_published_and_everything_goes_with_the_last_member() -> None:
    a = scale_set("a")
    group = group_label(listener_of(a))
    members = members_of(a, group=group)
    assert plan_group(group, members, published=[], controller_namespace="arc-system", settings=SETTINGS).pod is None
    gone = plan_group(group, [], published=["x"], controller_namespace="arc-system", settings=SETTINGS)
    assert gone.delete_all


def test_the_group_pod_never_depends_on_the_membership_and_is_the_per_set_pod_with_another_identity() -> None:
    a, b, c = scale_set("a"), scale_set("b"), scale_set("c")
    group = group_label(listener_of(a))

    def pod(*sets: dict[str, Any]) -> dict[str, Any]:
        members = members_of(*sets, group=group)
        plan = plan_group(group, members, published=[m.name for m in members], controller_namespace="arc-system",
                          settings=SETTINGS)  # fmt: skip
        assert plan.pod is not None
        return plan.pod

    assert pod(a, b) == pod(a, b, c) == pod(b, c)
    shared = pod(a)
    member = members_of(a, group=group)[0]
    own = configured_listener_pod(member.obj, member.listener, SETTINGS, config_version="1")
    assert shared["spec"]["securityContext"] == own["spec"]["securityContext"]
    assert shared["spec"]["containers"][0]["securityContext"] == own["spec"]["containers"][0]["securityContext"]
    assert shared["spec"]["containers"][0]["image"] == own["spec"]["containers"][0]["image"]
    assert "ownerReferences" not in shared["metadata"]
    assert "volumes" not in shared["spec"]


def test_the_pod_step_keeps_recreates_replaces_and_never_touches_a_foreign_pod() -> None:
    desired: dict[str, Any] = {
        "metadata": {"name": "p", "labels": {LABEL_GROUP: "g"}},
        "spec": {"containers": [{"name": "listener", "image": "i"}]},
    }
    live = {**copy.deepcopy(desired), "status": {"phase": "Running"}}
    live["metadata"]["uid"] = "u"

    def step(
        live_pod: dict[str, Any] | None,
        *,
        wanted: dict[str, Any] | None = desired,
        failure: PodFailure | None = None,
        backoff_remaining: float = 0.0,
    ) -> GroupPodAction:
        return plan_group_pod(live_pod, wanted, group="g", failure=failure, backoff_remaining=backoff_remaining).action

    assert step(None) is GroupPodAction.CREATE
    assert step(None, backoff_remaining=3.0) is GroupPodAction.WAIT_BACKOFF
    assert step(live) is GroupPodAction.KEEP
    assert step(live, failure=PodFailure("ListenerFailed", "exited 1")) is GroupPodAction.REPLACE_FAILED
    changed = copy.deepcopy(live)
    changed["spec"]["containers"][0]["image"] = "old"
    assert step(changed) is GroupPodAction.RECREATE
    foreign = copy.deepcopy(live)
    foreign["metadata"]["labels"] = {}
    assert step(foreign) is GroupPodAction.IN_THE_WAY
    assert step(live, wanted=None) is GroupPodAction.REMOVE
    assert step(None, wanted=None) is GroupPodAction.NOTHING


def test_leaving_a_group_is_a_listener_difference() -> None:
    shared, alone = listener_of(scale_set("a")), listener_of(scale_set("a", shared=False))
    assert f"metadata.labels[{LABEL_GROUP}]" in listener_differences(shared, alone)
    assert listener_differences(alone, shared) == ("metadata.labels",)
    assert listener_differences(shared, shared) == ()


def test_a_group_object_may_be_adopted_only_with_the_groups_label_and_a_binding_only_to_the_groups_role() -> None:
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "g"}
    desired = {"kind": "RoleBinding", "metadata": {"name": "g", "namespace": "team"}, "roleRef": role_ref}
    ours = {**desired, "metadata": {**desired["metadata"], "labels": {LABEL_GROUP: "g"}}}
    assert in_the_way(ours, desired, group="g") is None
    assert "no listener.arc-scaleset.dev/group label" in (in_the_way(desired, desired, group="g") or "")
    assert in_the_way(ours, desired, group="other") is not None, "another group's object"
    rebound = {**ours, "roleRef": {**role_ref, "kind": "ClusterRole", "name": "admin"}}
    refusal = in_the_way(rebound, desired, group="g") or ""
    assert "binds 'admin'" in refusal
    assert "cannot be changed" in refusal
