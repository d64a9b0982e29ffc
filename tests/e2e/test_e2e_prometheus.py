"""A real Prometheus (built from its Go module) scrapes the controller and the listener of a running system and
evaluates what users run against them: every query of every panel of ``dashboards/arc-scaleset.json``, and the
recording and alert rules the controller chart ships (rendered by helm from the chart, loaded by Prometheus
itself), with alerts that fire while their cause lasts and resolve after it ends.

Scrapes and rule evaluations run every second and the alerts' ``for:`` are chart values set short here, so the
alerts' lifecycles take seconds; every wait is on a condition read from Prometheus's HTTP API.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from arc_scaleset_lab.harness.helm import Helm
from arc_scaleset_lab.harness.prometheus import LabPrometheus, system_targets
from arc_scaleset_lab.harness.system import System
from arc_scaleset_lab.harness.waiting import eventually
from tests.charts.paths import CONTROLLER_CHART
from tests.e2e.harness import ScaleSetFactory, ScaleSetHandle
from tests.unit.observability.test_dashboard import DASHBOARD, queries

RULES_KEY = "arc-scaleset.rules.yaml"
RULE_VALUES = {
    "prometheusRules": {
        "enabled": True,
        "interval": "1s",
        "listenerOfflineFor": "2s",
        "jobsWaitingFor": "2s",
        "runnersFailingWindow": "15s",
        "runnersFailingFor": "0s",
    }
}
LABEL_VALUES = re.compile(r"^label_values\((.*),\s*([a-zA-Z_]+)\)$", re.DOTALL)
ALERTS = {"ArcScaleSetListenerOffline", "ArcScaleSetJobsWaiting", "ArcScaleSetRunnersFailing"}
NOT_PRODUCED = {
    # Only a queue message the listener cannot read counts here; the simulated GitHub sends none unless a test
    # scripts its queue in-process (tests/integration/listener/test_listener_poison_messages.py).
    "sum by (reason) (increase(gha_listener_skipped_messages_total[1h]))",
}


async def chart_rules(directory: Path) -> Path:
    """The controller chart's rules file as helm renders it with :data:`RULE_VALUES`, written into ``directory``."""
    helm = Helm()
    try:
        objects = await helm.template(CONTROLLER_CHART, "arc", "arc-system", RULE_VALUES)
    finally:
        helm.close()
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap" and RULES_KEY in o.get("data", {})]
    path = directory / RULES_KEY
    path.write_text(config_map["data"][RULES_KEY])
    return path


@pytest.fixture(scope="module")
async def prometheus(metrics_system: System, prometheus_bin: Path) -> AsyncIterator[LabPrometheus]:
    workdir = Path(tempfile.mkdtemp(prefix="arc-scaleset-e2e-prometheus-"))
    server = LabPrometheus(workdir, rule_files=[await chart_rules(workdir)], binary=prometheus_bin)
    await server.start()
    server.set_targets(system_targets(metrics_system))
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
async def factory(metrics_system: System, request: pytest.FixtureRequest) -> AsyncIterator[ScaleSetFactory]:
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower().removeprefix("test_"))[:20]
    made = ScaleSetFactory(metrics_system, namespace=metrics_system.options.watch_namespace, stem=stem.strip("-"))
    try:
        yield made
    finally:
        await made.delete_all()


def promql(expr: str, variables: dict[str, str]) -> tuple[str, str | None]:
    """A dashboard expression as Grafana sends it with ``variables`` chosen: the PromQL, and for a templating
    ``label_values(selector, label)`` the label its series must carry."""
    for name, value in variables.items():
        expr = expr.replace(f"${name}", re.escape(value))
    if match := LABEL_VALUES.match(expr):
        return match.group(1), match.group(2)
    return expr, None


async def firing(server: LabPrometheus, alert: str, scale_set: str) -> list[dict[str, Any]]:
    return [
        a
        for a in await server.alerts()
        if a["labels"]["alertname"] == alert and a["labels"].get("name") == scale_set and a["state"] == "firing"
    ]


async def _refreshed(server: LabPrometheus, system: System) -> None:
    # Listener pods come and go (a recreated one gets a new port): point Prometheus at the ones running now.
    server.set_targets(system_targets(system))


async def test_the_charts_rules_are_loaded_by_prometheus_and_healthy(prometheus: LabPrometheus) -> None:
    groups = await prometheus.rule_groups()
    rules = [rule for group in groups for rule in group["rules"]]
    assert {r["name"] for r in rules if r["type"] == "alerting"} == ALERTS
    assert {r["name"] for r in rules if r["type"] == "recording"} == {
        "arc_scaleset:jobs_waiting",
        "arc_scaleset:ephemeral_runners_failed:rate5m",
    }
    # Evaluated at least once each, without error (an unknown function or a bad vector match shows here).
    await eventually(lambda: _all_evaluated_ok(prometheus), timeout=15, what="every rule evaluated with health ok")


async def _all_evaluated_ok(server: LabPrometheus) -> bool:
    rules = [rule for group in await server.rule_groups() for rule in group["rules"]]
    bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not [b for b in bad if b[1]], bad
    return not bad


async def test_jobs_waiting_fires_while_jobs_wait_for_a_runner_and_resolves_once_they_ran(
    metrics_system: System, prometheus: LabPrometheus, factory: ScaleSetFactory
) -> None:
    runners = await factory.create(min_runners=0, max_runners=1)
    await runners.wait_ready(timeout=90)
    await _refreshed(prometheus, metrics_system)
    # One runner at most: the second and third jobs wait for the first to end, longer than the 2 s `for:`.
    await runners.enqueue(3, duration=4.0)

    async def waiting_alert() -> list[dict[str, Any]]:
        await _refreshed(prometheus, metrics_system)
        return await firing(prometheus, "ArcScaleSetJobsWaiting", runners.name)

    (alert,) = await eventually(waiting_alert, timeout=60, what="ArcScaleSetJobsWaiting firing")
    assert alert["labels"]["namespace"] == runners.namespace
    assert float(alert["value"]) >= 1

    await runners.wait_jobs_completed(timeout=120)
    await eventually(
        lambda: _not(waiting_alert()), timeout=30, what="ArcScaleSetJobsWaiting resolved after the jobs ran"
    )


async def test_runners_failing_fires_when_a_runner_fails_and_resolves_after_its_window(
    metrics_system: System, prometheus: LabPrometheus, factory: ScaleSetFactory
) -> None:
    runners = await factory.create(min_runners=1, max_runners=1)
    await runners.wait_ready(timeout=90)
    await _fail_a_runner(metrics_system, runners)

    (alert,) = await eventually(
        lambda: firing(prometheus, "ArcScaleSetRunnersFailing", runners.name),
        timeout=60,
        what="ArcScaleSetRunnersFailing firing",
    )
    assert alert["labels"]["severity"] == "warning"
    # No further failure: once the failure leaves the 15 s window, the alert resolves.
    await eventually(
        lambda: _not(firing(prometheus, "ArcScaleSetRunnersFailing", runners.name)),
        timeout=60,
        what="ArcScaleSetRunnersFailing resolved",
    )


async def test_every_dashboard_query_returns_series_from_prometheus_after_a_workload(
    metrics_system: System, prometheus: LabPrometheus, factory: ScaleSetFactory
) -> None:
    runners = await factory.create(min_runners=1, max_runners=3)
    await runners.wait_ready(timeout=90)
    await runners.enqueue(4, duration=1.0)
    await runners.wait_jobs_completed(timeout=120)
    await _fail_a_runner(metrics_system, runners)  # the failure panels
    await runners.wait_ready(timeout=90)
    await runners.change_template()  # the rollout panels: idle runners of the old revision are replaced
    await runners.wait_settled(timeout=120)
    listener_pid = next(iter(metrics_system.listener_pids().values()))
    os.kill(listener_pid, signal.SIGKILL)  # the listener panels: the controller recreates it

    variables = {"namespace": runners.namespace, "scale_set": runners.name}
    expressions = [e for e in queries(json.loads(DASHBOARD.read_text())) if e not in NOT_PRODUCED]

    async def empty_queries() -> list[str] | None:
        await _refreshed(prometheus, metrics_system)
        empty = []
        for expr in expressions:
            query, label = promql(expr, variables)
            series = await prometheus.query(query)
            if not [s for s in series if label is None or s["metric"].get(label)]:
                empty.append(expr)
        return None if empty else empty

    missing = await eventually(empty_queries, timeout=90, what="every dashboard query to return series")
    assert missing is None


async def _fail_a_runner(system: System, runners: ScaleSetHandle) -> None:
    """The runner process of one registered runner exits 1 (the simulated GitHub asks its node agent to)."""
    name = sorted(await runners.registered_runner_names())[0]
    await system.sim.fail_runner(name, reason="e2e")


async def _not(check: Any) -> bool:
    return not await check
