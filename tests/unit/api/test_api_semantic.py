"""Semantic equality of ARC's objects: Kubernetes' rules, plus pointer and map rules read off ARC's own types."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.crd.k8s_schema import structural_schema
from arc_scaleset.api.semantic import ARC_FIELDS, deep_derivative, deep_equal
from arc_scaleset.kube import semantic as kubernetes


def runner_spec(**fields: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "githubConfigUrl": "https://github.com/my-org",
        "githubConfigSecret": "gh-secret",
        "runnerScaleSetId": 7,
        "spec": {"containers": [{"name": "runner", "image": "runner:2", "resources": {"limits": {"cpu": "1"}}}]},
    }
    spec.update(fields)
    return spec


@pytest.mark.parametrize("key", ["proxy", "githubServerTLS", "vaultConfig", "ephemeralRunnerConfigSecretMetadata"])
def test_an_optional_arc_struct_set_empty_differs_from_unset(key: str) -> None:
    assert not deep_equal(runner_spec(**{key: {}}), runner_spec())
    assert deep_equal(runner_spec(**{key: None}), runner_spec())
    assert not deep_derivative(runner_spec(**{key: {}}), runner_spec())


def test_kubernetes_rules_still_hold_inside_arc_objects() -> None:
    respelled = runner_spec()
    respelled["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "1000m"
    respelled["spec"]["containers"][0]["env"] = []
    assert deep_equal(respelled, runner_spec())


def test_metric_sets_compare_as_maps() -> None:
    with_gauge = {"metrics": {"gauges": {"gha_idle_runners": {"labels": []}}}}
    assert not deep_equal(with_gauge, {"metrics": {"gauges": {}}})
    assert deep_equal(with_gauge, {"metrics": {"gauges": {"gha_idle_runners": {"labels": None}}}})


def test_the_pointer_and_map_keys_are_read_from_the_types() -> None:
    assert {"proxy", "http", "https", "githubServerTLS", "certificateFrom", "vaultConfig", "listenerTemplate",
            "listenerMetrics", "metrics"} <= ARC_FIELDS.pointers  # fmt: skip
    assert {"counters", "gauges", "histograms"} <= ARC_FIELDS.maps


@pytest.mark.parametrize("key", ["maxRunners", "minRunners", "template", "labels"])
def test_a_key_whose_kind_depends_on_the_type_it_is_in_is_left_out(key: str) -> None:
    # maxRunners is *int in the AutoscalingRunnerSet and int in the AutoscalingListener; template a pointer in
    # the listener only; labels a map in ResourceMeta and a list in a metric.
    assert key not in ARC_FIELDS.pointers
    assert key not in ARC_FIELDS.maps


def test_the_kubernetes_module_names_no_arc_field() -> None:
    arc_keys = ARC_FIELDS.pointers | ARC_FIELDS.maps
    k8s = kubernetes.KUBERNETES_FIELDS
    named_by_kubernetes = k8s.pointers | k8s.maps | k8s.quantity_maps | k8s.quantities
    assert arc_keys & named_by_kubernetes <= _pod_template_keys()
    # Kubernetes' rules alone take ARC's proxy for an ordinary field, where an empty struct equals none.
    assert kubernetes.deep_equal({"proxy": {}}, {})


def test_arc_rules_agree_with_kubernetes_rules_on_every_key_a_pod_template_also_uses() -> None:
    k8s = kubernetes.KUBERNETES_FIELDS
    shared = (ARC_FIELDS.pointers | ARC_FIELDS.maps) & _pod_template_keys()
    assert shared  # configMapKeyRef, optional, annotations
    for key in shared:
        assert (key in ARC_FIELDS.pointers) == (key in k8s.pointers), key
        assert (key in ARC_FIELDS.maps) == (key in k8s.maps), key


def _pod_template_keys() -> set[str]:
    keys: set[str] = set()

    def walk(node: Any) -> None:
        if not isinstance(node, dict):
            return
        for key, child in (node.get("properties") or {}).items():
            keys.add(key)
            walk(child)
        walk(node.get("items"))
        walk(node.get("additionalProperties"))

    walk(structural_schema("io.k8s.api.core.v1.PodTemplateSpec", descriptions=False))
    return keys
