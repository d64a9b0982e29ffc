"""The ``metrics`` section of the listener's ``config.json``: which listener metrics to export, each with its
labels and, for a histogram, its buckets (docs/listener.md, "Metrics").

It is ARC's ``MetricsConfig`` as the listener reads it, decoded from JSON as Go decodes it
(:mod:`arc_scaleset.api.go_json`): a ``null`` entry is an entry without labels, ``null`` labels are no labels,
and a label or bucket of another JSON type is refused, by path (``metrics.histograms.h.buckets.0``).

The AutoscalingListener's ``spec.metrics`` (an AutoscalingRunnerSet's ``spec.listenerMetrics``) is the CRD's
pydantic model, :class:`arc_scaleset.api.metrics_config.MetricsConfig`; the controller turns it into this one
through its JSON, so it reaches the listener exactly as the file carries it. These are plain frozen dataclasses
because the listener imports them, and pydantic would cost it about 10 MB (issue 20).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.api import go_json

__all__ = ["CounterSpec", "GaugeSpec", "HistogramSpec", "ListenerMetricsConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CounterSpec:
    """A listener counter to export and the labels it carries."""

    labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class GaugeSpec:
    """A listener gauge to export and the labels it carries."""

    labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class HistogramSpec:
    """A listener histogram to export, the labels it carries and its bucket boundaries (``None``: the
    listener's default buckets)."""

    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerMetricsConfig:
    """Which listener metrics to export, keyed by metric name; ``None`` for a kind the section leaves out."""

    counters: Mapping[str, CounterSpec] | None = None
    gauges: Mapping[str, GaugeSpec] | None = None
    histograms: Mapping[str, HistogramSpec] | None = None

    @classmethod
    def from_document(cls, document: object) -> ListenerMetricsConfig:
        """Decode the section's JSON object; :class:`~arc_scaleset.api.go_json.Refused` names every value that
        does not decode, by its path below the section, and carries what did as ``salvaged``."""
        return _METRICS(document)

    def to_document(self) -> dict[str, Any]:
        """The JSON object, as ARC's Go structs write it: a kind left out is omitted, labels are always
        written, buckets only when set, an integral bound as an integer."""
        document: dict[str, Any] = {}
        for kind, entries in (("counters", self.counters), ("gauges", self.gauges)):
            if entries is not None:
                document[kind] = {name: {"labels": list(entry.labels)} for name, entry in entries.items()}
        if self.histograms is not None:
            document["histograms"] = {name: _histogram_document(entry) for name, entry in self.histograms.items()}
        return document


def _histogram_document(histogram: HistogramSpec) -> dict[str, Any]:
    document: dict[str, Any] = {"labels": list(histogram.labels)}
    if histogram.buckets is not None:
        document["buckets"] = [_go_float(bound) for bound in histogram.buckets]
    return document


def _go_float(value: float) -> float | int:
    # Go writes a float64 without a fraction as an integer (1, not 1.0) below 1e21, so an ARC-written file reads
    # back byte for byte.
    return int(value) if value.is_integer() and abs(value) < 1e21 else value


_LABELS: Final = go_json.array_of(go_json.string)
_METRICS: Final = go_json.struct(
    ListenerMetricsConfig,
    {
        "counters": go_json.object_of(go_json.struct(CounterSpec, {"labels": _LABELS})),
        "gauges": go_json.object_of(go_json.struct(GaugeSpec, {"labels": _LABELS})),
        "histograms": go_json.object_of(
            go_json.struct(HistogramSpec, {"labels": _LABELS, "buckets": go_json.array_of(go_json.number)})
        ),
    },
    expected="an object with counters, gauges and histograms",
)
