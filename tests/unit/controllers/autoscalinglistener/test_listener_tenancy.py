"""Tenancy of the listener: which listeners are served, where their credentials come from, which existing objects
they may take over, and how a refusal shows."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.controllers.autoscalinglistener.children import desired_role_binding
from arc_scaleset.controllers.autoscalinglistener.ownership import (
    foreign_reason,
    listener_refusal,
    with_scale_set_credentials,
)
from arc_scaleset.controllers.autoscalinglistener.status import ListenerReport, derive_conditions
from arc_scaleset.kube.conditions import get_condition
from tests.unit.controllers.ars_factory import ars_object
from tests.unit.controllers.listener_factory import listener_object, parsed_listener

UID_ANNOTATION = "actions.github.com/autoscaling-runner-set-uid"
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def owned_listener(**spec: Any) -> dict[str, Any]:
    obj = listener_object(**spec)
    obj["metadata"]["annotations"] = {UID_ANNOTATION: "ars-uid"}
    return obj


# -- which listeners are served -----------------------------------------------------------------------------


def test_a_listener_made_by_its_scale_set_in_the_controller_namespace_is_served() -> None:
    assert listener_refusal(owned_listener(), controller_namespace="arc-system", scale_set=ars_object()) is None


def test_a_listener_outside_the_controller_namespace_is_refused_whatever_it_claims() -> None:
    listener = owned_listener()
    listener["metadata"]["namespace"] = "team-a"
    refusal = listener_refusal(listener, controller_namespace="arc-system", scale_set=ars_object())
    assert refusal is not None
    assert refusal.reason == "NotInControllerNamespace"
    assert "team-a/arc-runners-abc12345-listener" in refusal.message
    assert "no credentials and no pod" in refusal.message
    # Without looking at the scale set at all.
    assert listener_refusal(listener, controller_namespace="arc-system", scale_set=None) == refusal


def test_a_listener_its_scale_set_did_not_make_is_refused() -> None:
    for claimed in ({}, {UID_ANNOTATION: "another-uid"}):
        listener = listener_object()
        listener["metadata"]["annotations"] = claimed
        refusal = listener_refusal(listener, controller_namespace="arc-system", scale_set=ars_object())
        assert refusal is not None, claimed
        assert refusal.reason == "NotOwnedByScaleSet"
        assert "AutoscalingRunnerSet team/arc-runners" in refusal.message
    # A scale set recreated under the same name is another scale set.
    recreated = ars_object()
    recreated["metadata"]["uid"] = "new-uid"
    refusal = listener_refusal(owned_listener(), controller_namespace="arc-system", scale_set=recreated)
    assert refusal is not None
    assert refusal.reason == "NotOwnedByScaleSet"


def test_credentials_ca_and_proxy_come_from_the_scale_set_not_the_listeners_spec() -> None:
    listener = parsed_listener(
        owned_listener(
            githubConfigUrl="https://attacker.example/org",
            githubConfigSecret="team-b-secret",
            githubServerTLS={"certificateFrom": {"configMapKeyRef": {"name": "evil-ca", "key": "ca"}}},
            proxy={"https": {"url": "http://evil:3128"}},
        )
    )
    ars = AutoscalingRunnerSet.from_object(ars_object(githubConfigSecret="gh-secret"))
    trusted = with_scale_set_credentials(listener, ars)
    spec = trusted.spec
    assert (spec.github_config_url, spec.github_config_secret) == ("https://github.com/my-org", "gh-secret")
    assert spec.github_server_tls is None
    assert spec.proxy is None
    assert spec.vault_config is None
    assert (spec.autoscaling_runner_set_namespace, spec.autoscaling_runner_set_name) == ("team", "arc-runners")
    assert spec.max_runners == listener.spec.max_runners  # the rest is the listener's
    assert listener.spec.github_config_secret == "team-b-secret"  # the input is not modified


# -- which objects are adopted ------------------------------------------------------------------------------


def owned_by(listener: dict[str, Any], kind: str) -> dict[str, Any]:
    meta = listener["metadata"]
    ref = {"apiVersion": "actions.github.com/v1alpha1", "kind": "AutoscalingListener", "name": meta["name"],
           "uid": meta["uid"], "controller": True}  # fmt: skip
    return {"kind": kind, "metadata": {"name": "x", "namespace": "arc-system", "ownerReferences": [ref]}}


def test_objects_in_the_controller_namespace_are_adopted_only_with_this_listeners_controller_reference() -> None:
    listener = owned_listener()
    for kind in ("ServiceAccount", "Secret", "Pod"):
        mine = owned_by(listener, kind)
        assert foreign_reason(kind, mine, listener) is None
        stranger = copy.deepcopy(mine)
        stranger["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
        reason = foreign_reason(kind, stranger, listener)
        assert reason is not None
        assert f"{kind} arc-system/x" in reason
        assert "left untouched" in reason
        not_controller = copy.deepcopy(mine)
        not_controller["metadata"]["ownerReferences"][0]["controller"] = False
        assert foreign_reason(kind, not_controller, listener) is not None
        assert foreign_reason(kind, {"metadata": {"name": "x", "namespace": "arc-system"}}, listener) is not None


def test_rbac_in_the_scale_set_namespace_is_adopted_only_with_labels_naming_this_listener() -> None:
    listener = owned_listener()
    labels = {
        "auto-scaling-listener-namespace": "arc-system",
        "auto-scaling-listener-name": listener["metadata"]["name"],
    }

    def role(role_labels: dict[str, str]) -> dict[str, Any]:
        return {"kind": "Role", "metadata": {"name": "r", "namespace": "team", "labels": role_labels}, "rules": []}

    assert foreign_reason("Role", role(labels), listener) is None
    for other in ({}, {**labels, "auto-scaling-listener-namespace": "team-a"}):
        reason = foreign_reason("Role", role(other), listener)
        assert reason is not None
        assert "Role team/r" in reason


def test_a_role_binding_to_another_role_is_never_adopted_since_its_role_ref_cannot_change() -> None:
    listener = owned_listener()
    desired = desired_role_binding(parsed_listener(listener))
    live = copy.deepcopy(desired)
    assert foreign_reason("RoleBinding", live, listener, desired=desired) is None
    live["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"}
    reason = foreign_reason("RoleBinding", live, listener, desired=desired)
    assert reason is not None
    assert "binds 'admin'" in reason


# -- how a refusal shows ------------------------------------------------------------------------------------


def test_a_refusal_makes_the_listener_not_ready_and_degraded_with_its_reason_even_while_a_pod_ran() -> None:
    report = ListenerReport(generation=3, pod_running=True, problem=("ObjectInTheWay", "Role team/r is not ours"))
    report.refused = True
    conditions = derive_conditions(None, report, now=NOW)
    for type_, status in (("Ready", "False"), ("Degraded", "True")):
        condition = get_condition(conditions, type_)
        assert condition is not None
        assert (condition["status"], condition["reason"], condition["message"]) == (
            status,
            "ObjectInTheWay",
            "Role team/r is not ours",
        )


def test_a_configuration_problem_that_is_no_refusal_leaves_a_running_listener_ready() -> None:
    report = ListenerReport(generation=3, pod_running=True, problem=("SecretNotFound", "no Secret gh-secret"))
    conditions = derive_conditions(None, report, now=NOW)
    assert (get_condition(conditions, "Ready") or {}).get("status") == "True"
    assert (get_condition(conditions, "Degraded") or {}).get("status") == "False"
