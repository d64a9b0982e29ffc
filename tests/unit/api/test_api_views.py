"""The views of the four kinds: the spec and status fields the reconcilers act on, read in place and tolerantly."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.api.keys import ANNOTATION_ACTIONABLE_REVISION, ANNOTATION_PATCH_ID
from arc_scaleset.api.views import (
    AutoscalingListenerView,
    AutoscalingRunnerSetView,
    EphemeralRunnerSetView,
    EphemeralRunnerView,
)
from arc_scaleset.controllers.runner_classification import RunnerView

RUNNER: dict[str, Any] = {
    "apiVersion": "actions.github.com/v1alpha1",
    "kind": "EphemeralRunner",
    "metadata": {
        "name": "arc-runner-x1",
        "namespace": "arc-runners",
        "uid": "uid-r",
        "creationTimestamp": "2026-01-01T12:00:00Z",
        "annotations": {ANNOTATION_PATCH_ID: "12", ANNOTATION_ACTIONABLE_REVISION: "3"},
    },
    "spec": {
        "githubConfigUrl": "https://github.com/org",
        "githubConfigSecret": "creds",
        "runnerScaleSetId": 7,
        "proxySecretRef": "arc-proxy",
        "proxy": {"http": {"url": "http://proxy:3128"}},
        "ephemeralRunnerConfigSecretMetadata": {"labels": {"a": "b"}},
        "metadata": {"labels": {"team": "ci"}},
        "spec": {"containers": [{"name": "sidecar"}, {"name": "runner", "workingDir": "/work"}]},
    },
    "status": {
        "phase": "Running",
        "ready": True,
        "runnerId": 42,
        "jobId": "job-1",
        "failures": {"uid-pod-1": "2026-01-01T12:01:00Z"},
    },
}

RUNNER_SET: dict[str, Any] = {
    "metadata": {"name": "arc", "namespace": "arc-runners", "uid": "uid-ers"},
    "spec": {
        "replicas": 4,
        "patchID": 9,
        "actionableRevision": 3,
        "ephemeralRunnerSpec": {"runnerScaleSetId": 7},
        "ephemeralRunnerMetadata": {"labels": {"x": "y"}},
    },
    "status": {"phase": "Running", "appliedActionableRevision": 2, "finishedRunnerCleanupPatchID": 8},
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=15,
)
any_object = st.fixed_dictionaries(
    {}, optional={"metadata": json_values, "spec": json_values, "status": json_values}
) | st.fixed_dictionaries(
    {},
    optional={
        "metadata": st.fixed_dictionaries({}, optional={"annotations": json_values}),
        "spec": st.dictionaries(
            st.sampled_from(["replicas", "patchID", "actionableRevision", "runnerScaleSetId", "spec", "proxy",
                             "ephemeralRunnerSpec", "autoscalingRunnerSetName"]), json_values),
        "status": st.dictionaries(
            st.sampled_from(["phase", "runnerId", "jobId", "failures", "ready", "appliedActionableRevision",
                             "observedGeneration", "conditions"]), json_values),
    },
)  # fmt: skip


def test_a_runner_view_reads_the_stamps_the_registration_and_the_job() -> None:
    runner = EphemeralRunnerView(RUNNER)
    assert (runner.patch_id, runner.revision) == (12, 3)
    assert (runner.runner_scale_set_id, runner.runner_id) == (7, 42)
    assert (runner.phase, runner.ready, runner.job_id) == ("Running", True, "job-1")
    assert runner.has_job
    assert not runner.is_done
    assert runner.container("runner") == {"name": "runner", "workingDir": "/work"}
    assert runner.container("missing") is None
    assert runner.proxy_secret_ref == "arc-proxy"
    assert runner.pod_metadata == {"labels": {"team": "ci"}}
    assert runner.config_secret_metadata == {"labels": {"a": "b"}}


def test_a_runner_view_hands_out_the_cached_status_maps_not_copies() -> None:
    runner = EphemeralRunnerView(RUNNER)
    assert runner.failures is RUNNER["status"]["failures"]
    assert runner.pod_spec is RUNNER["spec"]["spec"]
    assert runner.spec is RUNNER["spec"]


def test_a_new_runner_reads_as_pending_unregistered_and_idle() -> None:
    runner = EphemeralRunnerView({"metadata": {"name": "arc-runner-x2"}})
    assert (runner.phase, runner.runner_id, runner.job_id, runner.patch_id, runner.revision) == ("", 0, "", 0, 0)
    assert not runner.has_job
    assert not runner.ready
    assert runner.failures == {}
    assert runner.pod_spec == {}


@pytest.mark.parametrize(("phase", "done"), [("Succeeded", True), ("Failed", True), ("Outdated", True),
                                             ("Running", False), ("Pending", False), ("", False)])  # fmt: skip
def test_succeeded_failed_and_outdated_runners_are_done(phase: str, done: bool) -> None:
    assert EphemeralRunnerView({"status": {"phase": phase}}).is_done is done


@pytest.mark.parametrize("annotation", ["", "three", "3.0", None, 3])
def test_an_unparsable_revision_annotation_reads_as_revision_zero(annotation: object) -> None:
    runner = EphemeralRunnerView({"metadata": {"annotations": {ANNOTATION_ACTIONABLE_REVISION: annotation}}})
    assert runner.revision == 0


@pytest.mark.parametrize("runner_id", ["42", True, 4.2, None])
def test_a_runner_id_that_is_not_an_integer_reads_as_not_registered(runner_id: object) -> None:
    assert EphemeralRunnerView({"status": {"runnerId": runner_id}}).runner_id == 0


@pytest.mark.parametrize("job_id", [12345, ["job"], {"id": 1}])
def test_a_malformed_job_id_still_marks_the_runner_busy(job_id: object) -> None:
    # Taking a busy runner for an idle one would let scale-down remove it mid-job.
    assert EphemeralRunnerView({"status": {"jobId": job_id}}).has_job


def test_the_decisions_snapshot_reads_through_the_runner_view() -> None:
    snapshot = RunnerView.of(RUNNER)
    assert (snapshot.name, snapshot.namespace, snapshot.uid) == ("arc-runner-x1", "arc-runners", "uid-r")
    assert (snapshot.phase, snapshot.runner_id, snapshot.job_id) == ("Running", 42, "job-1")
    assert (snapshot.patch_id, snapshot.revision) == (12, 3)
    assert snapshot.created.isoformat() == "2026-01-01T12:00:00+00:00"
    assert not snapshot.deleting


def test_a_runner_set_view_reads_replicas_and_the_revision_bookkeeping() -> None:
    runner_set = EphemeralRunnerSetView(RUNNER_SET)
    assert (runner_set.replicas, runner_set.patch_id) == (4, 9)
    assert (runner_set.actionable_revision, runner_set.applied_actionable_revision) == (3, 2)
    assert runner_set.finished_runner_cleanup_patch_id == 8
    assert runner_set.phase == "Running"
    assert runner_set.revision_pending
    assert runner_set.runner_spec is RUNNER_SET["spec"]["ephemeralRunnerSpec"]
    assert runner_set.runner_metadata is RUNNER_SET["spec"]["ephemeralRunnerMetadata"]


def test_a_runner_set_without_a_status_has_applied_nothing_and_awaits_no_cleanup_at_revision_zero() -> None:
    runner_set = EphemeralRunnerSetView({"spec": {"replicas": 1, "patchID": 0}})
    assert (runner_set.applied_actionable_revision, runner_set.finished_runner_cleanup_patch_id) == (0, 0)
    assert not runner_set.revision_pending
    assert runner_set.runner_spec == {}


def test_a_scale_set_view_reads_what_the_controller_last_observed() -> None:
    scale_set = AutoscalingRunnerSetView({"metadata": {"generation": 5},
                                          "status": {"observedGeneration": 4, "phase": "Pending"}})  # fmt: skip
    assert (scale_set.generation, scale_set.observed_generation, scale_set.phase) == (5, 4, "Pending")
    assert AutoscalingRunnerSetView({}).observed_generation == 0


def test_a_listener_view_names_the_scale_set_it_serves() -> None:
    listener = AutoscalingListenerView({
        "spec": {"autoscalingRunnerSetNamespace": "arc-runners", "autoscalingRunnerSetName": "arc"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    })  # fmt: skip
    assert (listener.scale_set_namespace, listener.scale_set_name) == ("arc-runners", "arc")
    assert [c["type"] for c in listener.conditions] == ["Ready"]
    assert AutoscalingListenerView({"spec": "junk"}).scale_set_name == ""
    assert list(AutoscalingListenerView({}).conditions) == []


@given(any_object)
def test_no_kind_view_raises_on_any_json_object(obj: dict[str, Any]) -> None:
    runner = EphemeralRunnerView(obj)
    _ = (runner.patch_id, runner.revision, runner.runner_scale_set_id, runner.pod_metadata, runner.pod_spec,
         runner.containers, runner.container("runner"), runner.proxy, runner.proxy_secret_ref,
         runner.config_secret_metadata, runner.phase, runner.is_done, runner.ready, runner.reason, runner.message,
         runner.runner_id, runner.job_id, runner.has_job, runner.failures)  # fmt: skip
    runner_set = EphemeralRunnerSetView(obj)
    _ = (runner_set.replicas, runner_set.patch_id, runner_set.actionable_revision, runner_set.runner_spec,
         runner_set.runner_metadata, runner_set.phase, runner_set.applied_actionable_revision,
         runner_set.finished_runner_cleanup_patch_id, runner_set.revision_pending)  # fmt: skip
    scale_set = AutoscalingRunnerSetView(obj)
    _ = (scale_set.observed_generation, scale_set.phase)
    listener = AutoscalingListenerView(obj)
    _ = (listener.scale_set_namespace, listener.scale_set_name, listener.conditions)
    RunnerView.of(obj)
