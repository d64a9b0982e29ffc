"""Labelled counters and histograms that keep a few numbers per label set (the listener's job metrics).

prometheus_client's :class:`~prometheus_client.Counter` and :class:`~prometheus_client.Histogram` build a child
object per label set, and a histogram child holds, for each bucket, a lock-guarded value object and that
bucket's own copy of the label values: about 11 KiB per label set with ARC's 45 buckets. The listener's job
metrics are labelled by job name (ARC's labels), so every distinct job name a listener sees adds three
histogram children and two counter children for the rest of its life: 34 KiB per name, 6.7 MiB after 200
names. Here a label set costs its tuple of label values and one list of numbers (under 1 KiB for a
histogram with ARC's buckets).

The exposition is prometheus_client's own, sample for sample: the same family names and types, samples in
the order the label sets were first recorded, cumulative ``_bucket`` samples with prometheus_client's ``le``
text, then ``_count`` and ``_sum``. No ``_created`` series: the listener turns them off (ARC exports none).

Not thread-safe, and need not be: the listener records and serves its metrics on one event loop.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

LabelValues = tuple[str, ...]


class LabelledCounter:
    """A counter per label set, registered on ``registry``; ``name`` ends in ``_total`` or gets it, as with
    prometheus_client. Raises ``ValueError`` for what prometheus_client refuses (a bad name or label name)."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], *, registry: CollectorRegistry
    ) -> None:
        # Validated by prometheus_client itself, so a config it refused is refused the same way; a labelled
        # metric that is not registered holds no children, so this costs nothing afterwards.
        Counter(name, documentation, labelnames, registry=None)
        self.name = name.removesuffix("_total")
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._values: dict[LabelValues, float] = {}
        registry.register(self)

    def inc(self, labelvalues: LabelValues, amount: float = 1.0) -> None:
        """Add ``amount`` (not negative) to the series of ``labelvalues`` (one value per label name)."""
        if amount < 0:
            raise ValueError("a counter can only increase")
        if len(labelvalues) != len(self.labelnames):
            raise ValueError("incorrect label count")
        self._values[labelvalues] = self._values.get(labelvalues, 0.0) + amount

    def describe(self) -> Iterable[Metric]:
        return [Metric(self.name, self.documentation, "counter")]

    def collect(self) -> Iterable[Metric]:
        metric = Metric(self.name, self.documentation, "counter")
        for labelvalues, value in list(self._values.items()):
            metric.add_sample(self.name + "_total", dict(zip(self.labelnames, labelvalues, strict=True)), value)
        return [metric]


class LabelledHistogram:
    """A histogram per label set with fixed ``buckets`` (``+Inf`` added when missing), registered on ``registry``.

    Each series is one list: the observation count of each bucket (not cumulative), then the sum. Raises
    ``ValueError`` for what prometheus_client refuses (a bad name or label name, ``le``, unsorted buckets).
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        Histogram(name, documentation, labelnames, buckets=buckets, registry=None)  # validation, as above
        bounds = [float(bound) for bound in buckets]
        if bounds[-1] != math.inf:
            bounds.append(math.inf)
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.bounds: tuple[float, ...] = tuple(bounds)
        # prometheus_client's own `le` text, shared by every series.
        self._le = tuple(floatToGoString(bound) for bound in bounds)  # type: ignore[no-untyped-call]
        self._series: dict[LabelValues, list[float]] = {}
        registry.register(self)

    def observe(self, labelvalues: LabelValues, amount: float) -> None:
        """Count ``amount`` in the first bucket whose bound is at least ``amount``, and add it to the sum."""
        if len(labelvalues) != len(self.labelnames):
            raise ValueError("incorrect label count")
        series = self._series.get(labelvalues)
        if series is None:
            series = self._series[labelvalues] = [0] * len(self.bounds) + [0.0]
        series[-1] += amount
        index = bisect.bisect_left(self.bounds, amount)
        if index < len(self.bounds) and amount <= self.bounds[index]:  # NaN is in no bucket, as in prometheus_client
            series[index] += 1

    def describe(self) -> Iterable[Metric]:
        return [Metric(self.name, self.documentation, "histogram")]

    def collect(self) -> Iterable[Metric]:
        metric = Metric(self.name, self.documentation, "histogram")
        for labelvalues, series in list(self._series.items()):
            labels = dict(zip(self.labelnames, labelvalues, strict=True))
            total = 0.0
            for le, count in zip(self._le, series, strict=False):  # the series' last number is the sum
                total += count
                metric.add_sample(self.name + "_bucket", {**labels, "le": le}, total)
            metric.add_sample(self.name + "_count", labels, total)
            metric.add_sample(self.name + "_sum", labels, float(series[-1]))
        return [metric]
