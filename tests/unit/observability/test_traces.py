"""Traces over OTLP: where they go, when a failing endpoint is tried again, and the spans the SDK is given."""

from __future__ import annotations

import datetime as dt
import logging
import socket
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from arc_scaleset.observability.logging import redact, unregister_secret
from arc_scaleset.observability.otlp_traces import SDK_EXPORTER_LOGGER, BackingOffExporter, OtlpTraceSink
from arc_scaleset.observability.traces import (
    ExportBackoff,
    SpanRecord,
    TraceRecord,
    display_url,
    traces_endpoint,
    url_secrets,
)

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("flag", "environ", "expected"),
    [
        ("", {}, None),
        ("http://collector:4318", {}, "http://collector:4318/v1/traces"),
        ("http://collector:4318/", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318"},
         "http://collector:4318/v1/traces"),
        ("", {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otel.example:4318"}, "https://otel.example:4318/v1/traces"),
        ("", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b/x"},
         "http://b/x"),
        ("http://collector:4318", {"OTEL_SDK_DISABLED": "true"}, None),
        ("", {"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, None),
    ],
)  # fmt: skip
def test_the_flag_wins_then_the_traces_variable_then_the_base_variable(
    flag: str, environ: dict[str, str], expected: str | None
) -> None:
    assert traces_endpoint(flag, environ) == expected


def test_an_endpoint_is_logged_without_the_credentials_a_url_may_carry() -> None:
    assert display_url("https://user:token@otel.example:4318/v1/traces?key=s3cret#x") == (
        "https://otel.example:4318/v1/traces"
    )


def test_each_failure_in_a_row_doubles_the_wait_up_to_the_cap_and_a_success_ends_the_run() -> None:
    backoff = ExportBackoff(first=5, cap=30)
    assert backoff.admits(0)
    assert [backoff.failed(0), backoff.failed(0), backoff.failed(0), backoff.failed(0)] == [5, 10, 20, 30]
    assert not backoff.admits(29.9)
    assert backoff.admits(30)
    assert backoff.succeeded() is True
    assert backoff.succeeded() is False
    assert backoff.failed(100) == 5


def test_a_collector_down_for_days_is_still_tried_at_the_cap() -> None:
    # 2.0 ** n overflows a float past n = 1023 (3.5 days of failures at a 5-minute cap).
    backoff = ExportBackoff(first=5, cap=30)
    assert [backoff.failed(0) for _ in range(1100)][-1] == 30


class ScriptedExporter(SpanExporter):
    """Answers each export with the next result; a failure takes :data:`RETRYING` seconds of ``now`` and logs as
    the SDK's exporter does while it retries."""

    RETRYING = 7.0

    def __init__(self, results: list[SpanExportResult], now: list[float]) -> None:
        self.results = results
        self.now = now
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        result = self.results.pop(0)
        if result is SpanExportResult.FAILURE:
            logging.getLogger(SDK_EXPORTER_LOGGER).warning("Transient error %s, retrying", "Connection refused")
            logging.getLogger(SDK_EXPORTER_LOGGER).error("Failed to export spans batch due to timeout")
            self.now[0] += self.RETRYING
        return result


def test_a_dead_endpoint_is_tried_again_only_after_its_backoff_with_one_line_per_try(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    inner = ScriptedExporter([SpanExportResult.FAILURE, SpanExportResult.FAILURE, SpanExportResult.SUCCESS], now)
    exporter = BackingOffExporter(
        inner, endpoint="http://collector:4318/v1/traces", backoff=ExportBackoff(first=5, cap=60), clock=lambda: now[0]
    )
    batch: Any = ["span"] * 2  # the wrapper only counts them
    caplog.set_level(logging.INFO)
    try:
        assert exporter.export(batch) is SpanExportResult.FAILURE  # gives up at 7: next try at 12
        now[0] = 11.0
        assert exporter.export(batch) is SpanExportResult.FAILURE  # dropped: no request
        now[0] = 12.0
        assert exporter.export(batch) is SpanExportResult.FAILURE  # gives up at 19: next try at 29
        now[0] = 28.0
        assert exporter.export(batch) is SpanExportResult.FAILURE  # dropped
        now[0] = 29.0
        assert exporter.export(batch) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()

    assert inner.calls == 3
    lines = [(record.name, record.getMessage()) for record in caplog.records]
    assert lines == [
        ("arc_scaleset.traces", "cannot export traces to http://collector:4318/v1/traces (Transient error Connection "
         "refused, retrying); spans are dropped until the next try in 5 s"),
        ("arc_scaleset.traces", "cannot export traces to http://collector:4318/v1/traces (Transient error Connection "
         "refused, retrying); spans are dropped until the next try in 10 s"),
        ("arc_scaleset.traces", "exporting traces to http://collector:4318/v1/traces again (8 spans dropped "
         "meanwhile)"),
    ]  # fmt: skip


def test_a_trace_is_one_root_span_with_its_children_under_it_at_their_own_times() -> None:
    memory = InMemorySpanExporter()
    sink = OtlpTraceSink("http://unused", service_name="arc-test", service_version="1.2.3", exporter=memory)
    trace = TraceRecord(
        root=SpanRecord("job", at(0), at(10), {"name": "arc", "job_id": "42"}),
        children=(SpanRecord("node", at(0), at(7), {"phase": "node"}), SpanRecord("job_start", at(7), at(10))),
    )
    sink.export(trace)
    sink.shutdown()

    spans = {span.name: span for span in memory.get_finished_spans()}
    assert sorted(spans) == ["job", "job_start", "node"]
    root = spans["job"]
    assert root.parent is None
    assert dict(root.attributes or {}) == {"name": "arc", "job_id": "42"}
    assert root.resource.attributes["service.name"] == "arc-test"
    assert root.resource.attributes["service.version"] == "1.2.3"
    for child in (spans["node"], spans["job_start"]):
        assert child.parent is not None
        assert child.parent.span_id == root.context.span_id
        assert child.context.trace_id == root.context.trace_id
    assert (spans["node"].start_time, spans["node"].end_time) == (
        int(at(0).timestamp() * 1e9), int(at(7).timestamp() * 1e9)
    )  # fmt: skip
    assert dict(spans["node"].attributes or {}) == {"phase": "node"}


def test_a_refused_connection_is_one_line_of_ours_and_the_next_batch_sends_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}/v1/traces"
    exporter = BackingOffExporter(OTLPSpanExporter(endpoint=endpoint, timeout=3), endpoint=endpoint)
    caplog.set_level(logging.DEBUG, logger="opentelemetry")
    caplog.set_level(logging.INFO, logger="arc_scaleset")
    try:
        assert exporter.export([]) is SpanExportResult.FAILURE
        assert exporter.export([]) is SpanExportResult.FAILURE  # within the backoff: dropped at once
    finally:
        exporter.shutdown()

    lines = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(lines) == 1, [record.getMessage() for record in lines]
    assert lines[0].name == "arc_scaleset.traces"
    assert lines[0].getMessage().startswith(f"cannot export traces to {endpoint} (")
    assert "Connection refused" in lines[0].getMessage()  # the cause, from the SDK's first word on it
    assert lines[0].getMessage().endswith("spans are dropped until the next try in 5 s")


def test_a_token_in_the_endpoints_query_or_password_is_masked_in_every_log_line() -> None:
    endpoint = "https://collector:s3cret-password@otel.example/v1/traces?sig=Zq9xR2mW7pL4vB8n"
    sink = OtlpTraceSink(endpoint, service_name="arc-scaleset", service_version="test", exporter=InMemorySpanExporter())
    try:
        quoted = f"ConnectionError for url: {endpoint}"  # as the HTTP library words a failure
        masked = redact(quoted)
        assert "s3cret-password" not in masked
        assert "Zq9xR2mW7pL4vB8n" not in masked  # no key name marks it: only the registration does
    finally:
        sink.shutdown()
        for secret in url_secrets(endpoint):
            unregister_secret(secret)
