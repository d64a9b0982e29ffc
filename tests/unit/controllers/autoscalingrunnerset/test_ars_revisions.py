"""The revision design (docs/revisions.md): next-revision rule, semantic runner-spec drift, metadata merge,
Outdated teardown, listener recreation -- decided without any API."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.controllers.autoscalingrunnerset.decisions import (
    ErsAction,
    ErsPlan,
    listener_differences,
    next_actionable_revision,
    outdated_teardown_due,
    plan_ephemeral_runner_set,
)
from arc_scaleset.controllers.autoscalingrunnerset.desired import (
    desired_autoscaling_listener,
    desired_ephemeral_runner_set,
)
from arc_scaleset.kube.merge_patch import merge_patch
from tests.unit.controllers.ars_factory import ars_object, parsed


def desired_ers(**spec: Any) -> dict[str, Any]:
    obj = ars_object(**spec)
    return desired_ephemeral_runner_set(obj, parsed(obj), scale_set_id=7, url_labels={})


def stored(desired: dict[str, Any], *, revision: int = 0, applied: int = 0, phase: str = "Running") -> dict[str, Any]:
    """The set as the API server would return it after creation (and some ERS-controller activity)."""
    live = copy.deepcopy(desired)
    live["metadata"].update({"uid": "ers-uid", "resourceVersion": "20", "generation": 1})
    live["spec"]["actionableRevision"] = revision
    live["status"] = {"phase": phase, "appliedActionableRevision": applied}
    return live


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, as the API server applies it."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def converge(
    live: dict[str, Any], desired: dict[str, Any], *, passes: int = 10
) -> tuple[dict[str, Any], list[ErsPlan]]:
    plans = []
    for _ in range(passes):
        plan = plan_ephemeral_runner_set(live, desired, ars_phase="Running")
        plans.append(plan)
        if plan.action is ErsAction.NONE:
            break
        patch = dict(plan.patch)
        patch["metadata"] = {k: v for k, v in patch.get("metadata", {}).items() if k != "resourceVersion"}
        live = apply_merge_patch(live, patch)
    return live, plans


@given(spec=st.integers(0, 1000), applied=st.integers(0, 1000))
def test_the_next_revision_is_past_both_the_spec_and_the_applied_revision(spec: int, applied: int) -> None:
    ers = {"spec": {"actionableRevision": spec}, "status": {"appliedActionableRevision": applied}}
    nxt = next_actionable_revision(ers)
    assert nxt > spec
    assert nxt > applied
    assert nxt == (spec + 1 if spec > applied else applied + 1)


def test_the_first_revision_of_a_missing_set_is_one() -> None:
    assert next_actionable_revision(None) == 1


def test_a_missing_set_is_created() -> None:
    assert plan_ephemeral_runner_set(None, desired_ers(), ars_phase="Pending").action is ErsAction.CREATE


def test_a_set_matching_the_spec_needs_nothing() -> None:
    desired = desired_ers()
    assert plan_ephemeral_runner_set(stored(desired), desired, ars_phase="Running").action is ErsAction.NONE


def test_a_real_runner_spec_change_bumps_the_revision_exactly_once() -> None:
    live = stored(desired_ers(), revision=2, applied=2)
    changed = desired_ers()
    changed["spec"]["ephemeralRunnerSpec"]["spec"]["containers"][0]["image"] = "runner:2"
    final, plans = converge(live, changed)
    assert [p.action for p in plans] == [ErsAction.BUMP_REVISION, ErsAction.NONE]
    assert (plans[0].revision_from, plans[0].revision_to) == (2, 3)
    assert final["spec"]["actionableRevision"] == 3
    assert final["spec"]["ephemeralRunnerSpec"]["spec"]["containers"][0]["image"] == "runner:2"
    assert plans[0].patch["metadata"]["resourceVersion"] == "20"


def test_a_change_while_the_previous_one_is_still_applied_goes_past_the_spec_revision() -> None:
    live = stored(desired_ers(), revision=5, applied=3)
    changed = desired_ers(githubConfigSecret="rotated")
    plan = plan_ephemeral_runner_set(live, changed, ars_phase="Running")
    assert plan.action is ErsAction.BUMP_REVISION
    assert plan.revision_to == 6
    assert plan.changed_fields == ("githubConfigSecret",)


def test_removed_template_fields_are_removed_from_the_set_by_the_patch() -> None:
    with_env = desired_ers()
    with_env["spec"]["ephemeralRunnerSpec"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    live = stored(with_env)
    final, _ = converge(live, desired_ers())
    assert "env" not in final["spec"]["ephemeralRunnerSpec"]["spec"]["containers"][0]


def test_semantically_equal_templates_never_bump_the_revision() -> None:
    live = stored(desired_ers())
    variant = desired_ers()
    container = variant["spec"]["ephemeralRunnerSpec"]["spec"]["containers"][0]
    container["env"] = []
    container["resources"] = {"limits": {"memory": "1024Mi", "cpu": "1000m"}}
    variant["spec"]["ephemeralRunnerSpec"]["metadata"] = {}
    for _ in range(20):
        assert plan_ephemeral_runner_set(live, variant, ars_phase="Running").action is ErsAction.NONE


def test_runner_metadata_changes_are_merged_without_a_revision_bump() -> None:
    live = stored(desired_ers())
    desired = desired_ers(ephemeralRunnerMetadata={"annotations": {"a": "1"}})
    final, plans = converge(live, desired)
    assert [p.action for p in plans] == [ErsAction.MERGE_METADATA, ErsAction.NONE]
    assert final["spec"]["ephemeralRunnerMetadata"] == {"annotations": {"a": "1"}}
    assert final["spec"]["actionableRevision"] == 0


def test_a_label_added_by_someone_else_survives_and_causes_no_patch_loop() -> None:
    live = stored(desired_ers())
    live["metadata"]["labels"]["team.example.com/cost-center"] = "42"
    live["metadata"]["annotations"]["webhook.example.com/injected"] = "yes"
    desired = desired_ers(ephemeralRunnerSetMetadata={"labels": {"new": "1"}})
    final, plans = converge(live, desired)
    assert [p.action for p in plans] == [ErsAction.MERGE_METADATA, ErsAction.NONE]
    assert final["metadata"]["labels"]["team.example.com/cost-center"] == "42"
    assert final["metadata"]["labels"]["new"] == "1"
    assert final["metadata"]["annotations"]["webhook.example.com/injected"] == "yes"


def test_an_outdated_set_is_torn_down_only_once_it_applied_its_current_revision() -> None:
    desired = desired_ers()
    assert not outdated_teardown_due(stored(desired, revision=3, applied=2, phase="Outdated"), ars_phase="Running")
    assert outdated_teardown_due(stored(desired, revision=3, applied=3, phase="Outdated"), ars_phase="Running")
    assert not outdated_teardown_due(stored(desired, revision=3, applied=3, phase="Outdated"), ars_phase="Pending")
    assert not outdated_teardown_due(stored(desired, revision=3, applied=3, phase="Running"), ars_phase="Running")
    plan = plan_ephemeral_runner_set(stored(desired, revision=3, applied=3, phase="Outdated"), desired,
                                     ars_phase="Running")  # fmt: skip
    assert plan.action is ErsAction.TEAR_DOWN


def test_a_runner_spec_change_wins_over_a_stale_outdated_verdict() -> None:
    changed = desired_ers(githubConfigSecret="other")
    live = stored(desired_ers(), revision=3, applied=2, phase="Outdated")
    assert plan_ephemeral_runner_set(live, changed, ars_phase="Running").action is ErsAction.BUMP_REVISION


def test_a_set_being_deleted_is_waited_for() -> None:
    live = stored(desired_ers())
    live["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert plan_ephemeral_runner_set(live, desired_ers(), ars_phase="Running").action is ErsAction.WAIT_FOR_DELETION


def listener(**spec: Any) -> dict[str, Any]:
    return desired_autoscaling_listener(
        parsed(ars_object(**spec)), namespace="arc-system", scale_set_id=7, ephemeral_runner_set="arc-runners",
        image="img", url_labels={},
    )  # fmt: skip


def test_min_and_max_changes_are_listener_relevant_and_a_runner_template_change_is_not() -> None:
    live = listener(minRunners=1, maxRunners=5)
    assert listener_differences(live, listener(minRunners=1, maxRunners=5)) == ()
    assert listener_differences(live, listener(minRunners=2, maxRunners=5)) == ("spec.minRunners",)
    assert listener_differences(live, listener(minRunners=1, maxRunners=9)) == ("spec.maxRunners",)
    other_template = ars_object(minRunners=1, maxRunners=5)["spec"]["template"]
    other_template["spec"]["containers"][0]["image"] = "runner:2"
    assert listener_differences(live, listener(minRunners=1, maxRunners=5, template=other_template)) == ()


def test_labels_added_to_the_listener_by_others_do_not_recreate_it() -> None:
    live = listener()
    live["metadata"]["labels"]["added.by/someone"] = "x"
    live["metadata"]["annotations"]["added.by/someone"] = "x"
    assert listener_differences(live, listener()) == ()
    wanted = listener(autoscalingListener={"labels": {"mine": "1"}})
    assert listener_differences(live, wanted) == ("metadata.labels",)


def test_a_listener_made_by_arcs_controller_is_replaced_even_when_its_spec_matches() -> None:
    live = listener()
    live["metadata"]["annotations"]["actions.github.com/runner-spec-hash"] = "6b9f8c7d5"
    live["metadata"]["annotations"]["actions.github.com/values-hash"] = "0a1b2c"
    assert listener_differences(live, listener()) == ("made by ARC's controller",)
    # Once replaced, the new listener (no ARC hash) is left alone.
    assert listener_differences(listener(), listener()) == ()


def arc_written(desired: dict[str, Any]) -> dict[str, Any]:
    """The set as ARC 0.14.2's resource builder and controller leave it: a generated name, ARC's hash and its
    finalizer, no revision fields, ARC's counts in the status."""
    live = copy.deepcopy(desired)
    live["metadata"].update(
        name="arc-runners-x7k2p", generateName="arc-runners-", uid="ers-uid", resourceVersion="20", generation=1,
        finalizers=["ephemeralrunner.actions.github.com/finalizer"],
    )  # fmt: skip
    live["metadata"]["annotations"]["actions.github.com/runner-spec-hash"] = "75d6c9c8b"
    del live["spec"]["actionableRevision"]
    live["spec"].update(replicas=3, patchID=12)
    live["spec"]["ephemeralRunnerSpec"].setdefault("metadata", {})  # Go writes the inlined template's ObjectMeta
    live["status"] = {"currentReplicas": 3, "pendingEphemeralRunners": 0, "runningEphemeralRunners": 3,
                      "failedEphemeralRunners": 0, "phase": "Running"}  # fmt: skip
    return live


def test_a_set_made_by_arc_is_adopted_without_a_revision_bump_and_its_hash_is_never_drift() -> None:
    desired = desired_ers()
    live = arc_written(desired)
    plan = plan_ephemeral_runner_set(live, desired, ars_phase="Running")
    assert plan.action is ErsAction.NONE
    # ARC's labels on the set differ from ours: merged once, ARC's hash annotation left as it is.
    live["metadata"]["labels"].pop("app.kubernetes.io/component")
    merge = plan_ephemeral_runner_set(live, desired, ars_phase="Running")
    assert merge.action is ErsAction.MERGE_METADATA
    assert "annotations" not in merge.patch["metadata"]


def test_a_template_change_during_a_takeover_bumps_arcs_set_to_revision_one_in_place() -> None:
    live = arc_written(desired_ers())
    other = ars_object()["spec"]["template"]
    other["spec"]["containers"][0]["image"] = "runner:2"
    plan = plan_ephemeral_runner_set(live, desired_ers(template=other), ars_phase="Pending")
    assert plan.action is ErsAction.BUMP_REVISION
    assert (plan.revision_from, plan.revision_to) == (0, 1)
    assert "name" not in plan.patch["metadata"]


def test_merge_patch_helper_matches_the_api_semantics() -> None:
    # guard for the test helper itself: patch(a -> b) applied to a gives b
    a = {"x": {"y": 1, "z": [1]}, "k": "v"}
    b = {"x": {"y": 2}, "n": None}
    assert apply_merge_patch(a, merge_patch(a, b)) == {"x": {"y": 2}}


def before_patch_id(live: dict[str, Any]) -> dict[str, Any]:
    """``live`` as ARC < 0.9 made it: no ``spec.patchID``."""
    live["spec"].pop("patchID", None)
    return live


def test_a_set_arc_made_before_patch_id_gets_patch_id_zero_in_a_patch_of_its_own() -> None:
    desired = desired_ers()
    live = before_patch_id(arc_written(desired))
    plan = plan_ephemeral_runner_set(live, desired, ars_phase="Running")
    assert plan.action is ErsAction.MERGE_METADATA
    assert plan.patch["spec"] == {"patchID": 0}
    assert plan.patch["metadata"] == {"resourceVersion": live["metadata"]["resourceVersion"]}
    adopted, plans = converge(live, desired)
    assert adopted["spec"]["patchID"] == 0
    assert [p.action for p in plans] == [ErsAction.MERGE_METADATA, ErsAction.NONE]


def test_a_revision_bump_of_a_set_without_patch_id_adds_it_in_the_same_patch() -> None:
    live = before_patch_id(arc_written(desired_ers()))
    other = ars_object()["spec"]["template"]
    other["spec"]["containers"][0]["image"] = "runner:2"
    plan = plan_ephemeral_runner_set(live, desired_ers(template=other), ars_phase="Pending")
    assert plan.action is ErsAction.BUMP_REVISION
    assert plan.patch["spec"]["patchID"] == 0
    assert plan.patch["spec"]["actionableRevision"] == 1


def test_a_label_merge_of_a_set_without_patch_id_adds_it_in_the_same_patch() -> None:
    desired = desired_ers()
    live = before_patch_id(arc_written(desired))
    live["metadata"]["labels"].pop("app.kubernetes.io/component")
    plan = plan_ephemeral_runner_set(live, desired, ars_phase="Running")
    assert plan.action is ErsAction.MERGE_METADATA
    assert plan.patch["spec"] == {"patchID": 0}
    assert "labels" in plan.patch["metadata"]


def test_a_set_with_a_patch_id_is_never_given_another() -> None:
    desired = desired_ers()
    live = arc_written(desired)
    live["spec"]["patchID"] = 41
    assert plan_ephemeral_runner_set(live, desired, ars_phase="Running").action is ErsAction.NONE
