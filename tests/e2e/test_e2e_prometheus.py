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

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.kube.client import PatchType
from arc_scaleset.kube.resources import PODS
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.helm import Helm
from arc_scaleset_lab.harness.prometheus import LabPrometheus, system_targets
from arc_scaleset_lab.harness.system import System
from arc_scaleset_lab.harness.waiting import eventually
from tests.charts.paths import CONTROLLER_CHART
from tests.e2e.harness import ScaleSetFactory, ScaleSetHandle
from tests.unit.observability.test_dashboard import DASHBOARD, queries

RULES_KEY = "arc-scaleset.rules.yaml"
NO_NODE = {"arc-scaleset.dev/no-such-node": "true"}
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
    ``label_values(selector, label)`` the label its series must carry. Values go in as they are: Kubernetes
    names (lowercase letters, digits, dashes) match themselves in a regular expression."""
    for name, value in variables.items():
        expr = expr.replace(f"${name}", value)
    if match := LABEL_VALUES.match(expr):
        return match.group(1), match.group(2)
    return expr, None


async def firing(server: LabPrometheus, alert: str, scale_set: str) -> list[dict[str, Any]]:
    return [
        a
        for a in await server.alerts()
        if a["labels"]["alertname"] == alert and a["labels"].get("name") == scale_set and a["state"] == "firing"
    ]


async def _scraped(server: LabPrometheus, query: str) -> bool:
    return bool(await server.query(query))


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


async def test_jobs_waiting_fires_while_a_job_waits_for_a_node_and_resolves_once_it_ran(
    metrics_system: System, prometheus: LabPrometheus, factory: ScaleSetFactory
) -> None:
    runners = await factory.create(min_runners=0, max_runners=1)
    before = (await runners.wait_ready(timeout=90)).applied_revision
    # The cause: the runner's pod selects a node that does not exist, so the job GitHub assigned waits for it.
    template = scale_sets.runner_template(env={scale_sets.TEMPLATE_REVISION_ENV: "unschedulable"})
    template["spec"]["nodeSelector"] = NO_NODE
    await metrics_system.kube.patch(
        AUTOSCALING_RUNNER_SETS, runners.name, {"spec": {"template": template}}, namespace=runners.namespace
    )
    await runners.wait(lambda s: s.applied_revision > before, timeout=60, what="the unschedulable template applied")
    await runners.enqueue(1, duration=1.0)

    async def waiting_alert() -> list[dict[str, Any]]:
        await _refreshed(prometheus, metrics_system)
        return await firing(prometheus, "ArcScaleSetJobsWaiting", runners.name)

    (alert,) = await eventually(waiting_alert, timeout=90, what="ArcScaleSetJobsWaiting firing")
    assert alert["labels"]["namespace"] == runners.namespace
    assert float(alert["value"]) == 1

    await _valid_template(metrics_system, runners)  # the cause ends: the pending runner is replaced
    await runners.wait_jobs_completed(timeout=120)
    await eventually(
        lambda: _not(waiting_alert()), timeout=60, what="ArcScaleSetJobsWaiting resolved after the job ran"
    )


async def test_runners_failing_fires_when_a_runner_fails_and_resolves_after_its_window(
    metrics_system: System, prometheus: LabPrometheus, factory: ScaleSetFactory
) -> None:
    runners = await factory.create(min_runners=1, max_runners=1)
    await runners.wait_ready(timeout=90)
    # increase() counts from the counter's first sample: Prometheus must have scraped it at 0 before the failure
    # (a set can fail its first runner within a scrape interval of its creation, and did in CI).
    await eventually(
        lambda: _scraped(prometheus, f'gha_controller_ephemeral_runners_failed_total{{name="{runners.name}"}} == 0'),
        timeout=30,
        what="the set's failure counter scraped at 0",
    )
    await _fail_a_runner(metrics_system, runners)

    (alert,) = await eventually(
        lambda: firing(prometheus, "ArcScaleSetRunnersFailing", runners.name),
        timeout=60,
        what="ArcScaleSetRunnersFailing firing",
    )
    assert alert["labels"]["severity"] == "warning"
    await _valid_template(metrics_system, runners)  # no runner fails any more
    # Once the failures leave the 15 s window, the alert resolves.
    await eventually(
        lambda: _not(firing(prometheus, "ArcScaleSetRunnersFailing", runners.name)),
        timeout=60,
        what="ArcScaleSetRunnersFailing resolved",
    )


async def test_listener_offline_fires_while_the_listener_pod_finds_no_node_and_resolves_once_it_runs(
    metrics_system: System, prometheus: LabPrometheus, factory: ScaleSetFactory
) -> None:
    runners = await factory.create(min_runners=0, max_runners=1)
    listener = (await runners.wait_ready(timeout=90)).listener_name
    # Not firing before the cause (a listener pod just created is not running for a moment either).
    await eventually(
        lambda: _not(firing(prometheus, "ArcScaleSetListenerOffline", listener)),
        timeout=30,
        what="no ArcScaleSetListenerOffline while the listener runs",
    )
    # The cause: the listener's pod selects a node that does not exist, so it stays Pending and no listener runs
    # (a killed listener is back within seconds; a pod no node takes stays down as long as the template says).
    unschedulable = {"spec": {"containers": [{"name": "listener"}], "nodeSelector": NO_NODE}}
    await _listener_template(metrics_system, runners, unschedulable)

    (alert,) = await eventually(
        lambda: firing(prometheus, "ArcScaleSetListenerOffline", listener),
        timeout=90,
        what="ArcScaleSetListenerOffline firing",
    )
    # The gauge is the AutoscalingListener's, in the controller namespace (ARC's labels for it).
    assert (alert["labels"]["namespace"], alert["labels"]["severity"]) == (
        metrics_system.controller_namespace,
        "critical",
    )

    await _listener_template(metrics_system, runners, None)  # the cause ends: the pod is recreated and runs
    await eventually(
        lambda: _not(firing(prometheus, "ArcScaleSetListenerOffline", listener)),
        timeout=90,
        what="ArcScaleSetListenerOffline resolved",
    )
    await runners.wait_ready(timeout=60)  # and the new listener holds a session again


async def test_every_dashboard_query_returns_series_from_prometheus_after_a_workload(
    metrics_system: System, prometheus: LabPrometheus, factory: ScaleSetFactory
) -> None:
    runners = await factory.create(min_runners=1, max_runners=3)
    await runners.wait_ready(timeout=90)
    # The listener panels: the controller recreates a killed listener. First, so the new listener sees every job.
    (killed,) = [pid for pod, pid in metrics_system.listener_pids().items() if pod.startswith(runners.name)]
    os.kill(killed, signal.SIGKILL)
    await eventually(
        lambda: [
            p for pod, p in metrics_system.listener_pids().items() if pod.startswith(runners.name) and p != killed
        ],
        timeout=90,
        what="the listener recreated",
    )
    await runners.enqueue(4, duration=1.0)
    await runners.wait_jobs_completed(timeout=120)
    await _fail_a_runner(metrics_system, runners)  # the failure panels; and a revision: the rollout panels
    await _valid_template(metrics_system, runners)
    await runners.wait_ready(timeout=120)
    await _fail_a_busy_runner(metrics_system, runners)  # the deletions for a failed pod

    variables = {"namespace": runners.namespace, "scale_set": runners.name}
    expressions = [e for e in queries(json.loads(DASHBOARD.read_text())) if e not in NOT_PRODUCED]

    missing: list[str] = []

    async def every_query_has_series() -> bool:
        await _refreshed(prometheus, metrics_system)
        missing.clear()
        for expr in expressions:
            query, label = promql(expr, variables)
            if not [s for s in await prometheus.query(query) if label is None or s["metric"].get(label)]:
                missing.append(expr)
        return not missing

    try:
        await eventually(every_query_has_series, timeout=90, what="every dashboard query to return series")
    except TimeoutError:
        pytest.fail("dashboard queries without series:\n" + "\n".join(missing))


async def _fail_a_runner(system: System, runners: ScaleSetHandle) -> None:
    """A runner that can never start: its pod is unschedulable (so no kubelet of the lab touches it) and reports
    what a kubelet says of an image name it cannot parse (``InvalidImageName``); the controller marks the runner
    Failed. :func:`_valid_template` ends the cause."""
    template = scale_sets.runner_template(image="bad::image", env={scale_sets.TEMPLATE_REVISION_ENV: "cannot-start"})
    template["spec"]["nodeSelector"] = NO_NODE
    await system.kube.patch(
        AUTOSCALING_RUNNER_SETS, runners.name, {"spec": {"template": template}}, namespace=runners.namespace
    )

    async def pending_pod() -> str | None:
        names = {r.name for r in (await runners.snapshot()).runners if not r.deleting}
        pods = (await system.kube.list(PODS, namespace=runners.namespace)).items
        for pod in pods:
            if pod["metadata"]["name"] in names and (pod["spec"].get("nodeSelector") or {}) == NO_NODE:
                return str(pod["metadata"]["name"])
        return None

    name = await eventually(pending_pod, timeout=90, what="a pod of the template that cannot start")
    status = {"phase": "Pending", "containerStatuses": [{
        "name": "runner", "image": "bad::image", "imageID": "", "ready": False, "restartCount": 0,
        "state": {"waiting": {"reason": "InvalidImageName", "message": "couldn't parse image name"}}}]}  # fmt: skip
    await system.kube.patch(
        PODS, name, {"status": status}, namespace=runners.namespace, subresource="status", patch_type=PatchType.MERGE
    )


async def _valid_template(system: System, runners: ScaleSetHandle) -> None:
    """A template runners start from, without the node selector (a merge patch's null removes it)."""
    template = scale_sets.runner_template(env={scale_sets.TEMPLATE_REVISION_ENV: "valid"})
    template["spec"]["nodeSelector"] = None
    await system.kube.patch(
        AUTOSCALING_RUNNER_SETS, runners.name, {"spec": {"template": template}}, namespace=runners.namespace
    )


async def _listener_template(system: System, runners: ScaleSetHandle, template: dict[str, Any] | None) -> None:
    """Set the scale set's ``listenerTemplate`` (``None`` removes it: a merge patch's null)."""
    await system.kube.patch(
        AUTOSCALING_RUNNER_SETS, runners.name, {"spec": {"listenerTemplate": template}}, namespace=runners.namespace
    )


async def _fail_a_busy_runner(system: System, runners: ScaleSetHandle) -> None:
    """The runner process of a busy runner exits 1 (the simulated GitHub asks the node agent to): its job is
    lost with its pod, and the controller deletes the runner (``pod_failed``)."""
    await runners.enqueue(1, duration=300.0)
    busy = await runners.wait(lambda s: [r.name for r in s.runners if r.busy], timeout=90, what="a busy runner")
    await system.sim.fail_runner(sorted(r.name for r in busy.runners if r.busy)[0], reason="e2e")


async def _not(check: Any) -> bool:
    return not await check
