"""Which listener metrics to export, as the CRDs hold it (``listenerMetrics`` of an AutoscalingRunnerSet,
``metrics`` of an AutoscalingListener): :class:`MetricsConfig` and the three metric kinds it maps names to.

The listener never imports these pydantic models: it reads the ``metrics`` section of its ``config.json`` into
the plain dataclasses of :mod:`arc_scaleset.api.listener_metrics`, into which the controller converts these
(``arc_scaleset.controllers.autoscalinglistener.config.metrics_for_listener``). A module of their own, which
:mod:`arc_scaleset.api.common` re-exports, so that ``from arc_scaleset.api.metrics_config import MetricsConfig``
builds no kind.
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
