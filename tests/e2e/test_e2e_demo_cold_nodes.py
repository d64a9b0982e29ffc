"""The demo with ``--cold-nodes`` (issue 27, item 1): runner pods ask for a node pool that starts empty, the lab's
node provisioner adds nodes after its delay, every job runs once, and the summary says how many nodes came.
Small (a handful of jobs, ``minRunners: 0``), with the demo's own scenario and summary on a system of its own."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from pathlib import Path

from arc_scaleset.api.constants import AUTOSCALING_RUNNER_SETS
from arc_scaleset.kube import resources
from arc_scaleset.kube.errors import NotFound
from arc_scaleset_lab.cluster.node_pool import holds_node
from arc_scaleset_lab.demo.cold_nodes import ColdNodes
from arc_scaleset_lab.demo.scenario import DemoOptions, Scenario
from arc_scaleset_lab.demo.view import DemoState
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.system import System, SystemOptions
from arc_scaleset_lab.harness.waiting import eventually

RUN_ID = uuid.uuid4().hex[:6]


async def test_the_cold_nodes_demo_waits_for_the_nodes_it_adds_and_runs_every_job_once(cluster: TestCluster) -> None:
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
        summary = await Scenario(system, options, state).run()
    finally:
        with contextlib.suppress(Exception):  # the scale set goes while its controller runs: no finalizer left
            await _delete_scale_set_and_nodes(system, options, cold)
        await system.stop()

    assert summary.audit.exactly_once, summary.audit
    assert summary.settled
    (line,) = [line for line in summary.lines() if line.startswith("cold nodes:")]
    added = int(line.split()[2])
    assert 1 <= added <= cold.max_nodes, line
    assert any("launched for" in message for _, message in state.events)
    # With no idle runner and no node, the first job waited at least for a node to appear.
    assert max(summary.latencies) >= cold.delay
    shutil.rmtree(workdir, ignore_errors=True)


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
