"""An OpenTelemetry collector's trace endpoint, as small as a test needs: OTLP/HTTP with protobuf bodies.

:class:`OtlpReceiver` serves ``POST /v1/traces`` on loopback, decodes each body as the collector does, an
``ExportTraceServiceRequest`` (the ``opentelemetry-proto`` package the exporter brings; gzip or deflate bodies
too), keeps every span as a :class:`ReceivedSpan` and answers with an empty ``ExportTraceServiceResponse``.
Point the controller at :attr:`OtlpReceiver.url` (``--otlp-endpoint``) and read :meth:`OtlpReceiver.traces`.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from aiohttp import web
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

TRACES_PATH: Final = "/v1/traces"
PROTOBUF: Final = "application/x-protobuf"

AttributeValue = str | int | float | bool | None


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the receiver decoded it; ids in hex, times in nanoseconds since the epoch."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    resource: Mapping[str, AttributeValue] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


class OtlpReceiver:
    """Receives OTLP/HTTP protobuf traces on ``host`` (a free port); :meth:`start` before use, :meth:`stop` after."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def url(self) -> str:
        """The OTLP base URL (``--otlp-endpoint`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
        return f"http://{self.host}:{self._port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post(TRACES_PATH, self._receive)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, 0).start()
        self._port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def traces(self) -> dict[str, list[ReceivedSpan]]:
        """The spans received so far by trace ID, each trace's spans in the order they start."""
        grouped: dict[str, list[ReceivedSpan]] = {}
        for span in self.spans:
            grouped.setdefault(span.trace_id, []).append(span)
        return {trace: sorted(spans, key=lambda s: (s.start_ns, s.parent_span_id != "")) for trace, spans in
                grouped.items()}  # fmt: skip

    async def _receive(self, request: web.Request) -> web.Response:
        if request.content_type != PROTOBUF:
            return web.Response(status=415, text=f"expected {PROTOBUF}")
        body = _decoded(await request.read(), request.headers.get("Content-Encoding", ""))
        message = ExportTraceServiceRequest()
        try:
            message.ParseFromString(body)
        except DecodeError as exc:
            return web.Response(status=400, text=f"not an ExportTraceServiceRequest: {exc}")
        self.requests += 1
        self.spans.extend(_spans(message))
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(), content_type=PROTOBUF)


def _decoded(body: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body


def _spans(message: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    found: list[ReceivedSpan] = []
    for resource_spans in message.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            found.extend(
                ReceivedSpan(
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(),
                    name=span.name,
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    attributes=_attributes(span.attributes),
                    resource=resource,
                )
                for span in scope_spans.spans
            )
    return found


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, AttributeValue]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> AttributeValue:
    kind = value.WhichOneof("value")
    # Strings, booleans, integers and doubles are what the controller sends; arrays and maps are not decoded.
    return None if kind is None else getattr(value, kind)
