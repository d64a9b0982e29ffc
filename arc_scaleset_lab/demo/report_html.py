"""The demo's HTML report: one self-contained page, its charts inline SVG drawn here from a
:class:`~arc_scaleset_lab.demo.report_data.ReportData` (no style, script or font from anywhere else, so it opens
without a network).

:func:`render` is a pure function of the data. Every chart is a ``<figure class="chart">``: an ``<svg>`` whose
drawn data carry the class ``mark``, or, when there is nothing to draw, a ``<p class="no-data">``. A few lines
of inline script, run once the page is laid out, count each chart's marks that have a size on screen into its
``data-drawn`` attribute, so a headless browser's DOM says whether the charts were drawn
(tests/e2e/test_e2e_demo_cold_nodes.py reads it).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from arc_scaleset.api.job_timeline import ORDER, Phase
from arc_scaleset.diagnose.jobs import slowest_phase
from arc_scaleset_lab.demo.report_data import JobSpan, ReportData, Sample
from arc_scaleset_lab.demo.summary import percentile
from arc_scaleset_lab.demo.view import PHASE_ORDER

__all__ = ["Chart", "charts", "render", "write"]

K = TypeVar("K", bound=Hashable)

WIDTH: Final = 960
LEFT: Final = 90  # room for the y axis' labels and the listener chart's lane names
RIGHT: Final = 180  # room for the legend
TOP: Final = 12
BOTTOM: Final = 34  # room for the x axis' labels and its title
PLOT_HEIGHT: Final = 200
LEGEND_CHARS: Final = 26  # longer names are cut in the legend (their full text is its tooltip)

JOB_COLORS: Final = {"waiting": "#e8a33d", "running": "#3b7dd8", "done": "#3a9a5b"}
RUNNER_PHASE_COLORS: Final = {
    "New": "#b9c0c8",
    "Pending": "#e8a33d",
    "Running": "#3b7dd8",
    "Succeeded": "#3a9a5b",
    "Failed": "#d64545",
    "Outdated": "#8e6bbf",
    "Deleting": "#6b7178",
}
WAIT_COLORS: Final = {
    Phase.OFFER: "#9aa5b1",
    Phase.ACQUISITION: "#5b8def",
    Phase.RUNNER_CREATION: "#8e6bbf",
    Phase.NODE: "#d64545",
    Phase.POD_START: "#e8a33d",
    Phase.RUNNER_REGISTRATION: "#3a9a5b",
    Phase.ASSIGNMENT: "#2bb5b8",
    Phase.JOB_START: "#c46fb0",
}
PALETTE: Final = ("#3b7dd8", "#e8a33d", "#3a9a5b", "#d64545", "#8e6bbf", "#2bb5b8", "#c46fb0", "#6b7178")
LISTENER_POD_COLORS: Final = {"Running": "#3a9a5b", "Pending": "#e8a33d", "Terminating": "#6b7178"}


@dataclass(frozen=True)
class Chart:
    """One figure of the report: ``svg`` is ``None`` when there was nothing to draw."""

    key: str
    title: str
    caption: str
    svg: str | None


@dataclass(frozen=True)
class Axis:
    """A linear map from data to pixels."""

    low: float
    high: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        span = self.high - self.low
        return self.start + (value - self.low) / span * (self.end - self.start) if span else self.start


@dataclass(frozen=True)
class Layer:
    """One named series of a chart: its value at each of the chart's times (a step function)."""

    name: str
    color: str
    values: tuple[float, ...]


def render(data: ReportData) -> str:
    """The report as one HTML document."""
    figures = "\n".join(_figure(chart) for chart in charts(data))
    summary = "".join(f"<li>{html.escape(line)}</li>" for line in data.summary)
    started = data.started_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    return _PAGE.format(
        title=html.escape(data.title),
        started=started,
        summary=f"<ul class='summary'>{summary}</ul>" if summary else "",
        figures=figures,
        events=_events(data.events),
    )


def write(data: ReportData, path: Path) -> Path:
    """Write the report of ``data`` to ``path`` (its directory made when missing); the absolute path written."""
    path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data), encoding="utf-8")
    return path


def charts(data: ReportData) -> list[Chart]:
    """The report's charts, in the order shown; the charts over time share one time axis."""
    window = _window(data)
    return [
        _jobs_chart(data, window),
        _waits_chart(data),
        _runners_chart(
            "runner-phases", "Runners by phase", data.samples, window, lambda s: s.runners_by_phase, _phase_color
        ),
        _runners_chart(
            "runner-revisions",
            "Runners by revision",
            data.samples,
            window,
            lambda s: {f"revision {rev}": n for rev, n in sorted(s.runners_by_revision.items())},
            _palette_color,
        ),
        _sessions_chart(data.samples, window),
    ]


# -- the charts -------------------------------------------------------------------------------------------------


def _jobs_chart(data: ReportData, window: tuple[float, float]) -> Chart:
    caption = "Jobs waiting (enqueued, not started), running and done, from the simulated GitHub's job records."
    spans = [span for span in data.jobs if span.enqueued is not None]
    if not spans:
        return Chart("jobs", "Jobs over time", caption, None)
    times, counts = job_counts(spans)
    layers = [Layer(name, JOB_COLORS[name], tuple(c[i] for c in counts)) for i, name in enumerate(JOB_COLORS)]
    latencies = [
        span.started - span.enqueued for span in spans if span.started is not None and span.enqueued is not None
    ]
    caption += (
        f" {len(spans)} jobs; queue-to-start p50 {percentile(latencies, 0.5):.1f} s, "
        f"p95 {percentile(latencies, 0.95):.1f} s, max {max(latencies, default=math.nan):.1f} s."
    )
    return Chart("jobs", "Jobs over time", caption, _step_lines(times, layers, window))


def _waits_chart(data: ReportData) -> Chart:
    title = "Queue to start, by phase"
    caption = (
        "Each started job's wait from queued on GitHub to started on its runner, divided into the phases of its "
        "timeline (the listener's record on the runner and the runner's pod), in the order the jobs were queued. "
        "The times are whole seconds, as Kubernetes records them: a job that started in the second it was queued "
        "has no bar."
    )
    if not data.waits:
        return Chart("waits", title, caption, None)
    waited = sum(1 for wait in data.waits if wait.total > 0)
    caption += f" {len(data.waits)} {'job' if len(data.waits) == 1 else 'jobs'}, {waited} waited a second or more."
    top = slowest_phase([wait.row for wait in data.waits])
    if top is not None:
        caption += f" {top.line[0].upper()}{top.line[1:]}."
    return Chart("waits", title, caption, _wait_bars(data))


def _runners_chart(
    key: str,
    title: str,
    samples: Sequence[Sample],
    window: tuple[float, float],
    counts: Callable[[Sample], Mapping[str, int]],
    color: Callable[[str, int], str],
) -> Chart:
    caption = f"{title} over time: every EphemeralRunner of the scale set, as the demo's live view saw them."
    if not samples or not any(counts(s) for s in samples):
        return Chart(key, title, caption, None)
    names = _ordered_names(counts(s) for s in samples)
    layers = [
        Layer(name, color(name, index), tuple(float(counts(s).get(name, 0)) for s in samples))
        for index, name in enumerate(names)
    ]
    return Chart(key, title, caption, _stacked_steps(tuple(s.at for s in samples), layers, window))


def _sessions_chart(samples: Sequence[Sample], window: tuple[float, float]) -> Chart:
    title = "The listener"
    caption = "Who held the scale set's message session on the simulated GitHub, and the listener pod's phase."
    sessions = intervals([(s.at, s.session_owner) for s in samples], window[1])
    pods = intervals([(s.at, s.listener_pod) for s in samples], window[1])
    if not sessions and not pods:
        return Chart("listener", title, caption, None)
    lanes = [
        ("session", [(a, b, f"session held by {owner}", PALETTE[i % len(PALETTE)]) for i, (a, b, owner) in
                     enumerate(sessions)]),
        ("listener pod", [(a, b, f"pod {phase}", LISTENER_POD_COLORS.get(phase, "#b9c0c8")) for a, b, phase in pods]),
    ]  # fmt: skip
    return Chart("listener", title, caption, _lanes(lanes, window))


# -- pure helpers on the data -----------------------------------------------------------------------------------


def job_counts(spans: Sequence[JobSpan]) -> tuple[tuple[float, ...], tuple[tuple[int, int, int], ...]]:
    """The jobs (waiting, running, done) from each moment one of them changed state, in time order."""
    moments = sorted({t for span in spans for t in (span.enqueued, span.started, span.finished) if t is not None})
    counts = []
    for moment in moments:
        waiting = running = done = 0
        for span in spans:
            if span.finished is not None and span.finished <= moment:
                done += 1
            elif span.started is not None and span.started <= moment:
                running += 1
            elif span.enqueued is not None and span.enqueued <= moment:
                waiting += 1
        counts.append((waiting, running, done))
    return tuple(moments), tuple(counts)


def intervals(values: Sequence[tuple[float, K | None]], end: float) -> list[tuple[float, float, K]]:
    """The runs of one value in a series of ``(time, value)`` samples, each lasting until the next sample (the
    last one until ``end``); runs of ``None`` are left out."""
    runs: list[tuple[float, float, K]] = []
    for index, (at, value) in enumerate(values):
        until = values[index + 1][0] if index + 1 < len(values) else max(end, at)
        if value is None:
            continue
        if runs and runs[-1][2] == value and runs[-1][1] == at:
            runs[-1] = (runs[-1][0], until, value)
        else:
            runs.append((at, until, value))
    return runs


def _window(data: ReportData) -> tuple[float, float]:
    """The time the charts over time cover: from the first sample or job to the last."""
    times = [s.at for s in data.samples]
    times += [t for span in data.jobs for t in (span.enqueued, span.started, span.finished) if t is not None]
    if not times:
        return (0.0, 1.0)
    low, high = min(times), max(times)
    return (low, high if high > low else low + 1.0)


def _ordered_names(counts: Iterable[Mapping[str, int]]) -> list[str]:
    seen: dict[str, None] = {}
    for mapping in counts:
        for name, count in mapping.items():
            if count:
                seen.setdefault(name)
    known = [name for name in PHASE_ORDER if name in seen]
    return known + sorted(name for name in seen if name not in known)


def _phase_color(name: str, index: int) -> str:
    return RUNNER_PHASE_COLORS.get(name, PALETTE[index % len(PALETTE)])


def _palette_color(name: str, index: int) -> str:
    return PALETTE[index % len(PALETTE)]


# -- drawing ----------------------------------------------------------------------------------------------------


def _svg(height: float, body: Iterable[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0f}" '
        f'viewBox="0 0 {WIDTH} {height:.0f}" role="img">' + "".join(body) + "</svg>"
    )


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def ticks(low: float, high: float, count: int = 6, *, whole: bool = False) -> list[float]:
    """Round values between ``low`` and ``high`` (1, 2 or 5 times a power of ten apart), about ``count`` of them;
    ``whole``: at least 1 apart (for counts)."""
    if high <= low:
        return [low]
    raw = (high - low) / max(1, count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    step = max(step, 1) if whole else step
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def _axes(x: Axis, y: Axis, *, x_title: str, y_ticks: Sequence[float]) -> list[str]:
    """Grid lines, tick labels and the x axis' title."""
    parts = []
    for value in y_ticks:
        py = y(value)
        parts.append(f'<line class="grid" x1="{x.start:.1f}" x2="{x.end:.1f}" y1="{py:.1f}" y2="{py:.1f}"/>')
        parts.append(
            f'<text class="tick" x="{x.start - 6:.1f}" y="{py + 4:.1f}" text-anchor="end">{_num(value)}</text>'
        )
    bottom = y.start
    for value in ticks(x.low, x.high, 10):
        px = x(value)
        parts.append(f'<line class="axis" x1="{px:.1f}" x2="{px:.1f}" y1="{bottom:.1f}" y2="{bottom + 4:.1f}"/>')
        parts.append(f'<text class="tick" x="{px:.1f}" y="{bottom + 16:.1f}" text-anchor="middle">{_num(value)}</text>')
    parts.append(f'<line class="axis" x1="{x.start:.1f}" x2="{x.end:.1f}" y1="{bottom:.1f}" y2="{bottom:.1f}"/>')
    parts.append(f'<text class="axis-title" x="{x.end:.1f}" y="{bottom + 30:.1f}" text-anchor="end">{x_title}</text>')
    return parts


def _legend(items: Sequence[tuple[str, str]]) -> list[str]:
    left = WIDTH - RIGHT + 16
    parts = []
    for index, (name, color) in enumerate(items):
        y = TOP + 6 + index * 18
        parts.append(f'<rect x="{left}" y="{y}" width="12" height="12" fill="{color}"/>')
        shown = name if len(name) <= LEGEND_CHARS else name[: LEGEND_CHARS - 1] + "\N{HORIZONTAL ELLIPSIS}"
        parts.append(
            f'<text class="legend" x="{left + 18}" y="{y + 10}">{html.escape(shown)}'
            f"<title>{html.escape(name)}</title></text>"
        )
    return parts


def _time_axes(window: tuple[float, float], top_value: float) -> tuple[Axis, Axis, list[float]]:
    y_ticks = ticks(0.0, max(1.0, top_value), 5, whole=True)
    x = Axis(window[0], window[1], LEFT, WIDTH - RIGHT)
    y = Axis(0.0, max(y_ticks[-1], top_value, 1.0), TOP + PLOT_HEIGHT, TOP)
    return x, y, y_ticks


def _changes(times: Sequence[float], values: Sequence[float], end: float) -> list[tuple[float, float]]:
    """A step function's corners: the value from each time it changed, then held until ``end``."""
    corners: list[tuple[float, float]] = []
    for at, value in zip(times, values, strict=True):
        if not corners or corners[-1][1] != value:
            corners.append((at, value))
    return [*corners, (max(end, times[-1]), values[-1])] if corners else []


def _step_path(corners: Sequence[tuple[float, float]], x: Axis, y: Axis) -> list[tuple[float, float]]:
    points: list[tuple[float, float]] = []
    for index, (at, value) in enumerate(corners):
        if index:
            points.append((x(at), y(corners[index - 1][1])))
        points.append((x(at), y(value)))
    return points


def _points(points: Iterable[tuple[float, float]]) -> str:
    return " ".join(f"{px:.1f},{py:.1f}" for px, py in points)


def _step_lines(times: Sequence[float], layers: Sequence[Layer], window: tuple[float, float]) -> str:
    x, y, y_ticks = _time_axes(window, max(max(layer.values) for layer in layers))
    parts = _axes(x, y, x_title="seconds since the workload started", y_ticks=y_ticks)
    for layer in layers:
        path = _step_path(_changes(times, layer.values, window[1]), x, y)
        parts.append(
            f'<polyline class="mark" fill="none" stroke="{layer.color}" stroke-width="2" points="{_points(path)}">'
            f"<title>{html.escape(layer.name)}</title></polyline>"
        )
    parts += _legend([(layer.name, layer.color) for layer in layers])
    return _svg(TOP + PLOT_HEIGHT + BOTTOM, parts)


def _stacked_steps(times: Sequence[float], layers: Sequence[Layer], window: tuple[float, float]) -> str:
    """Layers stacked on each other, each a band between the layers below it and itself."""
    totals = [sum(layer.values[i] for layer in layers) for i in range(len(times))]
    x, y, y_ticks = _time_axes(window, max(totals))
    parts = _axes(x, y, x_title="seconds since the workload started", y_ticks=y_ticks)
    below = [0.0] * len(times)
    for layer in layers:
        above = [b + v for b, v in zip(below, layer.values, strict=True)]
        if any(layer.values):
            top = _step_path(_changes(times, above, window[1]), x, y)
            bottom = _step_path(_changes(times, below, window[1]), x, y)
            parts.append(
                f'<polygon class="mark" fill="{layer.color}" fill-opacity="0.85" '
                f'points="{_points([*top, *reversed(bottom)])}">'
                f"<title>{html.escape(layer.name)}</title></polygon>"
            )
        below = above
    parts += _legend([(layer.name, layer.color) for layer in reversed(layers)])
    return _svg(TOP + PLOT_HEIGHT + BOTTOM, parts)


def _wait_bars(data: ReportData) -> str:
    """One bar per job, its phases side by side in the order a job meets them."""
    waits = data.waits
    bar = max(3.0, min(14.0, 420.0 / len(waits)))
    height = TOP + bar * len(waits) + BOTTOM
    longest = max(wait.total for wait in waits)
    x_ticks = ticks(0.0, max(longest, 1.0), 8)
    x = Axis(0.0, max(x_ticks[-1], longest, 1.0), LEFT, WIDTH - RIGHT)
    y = Axis(0.0, float(len(waits)), TOP, TOP + bar * len(waits))
    parts = _axes(x, Axis(0.0, 1.0, y.end, y.start), x_title="seconds from queued to started", y_ticks=())
    for value in x_ticks:
        parts.append(
            f'<line class="grid" x1="{x(value):.1f}" x2="{x(value):.1f}" y1="{y.start:.1f}" y2="{y.end:.1f}"/>'
        )
    for index, wait in enumerate(waits):
        reached = 0.0
        for _, phase in ORDER:
            seconds = wait.phases.get(phase, 0.0)
            if seconds <= 0:
                continue
            label = html.escape(f"{wait.name}: {seconds:.1f} s {phase.description}")
            parts.append(
                f'<rect class="mark" x="{x(reached):.1f}" y="{y(index) + 0.5:.1f}" '
                f'width="{max(0.5, x(reached + seconds) - x(reached)):.1f}" height="{max(1.0, bar - 1):.1f}" '
                f'fill="{WAIT_COLORS[phase]}"><title>{label}</title></rect>'
            )
            reached += seconds
    present = [phase for _, phase in ORDER if any(wait.phases.get(phase) for wait in waits)]
    parts += _legend([(phase.value.replace("_", " "), WAIT_COLORS[phase]) for phase in present])
    return _svg(max(height, TOP + 18 * len(present) + 12), parts)


def _lanes(lanes: Sequence[tuple[str, Sequence[tuple[float, float, str, str]]]], window: tuple[float, float]) -> str:
    """Named lanes of intervals (start, end, label, color) over the time axis."""
    lane = 26
    x = Axis(window[0], window[1], LEFT, WIDTH - RIGHT)
    bottom = TOP + lane * len(lanes)
    parts = _axes(x, Axis(0.0, 1.0, bottom, TOP), x_title="seconds since the workload started", y_ticks=())
    legend: dict[str, str] = {}
    for index, (name, runs) in enumerate(lanes):
        top = TOP + index * lane
        parts.append(f'<text class="tick" x="{x.start - 6:.1f}" y="{top + lane / 2 + 4:.1f}" text-anchor="end">'
                     f"{html.escape(name)}</text>")  # fmt: skip
        for start, end, label, color in runs:
            parts.append(
                f'<rect class="mark" x="{x(start):.1f}" y="{top + 4:.1f}" width="{max(1.0, x(end) - x(start)):.1f}" '
                f'height="{lane - 8}" fill="{color}"><title>{html.escape(label)}</title></rect>'
            )
            legend.setdefault(label, color)
    parts += _legend(list(legend.items())[:6])
    return _svg(max(bottom + BOTTOM, TOP + 18 * min(6, len(legend)) + 12), parts)


# -- the page ---------------------------------------------------------------------------------------------------


def _figure(chart: Chart) -> str:
    body = chart.svg if chart.svg is not None else '<p class="no-data">no data</p>'
    return (
        f'<figure class="chart" id="{chart.key}" data-chart="{chart.key}">'
        f"<h2>{html.escape(chart.title)}</h2>{body}<figcaption>{html.escape(chart.caption)}</figcaption></figure>"
    )


def _events(events: Sequence[tuple[float, str]]) -> str:
    if not events:
        return ""
    rows = "".join(f"<tr><td>{at:.0f} s</td><td>{html.escape(message)}</td></tr>" for at, message in events)
    return f"<details><summary>Events ({len(events)})</summary><table class='events'>{rows}</table></details>"


_PAGE: Final = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; color: #1f2328; margin: 24px auto; max-width: 1000px; }}
h1 {{ font-size: 22px; margin: 0 0 4px; }}
h2 {{ font-size: 16px; margin: 0 0 6px; }}
.started {{ color: #59636e; margin: 0 0 12px; }}
.summary {{ font-family: ui-monospace, monospace; font-size: 12px; background: #f6f8fa; padding: 8px 8px 8px 28px; }}
figure.chart {{ margin: 18px 0; }}
figcaption {{ color: #59636e; font-size: 12px; }}
.no-data {{ color: #d64545; font-weight: bold; }}
svg text {{ font: 11px system-ui, sans-serif; fill: #59636e; }}
svg text.legend {{ fill: #1f2328; }}
svg .grid {{ stroke: #e6e9ed; }}
svg .axis {{ stroke: #8c959f; }}
table.events td {{ padding: 0 8px; font-size: 12px; }}
</style>
</head>
<body>
<h1>{title}</h1>
<p class="started">The workload started at {started}; times are seconds since then.</p>
{summary}
{figures}
{events}
<script>
// Count each chart's marks that the browser laid out with a size: what a headless browser's DOM dump shows.
for (const chart of document.querySelectorAll("figure.chart")) {{
  let drawn = 0;
  for (const mark of chart.querySelectorAll(".mark")) {{
    const box = mark.getBBox();
    if (box.width > 0 || box.height > 0) drawn += 1;
  }}
  chart.dataset.drawn = String(drawn);
}}
document.body.dataset.checked = "true";
</script>
</body>
</html>
"""
