"""Metadata a scale set may put on its listener's objects in the controller namespace: no workload-identity keys
on the ServiceAccount or the pod, no label of the controller's own selector on the pod, unless the admin allows
the key."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.common import ResourceMeta
from arc_scaleset.cli import build_parser
from arc_scaleset.cmd.controller import settings_from_args
from arc_scaleset.controllers.autoscalinglistener.metadata_policy import (
    MetadataRules,
    listener_metadata_violations,
    pod_metadata_violations,
    service_account_violations,
)
from arc_scaleset.controllers.autoscalinglistener.pod import desired_listener_pod
from arc_scaleset.controllers.settings import SettingsError
from tests.unit.controllers.listener_factory import listener_object, parsed_listener

CONTROLLER = MetadataRules(
    controller_labels={
        "app.kubernetes.io/name": "gha-rs-controller",
        "app.kubernetes.io/namespace": "arc-system",
        "app.kubernetes.io/instance": "arc",
    }
)


def merged(tmpl: dict[str, Any] | None, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    obj = listener_object(template=tmpl) if tmpl is not None else listener_object()
    obj["metadata"]["labels"].update(labels or {})
    return desired_listener_pod(obj, parsed_listener(obj), command=["arc-scaleset", "listener"], metrics_port=8080,
                                config_resource_version="1")  # fmt: skip


def sa_fields(annotations: dict[str, str], rules: MetadataRules = CONTROLLER) -> list[str]:
    meta = ResourceMeta.model_validate({"annotations": annotations})
    return [v.field for v in service_account_violations(meta, rules=rules)]


@pytest.mark.parametrize(
    "key",
    [
        "eks.amazonaws.com/role-arn",
        "eks.amazonaws.com/audience",
        "iam.gke.io/gcp-service-account",
        "azure.workload.identity/client-id",
        "azure.workload.identity/tenant-id",
    ],
)
def test_a_workload_identity_annotation_on_the_listener_service_account_is_refused_by_key(key: str) -> None:
    assert sa_fields({key: "team-a-role", "team": "a"}) == [f'listenerServiceAccountMetadata.annotations["{key}"]']
    (violation,) = service_account_violations(
        ResourceMeta.model_validate({"annotations": {key: "x"}}), rules=CONTROLLER
    )
    assert f"--allow-listener-metadata-key={key}" in violation.problem


def test_the_admin_allows_identity_keys_by_key_or_by_prefix() -> None:
    by_key = MetadataRules(allowed_keys=("eks.amazonaws.com/role-arn",))
    assert sa_fields({"eks.amazonaws.com/role-arn": "r"}, by_key) == []
    assert sa_fields({"eks.amazonaws.com/audience": "a"}, by_key) == [
        'listenerServiceAccountMetadata.annotations["eks.amazonaws.com/audience"]'
    ]
    assert sa_fields({"eks.amazonaws.com/audience": "a"}, MetadataRules(allowed_keys=("eks.amazonaws.com/",))) == []
    # A prefix must end in "/": "eks" alone names no key.
    assert sa_fields({"eks.amazonaws.com/audience": "a"}, MetadataRules(allowed_keys=("eks",))) != []


def test_ordinary_service_account_metadata_passes() -> None:
    assert service_account_violations(None, rules=CONTROLLER) == []
    assert sa_fields({"team": "a", "example.com/owner": "x"}) == []


def test_a_template_label_matching_the_controllers_selector_is_refused_by_key() -> None:
    tmpl = {"metadata": {"labels": {"app.kubernetes.io/name": "gha-rs-controller", "team": "a"}}}
    (violation,) = pod_metadata_violations(merged(tmpl), tmpl, rules=CONTROLLER)
    assert violation.field == 'listenerTemplate.metadata.labels["app.kubernetes.io/name"]'
    assert "NetworkPolicies" in violation.problem


def test_a_scale_set_label_copied_to_the_listener_is_named_as_the_scale_sets() -> None:
    pod = merged(None, labels={"app.kubernetes.io/instance": "arc"})
    (violation,) = pod_metadata_violations(pod, None, rules=CONTROLLER)
    assert violation.field.startswith('metadata.labels["app.kubernetes.io/instance"] of the AutoscalingRunnerSet')


def test_the_scale_set_charts_own_name_labels_pass() -> None:
    # The scale-set chart labels every scale set app.kubernetes.io/name and instance: its own name, not the
    # controller's; only the same value would make a selector match.
    pod = merged(None, labels={"app.kubernetes.io/name": "arc-runners", "app.kubernetes.io/instance": "arc-runners"})
    assert pod_metadata_violations(pod, None, rules=CONTROLLER) == []


def test_identity_labels_and_annotations_on_the_pod_are_refused() -> None:
    tmpl = {
        "metadata": {
            "labels": {"azure.workload.identity/use": "true", "aadpodidbinding": "team-b"},
            "annotations": {"iam.amazonaws.com/role": "admin", "prometheus.io/scrape": "true"},
        }
    }
    found = listener_metadata_violations(service_account=None, pod=merged(tmpl), template=tmpl, rules=CONTROLLER)
    assert [v.field for v in found] == [
        'listenerTemplate.metadata.labels["azure.workload.identity/use"]',
        'listenerTemplate.metadata.labels["aadpodidbinding"]',
        'listenerTemplate.metadata.annotations["iam.amazonaws.com/role"]',
    ]


def test_the_projects_own_listener_pod_carries_nothing_refused() -> None:
    assert pod_metadata_violations(merged(None), None, rules=CONTROLLER) == []


def test_the_flags_reach_the_settings() -> None:
    argv = [
        "controller",
        "--controller-selector-label=app.kubernetes.io/name=gha-rs-controller",
        "--allow-listener-metadata-key=eks.amazonaws.com/",
        "--allow-listener-metadata-key=iam.gke.io/",
    ]
    environ = {"CONTROLLER_MANAGER_POD_NAMESPACE": "arc-system", "CONTROLLER_MANAGER_CONTAINER_IMAGE": "img:1"}
    settings = settings_from_args(build_parser(argv).parse_args(argv), environ)
    assert dict(settings.controller_selector_labels) == {"app.kubernetes.io/name": "gha-rs-controller"}
    assert settings.allowed_listener_metadata_keys == ("eks.amazonaws.com/", "iam.gke.io/")
    bad = ["controller", "--controller-selector-label=novalue"]
    with pytest.raises(SettingsError, match="--controller-selector-label"):
        settings_from_args(build_parser(bad).parse_args(bad), environ)
