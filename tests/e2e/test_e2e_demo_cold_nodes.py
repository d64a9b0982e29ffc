"""The demo with ``--cold-nodes`` (issue 27, item 1): runner pods ask for a node pool that starts empty, the lab's
node provisioner adds nodes after its delay, every job runs once, and the summary says how many nodes came.
Small (a handful of jobs, ``minRunners: 0``), with the demo's own scenario and summary on a system of its own.
The same run's HTML report (issue 29) is then opened in headless Chromium: one demo run for both tests."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from arc_scaleset.api.constants import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.job_timeline import Phase
from arc_scaleset.kube import resources
from arc_scaleset.kube.errors import NotFound
from arc_scaleset_lab.cluster.node_pool import holds_node
from arc_scaleset_lab.demo import report_html
from arc_scaleset_lab.demo.cold_nodes import ColdNodes
from arc_scaleset_lab.demo.scenario import DemoOptions, Scenario
from arc_scaleset_lab.demo.summary import Summary
from arc_scaleset_lab.demo.view import DemoState
from arc_scaleset_lab.harness import browser
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.system import System, SystemOptions
from arc_scaleset_lab.harness.waiting import eventually

RUN_ID = uuid.uuid4().hex[:6]


@dataclass(frozen=True)
class ColdDemo:
    """One run of the demo, read by both tests: its summary, what its live view logged, and its HTML report."""

    cold: ColdNodes
    summary: Summary
    state: DemoState
    report: Path


@pytest.fixture(scope="module")
async def cold_demo(
    cluster: TestCluster, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> AsyncIterator[ColdDemo]:
    cold = ColdNodes(delay=3.0, idle=2.0, max_nodes=2, node_size=2, pool_name=f"e2e-cold-{RUN_ID}")
    options = DemoOptions(
        runners_min=0,
        runners_max=4,
        jobs=5,
        job_rate=4.0,
        duration_min=0.5,
        duration_max=1.5,
        burst=3,
        seed=3,
        cold=cold,
        namespace=f"e2e-cold-{RUN_ID}",
        name="demo-cold",
        ready_timeout=120.0,
        settle_timeout=120.0,
    )
    workdir = Path(tempfile.mkdtemp(prefix="arc-scaleset-e2e-cold-"))
    system = System(
        workdir,
        kubeconfig=cluster.kubeconfig,
        options=SystemOptions(
            controller_namespace=f"arc-e2e-cold-{RUN_ID}",
            watch_namespace=options.namespace,  # the cluster is shared: reconcile only the demo's scale set
            long_poll_seconds=2.0,
            session_timeout=10.0,
        ),
    )
    state = DemoState()
    try:
        await system.start()
        scenario = Scenario(system, options, state)
        summary = await scenario.run()
        report = report_html.write(await scenario.report(summary), tmp_path_factory.mktemp("report") / "report.html")
    finally:
        with contextlib.suppress(Exception):  # the scale set goes while its controller runs: no finalizer left
            await _delete_scale_set_and_nodes(system, options, cold)
        await system.stop()
    yield ColdDemo(cold, summary, state, report)
    if request.session.testsfailed:
        print(f"\ncold-nodes demo logs kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)


async def test_the_cold_nodes_demo_waits_for_the_nodes_it_adds_and_runs_every_job_once(cold_demo: ColdDemo) -> None:
    summary, state, cold = cold_demo.summary, cold_demo.state, cold_demo.cold
    assert summary.audit.exactly_once, summary.audit
    assert summary.settled
    (line,) = [line for line in summary.lines() if line.startswith("cold nodes:")]
    added = int(line.split()[2])
    assert 1 <= added <= cold.max_nodes, line
    assert any("launched for" in message for _, message in state.events)
    # With no idle runner and no node, the first job waited at least for a node to appear.
    assert max(summary.latencies) >= cold.delay


async def test_the_demos_report_draws_every_chart_in_headless_chromium(cold_demo: ColdDemo, chromium: str) -> None:
    """The report of the run above, opened as a user does (a file, no network): once Chromium laid it out, every
    chart has marks with a size on screen and none says "no data"; the jobs' wait for the nodes is drawn."""
    dom = await asyncio.to_thread(browser.dump_dom, cold_demo.report)
    found = browser.charts(dom)
    assert [chart.key for chart in found] == ["jobs", "waits", "runner-phases", "runner-revisions", "listener"]
    for chart in found:
        assert not chart.no_data, chart
        assert chart.marks > 0, chart
        assert chart.drawn == chart.marks, chart  # the page's script ran and every mark has a size
    assert f"s {Phase.NODE.description}</title>" in dom  # the first jobs waited for a node to appear
    png = await asyncio.to_thread(browser.screenshot, cold_demo.report, cold_demo.report.with_suffix(".png"))
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


async def _delete_scale_set_and_nodes(system: System, options: DemoOptions, cold: ColdNodes) -> None:
    kube, pool = system.kube, cold.pool()
    with contextlib.suppress(NotFound):
        await kube.delete(AUTOSCALING_RUNNER_SETS, options.name, namespace=options.namespace)

    async def runners_gone() -> bool:
        pods = (await kube.list(resources.PODS, namespace=options.namespace)).items
        try:
            await kube.get(AUTOSCALING_RUNNER_SETS, options.name, namespace=options.namespace)
        except NotFound:
            return not any(holds_node(p) for p in pods)
        return False

    # kwok finishes a pod's deletion only while its node exists: the nodes go after the runner pods.
    await eventually(runners_gone, f"AutoscalingRunnerSet {options.name} and its runner pods to be gone", timeout=60.0)
    for node in (await kube.list(resources.NODES, label_selector=pool.selector)).items:
        with contextlib.suppress(NotFound):
            await kube.delete(resources.NODES, node["metadata"]["name"])
