"""The AutoscalingRunnerSet's desired children: EphemeralRunnerSet, AutoscalingListener, scale set labels."""

from __future__ import annotations

from arc_scaleset.api.naming import autoscaling_listener_name
from arc_scaleset.controllers.autoscalingrunnerset.desired import (
    desired_autoscaling_listener,
    desired_ephemeral_runner_set,
    desired_scale_set_labels,
    listener_name_of,
    scale_set_id_of,
)
from tests.unit.controllers.ars_factory import RUNNER_TEMPLATE, ars_object, parsed

URL_LABELS = {"actions.github.com/organization": "my-org"}


def test_the_runner_set_has_the_scale_sets_name_revision_zero_and_a_controller_owner() -> None:
    obj = ars_object(ephemeralRunnerMetadata={"labels": {"team": "a"}})
    ers = desired_ephemeral_runner_set(obj, parsed(obj), scale_set_id=7, url_labels=URL_LABELS)
    assert ers["metadata"]["name"] == "arc-runners"
    assert ers["metadata"]["namespace"] == "team"
    assert ers["spec"]["actionableRevision"] == 0
    assert ers["spec"]["replicas"] == 0
    assert ers["spec"]["patchID"] == 0
    assert ers["spec"]["ephemeralRunnerMetadata"] == {"labels": {"team": "a"}}
    (owner,) = ers["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "name": "arc-runners",
        "uid": "ars-uid",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_the_runner_spec_inlines_the_template_and_carries_only_what_is_set() -> None:
    obj = ars_object(proxy={"https": {"url": "http://proxy:3128"}})
    spec = desired_ephemeral_runner_set(obj, parsed(obj), scale_set_id=7, url_labels={})["spec"]
    assert spec["ephemeralRunnerSpec"] == {
        "githubConfigUrl": "https://github.com/my-org",
        "githubConfigSecret": "gh-secret",
        "runnerScaleSetId": 7,
        "proxy": {"https": {"url": "http://proxy:3128"}},
        "spec": RUNNER_TEMPLATE["spec"],
    }


def test_runner_set_labels_keep_the_controllers_keys_over_user_metadata_and_drop_excluded_prefixes() -> None:
    obj = ars_object(
        labels={"app.kubernetes.io/version": "0.1.0", "argocd.argoproj.io/instance": "x", "owner": "me"},
        ephemeralRunnerSetMetadata={
            "labels": {"app.kubernetes.io/component": "mine", "extra": "1"},
            "annotations": {"actions.github.com/runner-group-name": "forged", "note": "n"},
        },
    )
    ers = desired_ephemeral_runner_set(
        obj, parsed(obj), scale_set_id=7, url_labels=URL_LABELS, excluded_prefixes=("argocd.argoproj.io/",)
    )
    assert ers["metadata"]["labels"] == {
        "app.kubernetes.io/part-of": "gha-runner-scale-set",
        "app.kubernetes.io/component": "runner-set",
        "app.kubernetes.io/version": "0.1.0",
        "actions.github.com/scale-set-name": "arc-runners",
        "actions.github.com/scale-set-namespace": "team",
        "actions.github.com/organization": "my-org",
        "owner": "me",
        "extra": "1",
    }
    assert ers["metadata"]["annotations"] == {
        "actions.github.com/runner-group-name": "Default",
        "actions.github.com/runner-scale-set-name": "arc-runners",
        "note": "n",
    }


def test_the_listener_lives_in_the_controller_namespace_with_effective_bounds_and_the_controller_image() -> None:
    obj = ars_object(minRunners=1, listenerMetrics={"counters": {"c": {"labels": ["a"]}}})
    ars = parsed(obj)
    listener = desired_autoscaling_listener(
        ars, namespace="arc-system", scale_set_id=7, ephemeral_runner_set="arc-runners", image="img:1",
        image_pull_secrets=("regcred",), url_labels=URL_LABELS,
    )  # fmt: skip
    assert listener["metadata"]["namespace"] == "arc-system"
    assert listener["metadata"]["name"] == autoscaling_listener_name(
        "arc-runners", namespace="team", runner_group="", github_config_url="https://github.com/my-org"
    )
    assert "ownerReferences" not in listener["metadata"]
    spec = listener["spec"]
    assert (spec["minRunners"], spec["maxRunners"]) == (1, 2_147_483_647)
    assert spec["image"] == "img:1"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["runnerScaleSetId"] == 7
    assert spec["autoscalingRunnerSetNamespace"] == "team"
    assert spec["ephemeralRunnerSetName"] == "arc-runners"
    assert spec["metrics"] == {"counters": {"c": {"labels": ["a"]}}}
    assert listener["metadata"]["labels"]["app.kubernetes.io/component"] == "runner-scale-set-listener"


def test_the_listener_name_changes_with_the_runner_group_and_url() -> None:
    a = listener_name_of(parsed(ars_object()))
    b = listener_name_of(parsed(ars_object(runnerGroup="other")))
    c = listener_name_of(parsed(ars_object(githubConfigUrl="https://github.com/other-org")))
    assert len({a, b, c}) == 3


def test_scale_set_labels_start_with_the_name_and_skip_duplicates_and_blanks() -> None:
    ars = parsed(ars_object(runnerScaleSetName="linux", runnerScaleSetLabels=["gpu", "linux", " ", "gpu", "x64"]))
    assert desired_scale_set_labels(ars) == ["linux", "gpu", "x64"]
    assert desired_scale_set_labels(parsed(ars_object())) == ["arc-runners"]


def test_the_scale_set_id_is_read_from_the_annotation_and_invalid_values_mean_unregistered() -> None:
    assert scale_set_id_of(parsed(ars_object())) == 7
    for raw in ("", "x", "0", "-3"):
        assert scale_set_id_of(parsed(ars_object(annotations={"runner-scale-set-id": raw}))) is None
    assert scale_set_id_of(parsed(ars_object(registered=False))) is None
