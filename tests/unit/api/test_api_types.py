"""The pydantic models of the four kinds: names, defaults, validation, helpers, lossless round trips."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from arc_scaleset.api.autoscalinglistener import AutoscalingListener, AutoscalingListenerSpec
from arc_scaleset.api.autoscalingrunnerset import (
    AutoscalingRunnerSet,
    AutoscalingRunnerSetSpec,
    AutoscalingRunnerSetStatus,
)
from arc_scaleset.api.common import (
    AzureKeyVaultConfig,
    ConfigMapKeySelector,
    ObjectMeta,
    ProxyConfig,
    ProxyServerConfig,
    ResourceMeta,
    TLSConfig,
    VaultConfig,
    format_timestamp,
)
from arc_scaleset.api.constants import (
    AUTOSCALING_LISTENERS,
    AUTOSCALING_RUNNER_SETS,
    EPHEMERAL_RUNNER_SETS,
    EPHEMERAL_RUNNERS,
    MAX_RUNNERS_UNBOUNDED,
)
from arc_scaleset.api.ephemeralrunner import EphemeralRunner, EphemeralRunnerSpec, EphemeralRunnerStatus
from arc_scaleset.api.ephemeralrunnerset import EphemeralRunnerSet, EphemeralRunnerSetSpec, EphemeralRunnerSetStatus
from arc_scaleset.api.examples import example_autoscaling_runner_set
from arc_scaleset.api.keys import EphemeralRunnerPhase
from arc_scaleset.api.metrics_config import CounterMetric, HistogramMetric, MetricsConfig

RUNNER_SPEC: dict[str, Any] = {
    "githubConfigUrl": "https://github.com/my-org",
    "githubConfigSecret": "creds",
    "runnerScaleSetId": 7,
}


def minimal_ars(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "arc-runners", "namespace": "arc-runners"},
        "spec": {"githubConfigUrl": "https://github.com/my-org", "githubConfigSecret": "creds", "template": {}, **spec},
    }


# --- resources ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "plural", "kind", "model"),
    [
        (AUTOSCALING_RUNNER_SETS, "autoscalingrunnersets", "AutoscalingRunnerSet", AutoscalingRunnerSet),
        (EPHEMERAL_RUNNER_SETS, "ephemeralrunnersets", "EphemeralRunnerSet", EphemeralRunnerSet),
        (EPHEMERAL_RUNNERS, "ephemeralrunners", "EphemeralRunner", EphemeralRunner),
        (AUTOSCALING_LISTENERS, "autoscalinglisteners", "AutoscalingListener", AutoscalingListener),
    ],
)
def test_each_kind_has_a_namespaced_resource_in_the_actions_group(
    resource: Any, plural: str, kind: str, model: Any
) -> None:
    assert (resource.group, resource.version, resource.plural, resource.kind) == (
        "actions.github.com",
        "v1alpha1",
        plural,
        kind,
    )
    assert resource.namespaced
    assert model.RESOURCE is resource
    assert kind == model.KIND


# --- JSON names -----------------------------------------------------------------------------------------


def test_irregular_json_names_are_arcs() -> None:
    ers = EphemeralRunnerSet.from_object(
        {
            "spec": {"patchID": 12, "ephemeralRunnerSpec": RUNNER_SPEC, "actionableRevision": 2},
            "status": {"appliedActionableRevision": 2, "finishedRunnerCleanupPatchID": 11},
        }
    )
    assert ers.spec.patch_id == 12
    assert ers.status.finished_runner_cleanup_patch_id == 11
    body = ers.to_json()
    assert body["spec"]["patchID"] == 12
    assert body["status"]["finishedRunnerCleanupPatchID"] == 11
    spec = AutoscalingRunnerSetSpec.from_object(minimal_ars(githubServerTLS={})["spec"])
    assert spec.github_server_tls == TLSConfig()
    assert "githubServerTLS" in spec.to_json()


def test_python_names_are_accepted_too() -> None:
    spec = EphemeralRunnerSetSpec(
        patch_id=3,
        ephemeral_runner_spec=EphemeralRunnerSpec(
            github_config_url="https://github.com/o", github_config_secret="s", runner_scale_set_id=1
        ),
    )
    assert spec.to_json() == {
        "patchID": 3,
        "ephemeralRunnerSpec": {
            "githubConfigUrl": "https://github.com/o",
            "githubConfigSecret": "s",
            "runnerScaleSetId": 1,
        },
    }


# --- serialisation --------------------------------------------------------------------------------------


def test_to_json_writes_only_the_fields_that_were_set() -> None:
    status = EphemeralRunnerStatus(phase="Running")
    assert status.to_json() == {"phase": "Running"}
    assert status.ready is False  # Go's zero value, but not written back


def test_objects_always_carry_api_version_and_kind_first() -> None:
    ars = AutoscalingRunnerSet.from_object(minimal_ars())
    body = ars.to_json()
    assert list(body)[:2] == ["apiVersion", "kind"]
    assert body["apiVersion"] == "actions.github.com/v1alpha1"
    assert body["kind"] == "AutoscalingRunnerSet"


def test_a_list_item_without_kind_reads_as_the_models_kind() -> None:
    listener = AutoscalingListener.from_object({"metadata": {"name": "l"}})
    assert listener.kind == "AutoscalingListener"
    assert listener.to_json() == {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingListener",
        "metadata": {"name": "l"},
    }


def test_an_object_of_another_kind_is_refused() -> None:
    with pytest.raises(ValidationError, match="expected kind 'EphemeralRunner'"):
        EphemeralRunner.from_object({"kind": "EphemeralRunnerSet", "spec": RUNNER_SPEC})


def test_unknown_fields_are_ignored_on_read() -> None:
    ars = AutoscalingRunnerSet.from_object(minimal_ars(someFutureField=1))
    assert "someFutureField" not in ars.to_json()["spec"]


def test_the_realistic_scale_set_round_trips_without_losing_or_inventing_anything() -> None:
    manifest = example_autoscaling_runner_set()
    original = copy.deepcopy(manifest)
    ars = AutoscalingRunnerSet.from_object(manifest)
    assert ars.to_json() == original
    assert manifest == original  # reading does not modify the input
    container_envs = [c.get("env") for c in ars.spec.template["spec"]["containers"]]
    assert [] in container_envs  # the explicitly empty list survives


def test_the_pod_template_is_passed_through_as_the_same_data() -> None:
    manifest = example_autoscaling_runner_set()
    ars = AutoscalingRunnerSet.from_object(manifest)
    assert ars.spec.template == manifest["spec"]["template"]
    assert ars.spec.template["spec"]["containers"][0]["resources"]["limits"]["cpu"] == 2


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4))
def test_any_pod_template_passes_through_unchanged(template: dict[str, Any]) -> None:
    manifest = minimal_ars(template=template, listenerTemplate=template)
    assert AutoscalingRunnerSet.from_object(manifest).to_json()["spec"] == manifest["spec"]


def test_explicit_nulls_round_trip_as_nulls() -> None:
    ars = AutoscalingRunnerSet.from_object(minimal_ars(minRunners=None))
    assert ars.to_json()["spec"]["minRunners"] is None


def test_a_full_object_with_server_metadata_round_trips() -> None:
    obj = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {
            "name": "arc-runners-runner-x7k2p",
            "generateName": "arc-runners-runner-",
            "namespace": "arc-runners",
            "uid": "0b7c0c59-2f5c-4b8e-9d4b-1f0e3c8a9d11",
            "resourceVersion": "4711",
            "generation": 1,
            "creationTimestamp": "2026-07-01T10:00:00Z",
            "deletionTimestamp": "2026-07-01T11:00:00Z",
            "deletionGracePeriodSeconds": 0,
            "labels": {"app.kubernetes.io/component": "runner"},
            "annotations": {"actions.github.com/patch-id": "12", "actions.github.com/actionable-revision": "2"},
            "finalizers": ["ephemeralrunner.actions.github.com/finalizer"],
            "ownerReferences": [
                {
                    "apiVersion": "actions.github.com/v1alpha1",
                    "kind": "EphemeralRunnerSet",
                    "name": "arc-runners",
                    "uid": "u-1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [{"manager": "arc-scaleset", "operation": "Update", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {**RUNNER_SPEC, "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "runner"}]}},
        "status": {
            "phase": "Running",
            "ready": True,
            "runnerId": 4711,
            "runnerName": "arc-runners-runner-x7k2p",
            "failures": {"pod-uid-1": "2026-07-01T10:05:00Z"},
            "jobRequestId": 456,
            "jobRepositoryName": "my-org/my-repo",
            "jobId": "job-1",
            "jobWorkflowRef": "my-org/my-repo/.github/workflows/ci.yml@refs/heads/main",
            "workflowRunId": 123,
            "jobDisplayName": "build",
        },
    }
    runner = EphemeralRunner.from_object(obj)
    assert runner.to_json() == obj
    assert runner.metadata.owner_references is not None
    assert runner.metadata.owner_references[0].block_owner_deletion is True
    assert runner.metadata.creation_timestamp == datetime(2026, 7, 1, 10, 0, tzinfo=UTC)


def test_timestamps_are_written_as_kubernetes_does() -> None:
    assert format_timestamp(datetime(2026, 7, 1, 10, 0, 5, 123456, tzinfo=UTC)) == "2026-07-01T10:00:05Z"
    assert format_timestamp(datetime(2026, 7, 1, 10, 0, 5)) == "2026-07-01T10:00:05Z"  # naive means UTC
    status = EphemeralRunnerStatus(failures={"uid": datetime(2026, 7, 1, 12, 0, tzinfo=UTC)})
    assert status.to_json() == {"failures": {"uid": "2026-07-01T12:00:00Z"}}


# --- defaults -------------------------------------------------------------------------------------------


def test_autoscaling_runner_set_spec_defaults() -> None:
    spec = AutoscalingRunnerSetSpec.from_object(minimal_ars()["spec"])
    assert spec.runner_group == ""
    assert spec.runner_scale_set_name == ""
    assert spec.runner_scale_set_labels is None
    assert spec.proxy is None
    assert spec.github_server_tls is None
    assert spec.vault_config is None
    assert spec.listener_template is None
    assert spec.listener_metrics is None
    assert spec.autoscaling_listener is None
    assert spec.ephemeral_runner_metadata is None
    assert spec.min_runners is None
    assert spec.max_runners is None


def test_unset_min_and_max_runners_mean_zero_and_unbounded() -> None:
    spec = AutoscalingRunnerSetSpec.from_object(minimal_ars()["spec"])
    assert spec.effective_min_runners == 0
    assert spec.effective_max_runners == MAX_RUNNERS_UNBOUNDED == 2147483647


def test_set_min_and_max_runners_are_effective_as_given_including_zero() -> None:
    spec = AutoscalingRunnerSetSpec.from_object(minimal_ars(minRunners=2, maxRunners=0)["spec"])
    assert (spec.effective_min_runners, spec.effective_max_runners) == (2, 0)


def test_status_defaults_are_go_zero_values() -> None:
    assert AutoscalingRunnerSetStatus() == AutoscalingRunnerSetStatus(observed_generation=0, phase="")
    ers_status = EphemeralRunnerSetStatus()
    assert (ers_status.phase, ers_status.applied_actionable_revision, ers_status.finished_runner_cleanup_patch_id) == (
        "",
        0,
        0,
    )
    assert ers_status.current_replicas is None
    runner_status = EphemeralRunnerStatus()
    assert (runner_status.ready, runner_status.runner_id, runner_status.job_id, runner_status.failures) == (
        False,
        0,
        "",
        None,
    )


def test_runner_set_spec_defaults() -> None:
    spec = EphemeralRunnerSetSpec.from_object({"patchID": 0, "ephemeralRunnerSpec": RUNNER_SPEC})
    assert (spec.replicas, spec.actionable_revision, spec.ephemeral_runner_metadata) == (0, 0, None)
    runner_spec = spec.ephemeral_runner_spec
    assert (runner_spec.proxy, runner_spec.proxy_secret_ref, runner_spec.metadata, runner_spec.spec) == (
        None,
        "",
        {},
        {},
    )


def test_listener_spec_defaults() -> None:
    spec = AutoscalingListenerSpec()
    assert (spec.min_runners, spec.max_runners, spec.runner_scale_set_id, spec.image) == (0, 0, 0, "")
    assert spec.image_pull_secrets is None
    assert spec.template is None


def test_value_type_defaults() -> None:
    assert ResourceMeta() == ResourceMeta(labels=None, annotations=None)
    assert ProxyConfig() == ProxyConfig(http=None, https=None, no_proxy=None)
    assert ProxyServerConfig() == ProxyServerConfig(url="", credential_secret_ref="")
    assert VaultConfig() == VaultConfig(type="", azure_key_vault=None, proxy=None)
    assert TLSConfig().certificate_from is None
    assert MetricsConfig().counters is None
    assert HistogramMetric(labels=[]).buckets is None
    assert ObjectMeta().generation == 0


def test_proxy_config_reads_arcs_shape() -> None:
    proxy = ProxyConfig.from_object(
        {"http": {"url": "http://p:3128", "credentialSecretRef": "creds"}, "noProxy": ["a", "b"]}
    )
    assert proxy.http == ProxyServerConfig(url="http://p:3128", credential_secret_ref="creds")
    assert proxy.no_proxy == ["a", "b"]


def test_vault_config_reads_arcs_shape() -> None:
    vault = VaultConfig.from_object(
        {
            "type": "azure_key_vault",
            "azureKeyVault": {"url": "https://v", "tenantId": "t", "clientId": "c", "certificatePath": "/p"},
        }
    )
    assert vault.azure_key_vault == AzureKeyVaultConfig(
        url="https://v", tenant_id="t", client_id="c", certificate_path="/p"
    )


# --- validation errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("missing", ["githubConfigUrl", "githubConfigSecret", "template"])
def test_autoscaling_runner_set_spec_requires(missing: str) -> None:
    spec = minimal_ars()["spec"]
    del spec[missing]
    with pytest.raises(ValidationError, match=missing):
        AutoscalingRunnerSetSpec.from_object(spec)


@pytest.mark.parametrize("field", ["minRunners", "maxRunners"])
def test_runner_bounds_must_not_be_negative(field: str) -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        AutoscalingRunnerSetSpec.from_object(minimal_ars(**{field: -1})["spec"])
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        AutoscalingListenerSpec.from_object({field: -1})


def test_a_wrong_type_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="maxRunners"):
        AutoscalingRunnerSetSpec.from_object(minimal_ars(maxRunners="ten")["spec"])
    with pytest.raises(ValidationError, match="template"):
        AutoscalingRunnerSetSpec.from_object(minimal_ars(template=["not", "a", "template"])["spec"])


@pytest.mark.parametrize("missing", ["githubConfigUrl", "githubConfigSecret", "runnerScaleSetId"])
def test_ephemeral_runner_spec_requires(missing: str) -> None:
    spec = dict(RUNNER_SPEC)
    del spec[missing]
    with pytest.raises(ValidationError, match=missing):
        EphemeralRunnerSpec.from_object(spec)


def test_ephemeral_runner_set_spec_requires_patch_id_and_runner_spec() -> None:
    with pytest.raises(ValidationError, match="patchID"):
        EphemeralRunnerSetSpec.from_object({"ephemeralRunnerSpec": RUNNER_SPEC})
    with pytest.raises(ValidationError, match="ephemeralRunnerSpec"):
        EphemeralRunnerSetSpec.from_object({"patchID": 1})


def test_objects_with_a_required_spec_refuse_to_be_built_without_one() -> None:
    for model in (AutoscalingRunnerSet, EphemeralRunnerSet, EphemeralRunner):
        with pytest.raises(ValidationError, match="spec"):
            model.from_object({"metadata": {"name": "x"}})


def test_metric_labels_are_required() -> None:
    with pytest.raises(ValidationError, match="labels"):
        CounterMetric.from_object({})
    with pytest.raises(ValidationError, match="labels"):
        MetricsConfig.from_object({"histograms": {"h": {"buckets": [1.0]}}})


def test_config_map_key_selector_requires_a_key() -> None:
    with pytest.raises(ValidationError, match="key"):
        ConfigMapKeySelector.from_object({"name": "ca"})


def test_azure_key_vault_requires_all_four_settings() -> None:
    with pytest.raises(ValidationError) as raised:
        AzureKeyVaultConfig.from_object({"url": "https://v"})
    assert {error["loc"][0] for error in raised.value.errors()} == {"tenantId", "clientId", "certificatePath"}


# --- helpers --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "done"),
    [("", False), ("Pending", False), ("Running", False), ("Succeeded", True), ("Failed", True), ("Outdated", True)],
)
def test_a_runner_is_done_in_succeeded_failed_and_outdated(phase: str, done: bool) -> None:
    runner = EphemeralRunner.from_object({"spec": RUNNER_SPEC, "status": {"phase": phase}})
    assert runner.is_done is done


def test_phase_names_compare_equal_to_their_strings() -> None:
    assert EphemeralRunnerPhase.OUTDATED.value == "Outdated"
    assert "Outdated" in {EphemeralRunnerPhase.OUTDATED}


def test_a_runner_has_a_job_once_a_job_id_is_recorded() -> None:
    assert not EphemeralRunner.from_object({"spec": RUNNER_SPEC}).has_job
    assert EphemeralRunner.from_object({"spec": RUNNER_SPEC, "status": {"jobId": "j"}}).has_job


def test_last_failure_is_the_latest_timestamp() -> None:
    runner = EphemeralRunner.from_object(
        {
            "spec": RUNNER_SPEC,
            "status": {
                "failures": {"a": "2026-07-01T10:00:00Z", "b": "2026-07-01T12:00:00Z", "c": "2026-07-01T11:00:00Z"}
            },
        }
    )
    assert runner.last_failure == datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
    assert EphemeralRunner.from_object({"spec": RUNNER_SPEC}).last_failure is None


def _runner_with_containers(containers: list[dict[str, Any]]) -> EphemeralRunner:
    return EphemeralRunner.from_object({"spec": {**RUNNER_SPEC, "spec": {"containers": containers}}})


def test_container_hooks_are_configured_when_the_runner_container_sets_the_env() -> None:
    runner = _runner_with_containers(
        [{"name": "runner", "env": [{"name": "ACTIONS_RUNNER_CONTAINER_HOOKS", "value": "/hooks/index.js"}]}]
    )
    assert runner.has_container_hook_configured


def test_container_hooks_on_another_container_do_not_count() -> None:
    runner = _runner_with_containers(
        [
            {"name": "runner", "env": []},
            {"name": "sidecar", "env": [{"name": "ACTIONS_RUNNER_CONTAINER_HOOKS", "value": "x"}]},
        ]
    )
    assert not runner.has_container_hook_configured
    assert not _runner_with_containers([]).has_container_hook_configured


def test_runner_container_is_the_container_named_runner() -> None:
    runner = _runner_with_containers([{"name": "dind"}, {"name": "runner", "image": "r"}])
    container = runner.spec.runner_container()
    assert container is not None
    assert container["image"] == "r"
