"""A started job's wait, observed once per runner: in the histogram and as one trace whose phase spans follow
each other from queued to started."""

from __future__ import annotations

import datetime as dt
from typing import Any

from prometheus_client import CollectorRegistry

from arc_scaleset.api.job_timeline import JobTimeline
from arc_scaleset.api.keys import LABEL_GITHUB_ORGANIZATION, LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE
from arc_scaleset.controllers.ephemeralrunner.job_trace import ROOT_SPAN, job_trace
from arc_scaleset.controllers.ephemeralrunner.timeline import JobWaits
from arc_scaleset.controllers.metrics import ControllerMetrics, runner_set_labels
from arc_scaleset.observability.traces import TraceRecord

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
WAIT_COUNT = "gha_controller_job_wait_phase_seconds_count"


def stamp(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def busy_runner(*, started: bool = True, uid: str = "uid-1") -> dict[str, Any]:
    timeline = {"queued": stamp(0), "offered": stamp(1), "acquired": stamp(2), "assigned": stamp(45)}
    if started:
        timeline["started"] = stamp(46)
    return {
        "metadata": {
            "name": "arc-runner-x1",
            "namespace": "arc-runners",
            "uid": uid,
            "labels": {
                LABEL_SCALE_SET_NAME: "arc",
                LABEL_SCALE_SET_NAMESPACE: "arc-runners",
                LABEL_GITHUB_ORGANIZATION: "octo-org",
            },
        },
        "status": {
            "jobId": "j-7",
            "jobRepositoryName": "octo-org/web-app",
            "jobWorkflowRef": "octo-org/web-app/.github/workflows/ci.yml@refs/heads/main",
            "jobDisplayName": "build",
            "workflowRunId": 991,
            "jobTimeline": timeline,
        },
    }


def runner_pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "arc-runner-x1", "creationTimestamp": stamp(3)},
        "status": {"conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(40)}]},
    }


class RecordingSink:
    def __init__(self) -> None:
        self.traces: list[TraceRecord] = []

    def export(self, trace: TraceRecord) -> None:
        self.traces.append(trace)

    def shutdown(self) -> None:
        pass


def test_a_started_jobs_trace_has_its_phases_in_order_summing_to_the_wait_with_arcs_label_names() -> None:
    er = busy_runner()
    timeline = JobTimeline.of_runner(er, runner_pod())
    assert timeline is not None

    trace = job_trace(er, timeline, runner_set_labels(er))

    assert trace is not None
    assert (trace.root.name, trace.root.start, trace.root.end) == (ROOT_SPAN, T0, T0 + dt.timedelta(seconds=46))
    assert [(span.name, (span.end - span.start).total_seconds()) for span in trace.children] == [
        ("offer", 1), ("acquisition", 1), ("runner_creation", 1), ("node", 37), ("assignment", 5), ("job_start", 1),
    ]  # fmt: skip
    assert sum((span.end - span.start).total_seconds() for span in trace.children) == 46
    assert dict(trace.root.attributes) == {
        "name": "arc",
        "namespace": "arc-runners",
        "organization": "octo-org",
        "repository": "octo-org/web-app",
        "job_name": "build",
        "job_workflow_ref": "octo-org/web-app/.github/workflows/ci.yml@refs/heads/main",
        "runner": "arc-runner-x1",
        "job_id": "j-7",
        "workflow_run_id": 991,
    }
    assert trace.children[3].attributes["phase"] == "node"


def test_no_trace_before_the_job_started() -> None:
    er = busy_runner(started=False)
    timeline = JobTimeline.of_runner(er, runner_pod())
    assert timeline is not None
    assert job_trace(er, timeline, runner_set_labels(er)) is None


def test_a_job_that_started_within_the_second_it_was_queued_is_a_trace_without_phases() -> None:
    er = busy_runner()
    er["status"]["jobTimeline"] = {"queued": stamp(0), "acquired": stamp(0), "started": stamp(0)}
    timeline = JobTimeline.of_runner(er, runner_pod())
    assert timeline is not None

    trace = job_trace(er, timeline, runner_set_labels(er))

    assert trace is not None
    assert (trace.root.start, trace.root.end, trace.children) == (T0, T0, ())


def test_each_runners_job_is_observed_once_in_the_histogram_and_as_one_trace() -> None:
    registry = CollectorRegistry()
    sink = RecordingSink()
    waits = JobWaits(ControllerMetrics(registry), sink)

    waits.observe(busy_runner(started=False), runner_pod())  # not started: nothing yet
    for _ in range(3):  # the runner's passes while its job runs
        waits.observe(busy_runner(), runner_pod())
    waits.observe(busy_runner(uid="uid-2"), runner_pod())  # another runner's job

    assert registry.get_sample_value(WAIT_COUNT, {**runner_set_labels(busy_runner()), "phase": "node"}) == 2
    assert len(sink.traces) == 2


def test_traces_are_exported_when_metrics_are_off() -> None:
    sink = RecordingSink()
    JobWaits(ControllerMetrics(enabled=False), sink).observe(busy_runner(), runner_pod())
    assert len(sink.traces) == 1
