"""The Grafana dashboard (``dashboards/arc-scaleset.json``) queries only metrics and labels the code exports:
a renamed metric or label fails here instead of leaving an empty panel."""

from __future__ import annotations

import json
import re
from typing import Any

from prometheus_client import CollectorRegistry

from arc_scaleset.controllers.metrics import ControllerMetrics
from arc_scaleset.kube.runtime_metrics import RuntimeMetrics
from arc_scaleset.listener.metrics import ListenerMetrics, ScaleSetIdentity
from tests.paths import REPO_ROOT

DASHBOARD = REPO_ROOT / "dashboards" / "arc-scaleset.json"
METRIC = re.compile(r"\b((?:gha|controller_runtime|workqueue)_[a-z_]+)\b(\{[^}]*\})?")
MATCHER_LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
SERIES_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported() -> dict[str, set[str]]:
    """Every series name the controller and the listener export, with its label names (``le`` for buckets)."""
    controller = CollectorRegistry()
    RuntimeMetrics(controller)
    ControllerMetrics(controller).observe_scale_sets(list)
    listener = ListenerMetrics(
        scale_set=ScaleSetIdentity(enterprise="", organization="org", repository="", name="arc", namespace="ns")
    )
    names: dict[str, set[str]] = {}
    for registry in (controller, listener.registry):
        for family in registry.collect():
            labels = _declared_labels(registry, family.name)
            for suffix in SERIES_SUFFIXES.get(family.type, ("",)):
                names[family.name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    return names


def _declared_labels(registry: CollectorRegistry, family: str) -> set[str]:
    # prometheus_client keeps a metric's label names on the collector; the family alone has none without samples.
    for collector in list(registry._collector_to_names):  # no public way to list collectors
        labelnames = getattr(collector, "_labelnames", None)
        if labelnames is not None and getattr(collector, "_name", None) == family:
            return set(labelnames)
    return {"name", "namespace", "repository", "organization", "enterprise"}  # the scrape-time state gauges


def queries(node: Any) -> list[str]:
    """Every PromQL expression in the dashboard: panel targets and templating queries."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                found.append(value)
            else:
                found += queries(value)
    elif isinstance(node, list):
        for item in node:
            found += queries(item)
    return found


def test_every_metric_the_dashboard_queries_is_exported() -> None:
    names = exported()
    used = {match.group(1) for expr in queries(json.loads(DASHBOARD.read_text())) for match in METRIC.finditer(expr)}

    assert used, "the dashboard queries no gha_* or controller metric"
    assert used - names.keys() == set()


def test_every_label_the_dashboard_selects_or_groups_by_is_exported() -> None:
    names = exported()
    for expr in queries(json.loads(DASHBOARD.read_text())):
        metrics = [(m.group(1), m.group(2) or "") for m in METRIC.finditer(expr)]
        available = set().union(*(names.get(name, set()) for name, _ in metrics))
        for name, selector in metrics:
            assert set(MATCHER_LABEL.findall(selector)) <= names.get(name, set()), f"{name} in {expr}"
        for grouping in GROUPING.findall(expr):
            grouped = {label.strip() for label in grouping.split(",") if label.strip()}
            assert grouped <= available, f"{grouped - available} in {expr}"


def test_the_dashboard_has_a_row_per_concern() -> None:
    rows = [panel["title"] for panel in json.loads(DASHBOARD.read_text())["panels"] if panel["type"] == "row"]

    assert rows == [
        "Jobs",
        "Runners: desired vs actual",
        "Runner lifecycle and failures",
        "Listener health",
        "Revision rollouts",
        "Controller",
    ]
