"""The Grafana dashboard (``dashboards/arc-scaleset.json``) against what a running system really exports: the
``/metrics`` of the controller and of a listener, scraped after jobs ran, parsed as Prometheus parses them.

The unit test (tests/unit/observability/test_dashboard.py) checks the same queries against the registries the
code builds; this one proves the processes serve them. The shared e2e system turns listener metrics off (its
listeners share one machine's ports), so this file runs on a system of its own with them on (``metrics_system``,
tests/e2e/conftest.py): the node agent gives each listener's metrics server a free loopback port, which the
listener's own config names. tests/e2e/test_e2e_prometheus.py has a real Prometheus evaluate the queries.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from arc_scaleset_lab.harness.prometheus import listener_metrics_urls
from arc_scaleset_lab.harness.system import System
from arc_scaleset_lab.harness.waiting import eventually
from tests.e2e.harness import ScaleSetFactory
from tests.unit.observability.test_dashboard import DASHBOARD, GROUPING, MATCHER_LABEL, METRIC, queries


async def scrape(url: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(url, timeout=aiohttp.ClientTimeout(total=5)) as response:
        assert response.status == 200, url
        return await response.text()


def exported(text: str) -> tuple[set[str], dict[str, set[str]]]:
    """Family names (with their series names: ``_total``, ``_bucket``...) and the labels seen on each series."""
    names: set[str] = set()
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names.update(family.name + suffix for suffix in ("_bucket", "_sum", "_count"))
        for sample in family.samples:
            names.add(sample.name)
            labels.setdefault(sample.name, set()).update(sample.labels)
    return names, labels


async def test_every_metric_and_label_the_dashboard_queries_is_scraped_from_the_controller_or_a_listener(
    metrics_system: System,
) -> None:
    factory = ScaleSetFactory(metrics_system, namespace=metrics_system.options.watch_namespace, stem="dashboard")
    try:
        runners = await factory.create(min_runners=1, max_runners=3)
        await runners.wait_ready(timeout=90)
        await runners.enqueue(4, duration=1.0)
        await runners.wait_jobs_completed(timeout=120)

        listener_urls = await eventually(
            lambda: listener_metrics_urls(metrics_system), timeout=30, what="a listener serving metrics"
        )
        listener_url = listener_urls[0]
        # The listener publishes its job counters as it sees the jobs' messages; scrape once they are there.
        listener_text = await eventually(
            lambda: _with(scrape(listener_url), "gha_completed_jobs_total{"), timeout=30, what="completed jobs"
        )
        controller_text = await eventually(
            lambda: _with(metrics_system.controller_metrics(), "gha_controller_ephemeral_runners_created_total{"),
            timeout=30,
            what="the controller's runner counters",
        )
    finally:
        await factory.delete_all()

    names, labels = exported(controller_text + "\n" + listener_text)
    expressions = queries(json.loads(DASHBOARD.read_text()))
    used = {match.group(1) for expr in expressions for match in METRIC.finditer(expr)}
    assert used - names == set(), "the dashboard queries series neither process exports"

    for expr in expressions:
        metrics = [(m.group(1), m.group(2) or "") for m in METRIC.finditer(expr)]
        # Only series with samples carry labels in a scrape (a counter that never moved has none): those that do
        # must carry every label the query selects or groups by; the unit test covers the declared labels.
        seen = [(name, selector) for name, selector in metrics if labels.get(name)]
        available = set().union(*(labels[name] for name, _ in seen))
        for name, selector in seen:
            assert set(MATCHER_LABEL.findall(selector)) <= labels[name], f"{name} in {expr}"
        if seen:
            for grouping in GROUPING.findall(expr):
                grouped = {label.strip() for label in grouping.split(",") if label.strip()}
                assert grouped <= available, f"{grouped - available} in {expr}"
    with_samples = {name for name in used if labels.get(name)}
    assert len(with_samples) >= len(used) // 2, f"too few dashboard series had samples: {sorted(with_samples)}"


async def test_the_controller_serves_the_process_series_of_arcs_dashboards_and_no_created_series(
    metrics_system: System,
) -> None:
    """controller-runtime's registry, ARC's, serves ``process_*`` and, from Go's client, no ``*_created``."""
    families = list(text_string_to_metric_families(await metrics_system.controller_metrics()))
    names = {sample.name for family in families for sample in family.samples}
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total", "process_start_time_seconds"} <= names
    assert not [name for name in names if name.endswith("_created")]


async def _with(text: Awaitable[str], needle: str) -> str | None:
    """The awaited ``text`` when it contains ``needle``, else None (so :func:`eventually` polls again)."""
    value = await text
    return value if needle in value else None
