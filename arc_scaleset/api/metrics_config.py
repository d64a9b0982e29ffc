"""Which listener metrics to export (``listenerMetrics`` of an AutoscalingRunnerSet, ``metrics`` of the
listener's ``config.json``): :class:`MetricsConfig` and the three metric kinds it maps names to.

Apart from :mod:`arc_scaleset.api.common` (which re-exports these names) because the listener needs these
models and none of the kinds': it imports this module alone (docs/listener.md).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Strict

from arc_scaleset.api.api_model import ApiModel

__all__ = ["CounterMetric", "GaugeMetric", "HistogramMetric", "MetricsConfig"]


class CounterMetric(ApiModel):
    """A listener counter and the labels it carries."""

    labels: list[str]


class GaugeMetric(ApiModel):
    """A listener gauge and the labels it carries."""

    labels: list[str]


class HistogramMetric(ApiModel):
    """A listener histogram, its labels and (optionally) its bucket boundaries."""

    labels: list[str]
    # Numbers only: a "1.5" or a true is refused, as Go's decoder refuses it, rather than converted.
    buckets: list[Annotated[float, Strict()]] | None = None


class MetricsConfig(ApiModel):
    """Which listener metrics to export, keyed by metric name."""

    counters: dict[str, CounterMetric] | None = None
    gauges: dict[str, GaugeMetric] | None = None
    histograms: dict[str, HistogramMetric] | None = None
