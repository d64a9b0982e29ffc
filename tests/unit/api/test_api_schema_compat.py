"""The breaking-change check that guards CRD upgrades."""

from __future__ import annotations

import copy
from typing import Any

from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.api.crd.compat import breaking_changes
from arc_scaleset.api.crd.generate import custom_resource_definition

BASE = custom_resource_definition(AutoscalingRunnerSet)


def changed(edit: Any) -> dict[str, Any]:
    crd = copy.deepcopy(BASE)
    edit(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"])
    return crd


def test_an_identical_crd_is_not_breaking() -> None:
    assert breaking_changes(BASE, copy.deepcopy(BASE)) == []


def test_a_new_optional_field_is_not_breaking() -> None:
    new = changed(lambda spec: spec["properties"].update({"newField": {"type": "string"}}))
    assert breaking_changes(BASE, new) == []


def test_a_removed_field_is_breaking() -> None:
    new = changed(lambda spec: spec["properties"].pop("runnerGroup"))
    assert breaking_changes(BASE, new) == ["v1alpha1: .spec.runnerGroup: field removed"]


def test_a_field_removed_deep_inside_the_pod_template_is_breaking() -> None:
    def remove(spec: dict[str, Any]) -> None:
        del spec["properties"]["template"]["properties"]["spec"]["properties"]["tolerations"]

    assert breaking_changes(BASE, changed(remove)) == ["v1alpha1: .spec.template.spec.tolerations: field removed"]


def test_a_narrowed_type_is_breaking() -> None:
    def narrow(spec: dict[str, Any]) -> None:
        limits = spec["properties"]["template"]["properties"]["spec"]["properties"]["containers"]["items"]
        limits["properties"]["resources"]["properties"]["limits"]["additionalProperties"] = {"type": "string"}

    [problem] = breaking_changes(BASE, changed(narrow))
    assert "resources.limits{}: type narrowed from int-or-string to string" in problem


def test_widening_to_int_or_string_is_not_breaking() -> None:
    def widen(spec: dict[str, Any]) -> None:
        spec["properties"]["minRunners"] = {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
        }

    assert breaking_changes(BASE, changed(widen)) == []


def test_a_new_required_field_is_breaking() -> None:
    new = changed(lambda spec: spec["required"].append("runnerGroup"))
    assert breaking_changes(BASE, new) == ["v1alpha1: .spec.runnerGroup: became required"]


def test_a_tightened_bound_is_breaking() -> None:
    new = changed(lambda spec: spec["properties"]["maxRunners"].update({"minimum": 1}))
    assert breaking_changes(BASE, new) == ["v1alpha1: .spec.maxRunners: minimum raised to 1"]


def test_a_new_pattern_or_enum_is_breaking() -> None:
    new = changed(lambda spec: spec["properties"]["runnerGroup"].update({"enum": ["a"], "pattern": "^a$"}))
    problems = breaking_changes(BASE, new)
    assert any("pattern changed" in p for p in problems)
    assert any("enum narrowed" in p for p in problems)


def test_a_changed_list_type_is_breaking() -> None:
    new = changed(lambda spec: spec["properties"]["runnerScaleSetLabels"].update({"x-kubernetes-list-type": "set"}))
    assert breaking_changes(BASE, new) == ["v1alpha1: .spec.runnerScaleSetLabels: list type changed"]


def test_a_removed_version_or_subresource_is_breaking() -> None:
    new = copy.deepcopy(BASE)
    new["spec"]["versions"][0]["name"] = "v1beta1"
    assert breaking_changes(BASE, new) == ["version v1alpha1 removed"]
    new = copy.deepcopy(BASE)
    new["spec"]["versions"][0]["subresources"] = {}
    assert breaking_changes(BASE, new) == ["version v1alpha1: status subresource removed"]


def test_renamed_kinds_are_breaking() -> None:
    new = copy.deepcopy(BASE)
    new["spec"]["names"]["plural"] = "runnersets"
    assert breaking_changes(BASE, new) == ["names.plural changed from 'autoscalingrunnersets' to 'runnersets'"]


def test_a_new_cel_rule_is_not_reported_because_the_api_server_ratchets_it() -> None:
    rule = {"rule": "self != 'x'"}
    new = changed(lambda spec: spec["properties"]["runnerGroup"].update({"x-kubernetes-validations": [rule]}))
    assert breaking_changes(BASE, new) == []
