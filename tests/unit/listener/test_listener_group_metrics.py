"""One /metrics for a shared listener's members: families merged by name, each series labelled with its set."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from arc_scaleset.listener.group_metrics import MemberMetrics
from arc_scaleset.listener.metrics import ListenerMetrics, ScaleSetIdentity

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


@dataclass
class Job:
    owner_name: str = "octo-org"
    repository_name: str = "hello"
    job_display_name: str = "build"
    job_workflow_ref: str = "octo-org/hello/.github/workflows/ci.yaml@refs/heads/main"
    event_name: str = "push"
    queue_time: dt.datetime | None = T0
    scale_set_assign_time: dt.datetime | None = T0
    runner_assign_time: dt.datetime | None = T0 + dt.timedelta(seconds=3)


def member(name: str) -> ListenerMetrics:
    identity = ScaleSetIdentity(enterprise="", organization="octo-org", repository="", name=name, namespace="ns")
    metrics = ListenerMetrics(scale_set=identity)
    metrics.record_static(min_runners=1, max_runners=5)
    metrics.record_job_started(Job())
    return metrics


def served(*members: tuple[str, ListenerMetrics]) -> str:
    collector = MemberMetrics()
    for name, metrics in members:
        collector.add(name, name=name, namespace="ns", registry=metrics.registry)
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode()


def test_each_metric_has_one_header_whatever_the_number_of_members() -> None:
    text = served(("a", member("a")), ("b", member("b")))
    assert text.count("# TYPE gha_max_runners gauge") == 1
    assert text.count("# TYPE gha_started_jobs_total counter") == 1


def test_two_members_serving_the_same_jobs_keep_their_series_apart_by_arcs_name_and_namespace_labels() -> None:
    text = served(("a", member("a")), ("b", member("b")))
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    for name in ("a", "b"):
        gauge = (("enterprise", ""), ("name", name), ("namespace", "ns"), ("organization", "octo-org"),
                 ("repository", ""))  # fmt: skip
        assert samples[("gha_max_runners", gauge)] == 5
        job = (("enterprise", ""), ("event_name", "push"), ("job_name", "build"), ("name", name),
               ("namespace", "ns"), ("organization", "octo-org"), ("repository", "hello"))  # fmt: skip
        assert samples[("gha_started_jobs_total", job)] == 1
        assert samples[("gha_job_startup_duration_seconds_count", job)] == 1


def test_a_removed_member_takes_its_series_with_it() -> None:
    collector = MemberMetrics()
    collector.add("a", name="a", namespace="ns", registry=member("a").registry)
    collector.add("b", name="b", namespace="ns", registry=member("b").registry)
    collector.remove("b")
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    assert 'name="a"' in text
    assert 'name="b"' not in text
