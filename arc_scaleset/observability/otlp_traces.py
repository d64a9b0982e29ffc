"""The OpenTelemetry SDK behind :class:`~arc_scaleset.observability.traces.TraceSink` (docs/observability.md,
"Traces"). Imported only by the ``controller`` command, and only when an endpoint is configured: nothing else
in the operator may import this module or ``opentelemetry`` (a unit test holds the default controller to it).

A private :class:`TracerProvider` (the process's global one is left alone) with a :class:`BatchSpanProcessor`:
:meth:`OtlpTraceSink.export` only queues ended spans (bounded; the SDK drops spans when the queue is full), and
the processor's thread posts them in batches with the OTLP/HTTP protobuf exporter, which reads the standard
``OTEL_EXPORTER_OTLP_TRACES_*`` / ``OTEL_EXPORTER_OTLP_*`` variables for headers, certificates, timeout and
compression. :class:`BackingOffExporter` keeps an unreachable endpoint cheap: after a failure, batches are
dropped without a request until :class:`~arc_scaleset.observability.traces.ExportBackoff` admits the next
try, and each failed try is one log line of ours instead of the SDK's retry chatter.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from typing import Final

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Span, set_span_in_context

from arc_scaleset.observability.logging import register_secret
from arc_scaleset.observability.traces import ExportBackoff, SpanRecord, TraceRecord, display_url, url_secrets

log = logging.getLogger("arc_scaleset.traces")

SDK_EXPORTER_LOGGER: Final = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
"""The logger the OTLP/HTTP span exporter (and its HTTP client's retries) write to."""
INSTRUMENTATION_SCOPE: Final = "arc_scaleset"


class _FirstWords(logging.Filter):
    """Keeps the SDK exporter's first message since the last :meth:`take` and lets none through:
    :class:`BackingOffExporter` says it once. The first, because it names the cause ("Transient error
    <connection refused> ... retrying"); the last one of a failed export only says that retries ran out."""

    def __init__(self) -> None:
        super().__init__()
        self.message = ""

    def filter(self, record: logging.LogRecord) -> bool:
        self.message = self.message or record.getMessage()
        return False

    def take(self) -> str:
        message, self.message = self.message, ""
        return message


class BackingOffExporter(SpanExporter):
    """Wraps ``inner``: exports only when ``backoff`` admits them, and logs each failure and the recovery once.

    ``export`` runs on the batch processor's thread, never on the event loop; ``clock`` is monotonic seconds.
    """

    def __init__(
        self,
        inner: SpanExporter,
        *,
        endpoint: str,
        backoff: ExportBackoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._inner = inner
        self._endpoint = display_url(endpoint)
        self._backoff = backoff or ExportBackoff()
        self._clock = clock
        self._dropped = 0
        self._sdk_words = _FirstWords()
        logging.getLogger(SDK_EXPORTER_LOGGER).addFilter(self._sdk_words)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        now = self._clock()
        if not self._backoff.admits(now):
            self._dropped += len(spans)
            return SpanExportResult.FAILURE
        result = self._inner.export(spans)
        if result is SpanExportResult.SUCCESS:
            if self._backoff.succeeded():
                log.info("exporting traces to %s again (%d spans dropped meanwhile)", self._endpoint, self._dropped)
                self._dropped = 0
            return result
        self._dropped += len(spans)
        # From when the export gave up: the SDK's own retries may have taken seconds of this thread's time.
        wait = self._backoff.failed(self._clock())
        reason = self._sdk_words.take() or "no reason given"
        log.warning(
            "cannot export traces to %s (%s); spans are dropped until the next try in %.0f s", self._endpoint,
            reason, wait,
        )  # fmt: skip
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()
        logging.getLogger(SDK_EXPORTER_LOGGER).removeFilter(self._sdk_words)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class OtlpTraceSink:
    """A :class:`~arc_scaleset.observability.traces.TraceSink` posting to ``endpoint`` (the full traces URL), or
    to ``exporter`` when one is given (tests)."""

    def __init__(
        self, endpoint: str, *, service_name: str, service_version: str, exporter: SpanExporter | None = None
    ) -> None:
        for secret in url_secrets(endpoint):
            register_secret(secret)
        # Resource.create adds OTEL_RESOURCE_ATTRIBUTES; OTEL_SERVICE_NAME still wins over service_name.
        resource = Resource.create({SERVICE_NAME: service_name, SERVICE_VERSION: service_version})
        self._provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        inner = exporter if exporter is not None else OTLPSpanExporter(endpoint=endpoint)
        self._provider.add_span_processor(BatchSpanProcessor(BackingOffExporter(inner, endpoint=endpoint)))
        self._tracer = self._provider.get_tracer(INSTRUMENTATION_SCOPE)

    def export(self, trace: TraceRecord) -> None:
        """Queue ``trace``: its root span and each child under it, with their own times."""
        root = self._start(trace.root, parent=None)
        context = set_span_in_context(root)
        for child in trace.children:
            self._start(child, parent=context).end(end_time=_nanoseconds(child.end))
        root.end(end_time=_nanoseconds(trace.root.end))

    def _start(self, record: SpanRecord, *, parent: Context | None) -> Span:
        return self._tracer.start_span(
            record.name,
            context=parent,
            start_time=_nanoseconds(record.start),
            attributes=dict(record.attributes),
        )

    def shutdown(self) -> None:
        """Send what is queued (at most the exporter's timeout on a slow endpoint), then stop the thread."""
        self._provider.shutdown()


def _nanoseconds(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)
