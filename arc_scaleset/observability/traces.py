"""Traces over OTLP, off unless an endpoint is configured (docs/observability.md, "Traces").

The public face of the controller's tracing, free of the OpenTelemetry SDK: what a trace is
(:class:`TraceRecord`, a root :class:`SpanRecord` and its children, with explicit times), where it goes
(:func:`traces_endpoint`, from ``--otlp-endpoint`` or the standard ``OTEL_EXPORTER_OTLP_*`` variables) and
the sink that takes it (:class:`TraceSink`). The sink backed by the SDK,
:class:`arc_scaleset.observability.otlp_traces.OtlpTraceSink`, is imported by the ``controller`` command only
when an endpoint is configured, so a controller without one never loads the SDK.

:class:`ExportBackoff` is the pure decision of when to try an unreachable endpoint again: exports wait
longer after each failure (up to :data:`MAX_BACKOFF_SECONDS`), so a dead collector costs a log line per
attempt, ever rarer, and never a reconcile's time.
"""

from __future__ import annotations

import datetime as dt
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

ENDPOINT_ENV: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
"""The OTLP base URL of every signal (``http://collector:4318``); traces go to its :data:`TRACES_PATH`."""
TRACES_ENDPOINT_ENV: Final = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
"""The full URL traces are posted to; wins over :data:`ENDPOINT_ENV`."""
SDK_DISABLED_ENV: Final = "OTEL_SDK_DISABLED"
TRACES_PATH: Final = "v1/traces"
FIRST_BACKOFF_SECONDS: Final = 5.0
MAX_BACKOFF_SECONDS: Final = 300.0

AttributeValue = str | int | float | bool


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One span: its name, its times (aware datetimes) and its attributes."""

    name: str
    start: dt.datetime
    end: dt.datetime
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One trace: ``root`` and its ``children`` (each a child of the root, in the order given)."""

    root: SpanRecord
    children: tuple[SpanRecord, ...] = ()


class TraceSink(Protocol):
    """Where finished traces go. :meth:`export` never blocks on the network (the spans are queued and sent in
    batches by another thread); :meth:`shutdown` sends what is queued, blocking at most the exporter's timeout."""

    def export(self, trace: TraceRecord) -> None: ...

    def shutdown(self) -> None: ...


def traces_endpoint(flag: str, environ: Mapping[str, str]) -> str | None:
    """The URL traces are posted to, ``None`` when tracing is off.

    ``flag`` (``--otlp-endpoint``, an OTLP base URL) wins; then :data:`TRACES_ENDPOINT_ENV` as it is; then
    :data:`ENDPOINT_ENV` with :data:`TRACES_PATH` added, as the OpenTelemetry specification reads them.
    ``OTEL_SDK_DISABLED=true`` turns tracing off whatever is set.
    """
    if environ.get(SDK_DISABLED_ENV, "").strip().lower() == "true":
        return None
    if flag.strip():
        return _signal_url(flag.strip())
    if traces := environ.get(TRACES_ENDPOINT_ENV, "").strip():
        return traces
    if base := environ.get(ENDPOINT_ENV, "").strip():
        return _signal_url(base)
    return None


def display_url(url: str) -> str:
    """``url`` fit for a log line: without user information, query or fragment (where credentials may hide)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def url_secrets(url: str) -> list[str]:
    """The parts of ``url`` that may carry credentials (a password, the query, the fragment), to be masked in
    every log line: the HTTP library's error text quotes the URL it was given whole."""
    parts = urllib.parse.urlsplit(url)
    return [part for part in (parts.password, parts.query, parts.fragment) if part]


def _signal_url(base: str) -> str:
    return f"{base.rstrip('/')}/{TRACES_PATH}"


@dataclass
class ExportBackoff:
    """When to try an endpoint again after failed exports: not before :attr:`resume_at` (monotonic seconds).

    Each failure in a row doubles the wait, from ``first`` to at most ``cap``; a success ends the run.
    """

    first: float = FIRST_BACKOFF_SECONDS
    cap: float = MAX_BACKOFF_SECONDS
    failures: int = 0
    resume_at: float = 0.0

    def admits(self, now: float) -> bool:
        """Whether an export may be tried at ``now`` (otherwise its spans are dropped)."""
        return now >= self.resume_at

    def failed(self, now: float) -> float:
        """Record a failed export at ``now``; the seconds until the next try."""
        # The exponent stops growing long past the cap: 2.0 ** n overflows a float past n = 1023.
        wait = min(self.first * 2.0 ** min(self.failures, 64), self.cap)
        self.failures += 1
        self.resume_at = now + wait
        return wait

    def succeeded(self) -> bool:
        """Record a successful export; whether it ends a run of failures (the endpoint is back)."""
        recovered = self.failures > 0
        self.failures, self.resume_at = 0, 0.0
        return recovered
