"""The listener's metrics: ARC's names, labels and values, and the config customisation."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry

from arc_scaleset.api.listener_metrics import CounterSpec, GaugeSpec, HistogramSpec, ListenerMetricsConfig
from arc_scaleset.listener.metrics import (
    DEFAULT_BUCKETS,
    ListenerMetrics,
    ScaleSetIdentity,
    workflow_name,
    workflow_target,
)

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
SCALE_SET = ScaleSetIdentity(enterprise="", organization="my-org", repository="", name="arc-runners", namespace="arc")
SCALE_SET_LABELS = {
    "enterprise": "",
    "organization": "my-org",
    "repository": "",
    "name": "arc-runners",
    "namespace": "arc",
}


@dataclass
class Stats:
    total_available_jobs: int = 0
    total_acquired_jobs: int = 0
    total_assigned_jobs: int = 0
    total_running_jobs: int = 0
    total_registered_runners: int = 0
    total_busy_runners: int = 0
    total_idle_runners: int = 0


@dataclass
class Job:
    owner_name: str = "octo-org"
    repository_name: str = "hello"
    job_display_name: str = "build"
    job_workflow_ref: str = "octo-org/hello/.github/workflows/ci.yml@refs/heads/main"
    event_name: str = "push"
    queue_time: dt.datetime | None = T0
    scale_set_assign_time: dt.datetime | None = T0 + dt.timedelta(seconds=2)
    runner_assign_time: dt.datetime | None = T0 + dt.timedelta(seconds=9, milliseconds=700)
    finish_time: dt.datetime | None = T0 + dt.timedelta(seconds=70)
    result: str = "succeeded"


JOB_LABELS = {
    "enterprise": "",
    "organization": "octo-org",
    "repository": "hello",
    "job_name": "build",
    "event_name": "push",
}


def value(metrics: ListenerMetrics, name: str, labels: dict[str, str]) -> float | None:
    result: float | None = metrics.registry.get_sample_value(name, labels)
    return result


def test_statistics_set_arcs_gauges_with_the_scale_set_labels() -> None:
    metrics = ListenerMetrics(scale_set=SCALE_SET)
    metrics.record_statistics(
        Stats(
            total_available_jobs=1,
            total_acquired_jobs=2,
            total_assigned_jobs=3,
            total_running_jobs=4,
            total_registered_runners=5,
            total_busy_runners=6,
            total_idle_runners=7,
        )
    )
    expected = {
        "gha_available_jobs": 1,
        "gha_acquired_jobs": 2,
        "gha_assigned_jobs": 3,
        "gha_running_jobs": 4,
        "gha_registered_runners": 5,
        "gha_busy_runners": 6,
        "gha_idle_runners": 7,
    }
    for name, number in expected.items():
        assert value(metrics, name, SCALE_SET_LABELS) == number, name


def test_static_bounds_and_desired_runners_are_gauges() -> None:
    metrics = ListenerMetrics(scale_set=SCALE_SET)
    metrics.record_static(min_runners=1, max_runners=10)
    metrics.record_desired_runners(4)
    assert value(metrics, "gha_min_runners", SCALE_SET_LABELS) == 1
    assert value(metrics, "gha_max_runners", SCALE_SET_LABELS) == 10
    assert value(metrics, "gha_desired_runners", SCALE_SET_LABELS) == 4


def test_a_started_job_counts_and_observes_whole_second_startup_and_queue_durations() -> None:
    metrics = ListenerMetrics(scale_set=SCALE_SET)
    metrics.record_job_started(Job())
    assert value(metrics, "gha_started_jobs_total", JOB_LABELS) == 1
    # runnerAssignTime - scaleSetAssignTime in whole Unix seconds: 9 - 2 = 7 (the 700 ms are dropped).
    assert value(metrics, "gha_job_startup_duration_seconds_sum", JOB_LABELS) == 7
    assert value(metrics, "gha_job_startup_duration_seconds_count", JOB_LABELS) == 1
    assert value(metrics, "gha_job_queue_duration_seconds_sum", JOB_LABELS) == 9


def test_a_completed_job_counts_with_its_result_and_observes_execution_time() -> None:
    metrics = ListenerMetrics(scale_set=SCALE_SET)
    metrics.record_job_completed(Job())
    labels = {**JOB_LABELS, "job_result": "succeeded"}
    assert value(metrics, "gha_completed_jobs_total", labels) == 1
    assert value(metrics, "gha_job_execution_duration_seconds_sum", labels) == 70 - 9


def test_a_completed_job_that_never_reached_a_runner_is_not_counted() -> None:
    metrics = ListenerMetrics(scale_set=SCALE_SET)
    metrics.record_job_completed(Job(runner_assign_time=None, result="canceled"))
    assert value(metrics, "gha_completed_jobs_total", {**JOB_LABELS, "job_result": "canceled"}) is None


def test_histograms_use_arcs_default_buckets() -> None:
    metrics = ListenerMetrics(scale_set=SCALE_SET)
    metrics.record_job_started(Job())
    for bound in DEFAULT_BUCKETS:
        le = str(float(bound))
        assert value(metrics, "gha_job_startup_duration_seconds_bucket", {**JOB_LABELS, "le": le}) is not None, le


def test_configured_metrics_register_only_those_with_exactly_their_labels() -> None:
    config = ListenerMetricsConfig(
        gauges={"gha_desired_runners": GaugeSpec(labels=("name",))},
        counters={
            "gha_started_jobs_total": CounterSpec(labels=("repository", "job_workflow_name", "job_workflow_target"))
        },
        histograms={"gha_job_startup_duration_seconds": HistogramSpec(labels=("repository",), buckets=(5.0, 10.0))},
    )
    metrics = ListenerMetrics(scale_set=SCALE_SET, config=config)
    assert metrics.registered == {
        "gha_desired_runners",
        "gha_started_jobs_total",
        "gha_job_startup_duration_seconds",
    }
    metrics.record_desired_runners(3)
    metrics.record_statistics(Stats(total_assigned_jobs=3))
    metrics.record_job_started(Job())
    assert value(metrics, "gha_desired_runners", {"name": "arc-runners"}) == 3
    assert value(metrics, "gha_assigned_jobs", SCALE_SET_LABELS) is None
    started = {"repository": "hello", "job_workflow_name": "ci", "job_workflow_target": "heads/main"}
    assert value(metrics, "gha_started_jobs_total", started) == 1
    assert value(metrics, "gha_job_startup_duration_seconds_bucket", {"repository": "hello", "le": "10.0"}) == 1
    assert value(metrics, "gha_job_startup_duration_seconds_bucket", {"repository": "hello", "le": "5.0"}) == 0


def test_unknown_configured_metrics_are_skipped() -> None:
    config = ListenerMetricsConfig(
        gauges={"gha_nonsense": GaugeSpec(labels=("name",))}, counters={"gha_started_jobs": CounterSpec(labels=())}
    )
    metrics = ListenerMetrics(scale_set=SCALE_SET, config=config)
    assert metrics.registered == set()


def test_metrics_live_on_a_private_registry() -> None:
    first = ListenerMetrics(scale_set=SCALE_SET)
    second = ListenerMetrics(scale_set=SCALE_SET, registry=CollectorRegistry())
    first.record_desired_runners(1)
    assert value(second, "gha_desired_runners", SCALE_SET_LABELS) is None


@pytest.mark.parametrize(
    ("ref", "name", "target"),
    [
        ("o/r/.github/workflows/ci.yml@refs/heads/main", "ci", "heads/main"),
        ("o/r/.github/workflows/release.yaml@refs/tags/v1.2", "release", "tags/v1.2"),
        ("o/r/.github/workflows/pr.yaml@refs/pull/42/merge", "pr", "pull/42"),
        ("o/r/.github/workflows/odd.json@refs/remotes/x", "odd.json", ""),
        ("o/r/.github/workflows/build.test.yml@refs/heads/feature/new", "build.test", "heads/feature/new"),
        # ARC's parser (cmd/ghalistener/metrics), edge cases included, so series match across a migration:
        ("o/r/.github/workflows/ci.yml", "", ""),  # no "@": nothing
        ("o/r/.github/workflows/ci.yml@refs/heads/a@b", "", ""),  # more than one "@": nothing
        ("o/r/.github/workflows/pr.yml@refs/pull/7", "pr", ""),  # a pull ref without "/merge"
        ("o/r/.github/workflows/ci.yml@refs/heads/", "ci", "heads/"),
        ("o/r/.github/workflows/ci.yaml.yml@refs/tags/v1", "ci", "tags/v1"),  # ".yml", then ".yaml"
        ("", "", ""),
    ],
)
def test_workflow_name_and_target_come_from_the_workflow_ref(ref: str, name: str, target: str) -> None:
    assert workflow_name(ref) == name
    assert workflow_target(ref) == target
