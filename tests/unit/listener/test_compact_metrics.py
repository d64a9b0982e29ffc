"""The listener's job counters and histograms: prometheus_client's exposition, a fraction of its memory."""

from __future__ import annotations

import gc
import math
import re
import tracemalloc

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from arc_scaleset.listener.compact_metrics import LabelledCounter, LabelledHistogram
from arc_scaleset.listener.metrics import DEFAULT_BUCKETS, ListenerMetrics, ScaleSetIdentity
from tests.unit.listener.test_listener_metrics import Job

LABELS = ("organization", "repository", "job_name")
SERIES = [("octo", "hello", "build"), ("octo", "hello", "test"), ("octo", "world", "build (ubuntu, 3.11)")]
# On a bound, between bounds, below the first, above the last, zero, fractions.
OBSERVATIONS = [0.0, 0.01, 0.3, 1.0, 7.0, 59.5, 3600.0, 4000.0, 12.25]


def without_created(text: bytes) -> str:
    # The listener turns prometheus_client's _created series off (ARC exports none); the compact ones have none.
    return "\n".join(line for line in text.decode().splitlines() if "_created" not in line)


def test_the_exposition_is_prometheus_clients_own_sample_for_sample() -> None:
    reference, compact = CollectorRegistry(), CollectorRegistry()
    counter = Counter("gha_started_jobs_total", "Started.", LABELS, registry=reference)
    histogram = Histogram("gha_job_startup_duration_seconds", "Startup.", LABELS, buckets=DEFAULT_BUCKETS,
                          registry=reference)  # fmt: skip
    compact_counter = LabelledCounter("gha_started_jobs_total", "Started.", LABELS, registry=compact)
    compact_histogram = LabelledHistogram(
        "gha_job_startup_duration_seconds", "Startup.", LABELS, buckets=DEFAULT_BUCKETS, registry=compact
    )
    for index, series in enumerate(SERIES):
        for amount in OBSERVATIONS[index:]:
            counter.labels(*series).inc()
            histogram.labels(*series).observe(amount)
            compact_counter.inc(series)
            compact_histogram.observe(series, amount)

    assert without_created(generate_latest(compact)) == without_created(generate_latest(reference))
    assert without_created(generate_openmetrics(compact)) == without_created(generate_openmetrics(reference))


def test_a_series_appears_once_recorded_and_counts_what_was_recorded() -> None:
    registry = CollectorRegistry()
    histogram = LabelledHistogram("h_seconds", "H.", ("job",), buckets=(1.0, 5.0), registry=registry)
    assert registry.get_sample_value("h_seconds_count", {"job": "a"}) is None
    histogram.observe(("a",), 1.0)
    histogram.observe(("a",), 4.0)
    histogram.observe(("a",), 6.0)
    histogram.observe(("a",), math.nan)  # in no bucket, as with prometheus_client
    assert registry.get_sample_value("h_seconds_bucket", {"job": "a", "le": "1.0"}) == 1
    assert registry.get_sample_value("h_seconds_bucket", {"job": "a", "le": "5.0"}) == 2
    assert registry.get_sample_value("h_seconds_bucket", {"job": "a", "le": "+Inf"}) == 3
    assert registry.get_sample_value("h_seconds_count", {"job": "a"}) == 3


@pytest.mark.parametrize(
    ("kind", "name", "labels", "buckets"),
    [
        ("counter", "", ("job",), ()),
        ("counter", "c_total", ("__reserved",), ()),
        ("histogram", "h", ("le",), (1.0,)),
        ("histogram", "h", ("job",), (5.0, 1.0)),
    ],
    ids=["empty metric name", "reserved label name", "le label", "unsorted buckets"],
)
def test_what_prometheus_client_refuses_is_refused_with_its_words(
    kind: str, name: str, labels: tuple[str, ...], buckets: tuple[float, ...]
) -> None:
    def reference() -> object:
        if kind == "counter":
            return Counter(name, "x", labels, registry=None)
        return Histogram(name, "x", labels, buckets=buckets, registry=None)

    def compact() -> object:
        if kind == "counter":
            return LabelledCounter(name, "x", labels, registry=registry)
        return LabelledHistogram(name, "x", labels, buckets=buckets, registry=registry)

    registry = CollectorRegistry()
    with pytest.raises(ValueError) as refused:  # noqa: PT011 - its message is the expected one below
        reference()
    with pytest.raises(ValueError, match=re.escape(str(refused.value))):
        compact()
    assert list(registry.collect()) == []


def test_a_series_needs_one_value_per_label() -> None:
    counter = LabelledCounter("c_total", "x", ("job", "repository"), registry=CollectorRegistry())
    with pytest.raises(ValueError, match="label count"):
        counter.inc(("build",))


def test_each_distinct_job_name_costs_the_listener_a_few_kib_of_metrics() -> None:
    # prometheus_client's children cost about 34 KiB per job name with ARC's buckets (docs in compact_metrics).
    metrics = ListenerMetrics(scale_set=ScaleSetIdentity("", "octo", "", "arc-runners", "arc"))
    names = 200
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for index in range(names):
            job = Job(job_display_name=f"job-{index}")
            metrics.record_job_started(job)
            metrics.record_job_completed(job)
        gc.collect()
        per_name = (tracemalloc.get_traced_memory()[0] - before) / names
    finally:
        tracemalloc.stop()
    assert per_name < 4 * 1024
