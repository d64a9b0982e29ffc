"""The demo with ``--proxy --tls`` (issue 17): the simulated GitHub over TLS with a CA only a ConfigMap holds, every
GitHub call through a proxy that requires credentials, and a summary that says so from the proxy's own log and
the sim's record of who connected to it. Small (a handful of jobs, one burst), with the demo's own pieces: its
network, its scenario and its summary, on a system of its own (the demo's sim and proxy settings)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from pathlib import Path

from arc_scaleset.api.constants import AUTOSCALING_RUNNER_SETS
from arc_scaleset.kube.errors import NotFound
from arc_scaleset_lab.demo.network import DemoNetwork
from arc_scaleset_lab.demo.scenario import DemoOptions, Scenario
from arc_scaleset_lab.demo.view import DemoState
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.secret_scan import find_leaks
from arc_scaleset_lab.harness.system import System, SystemOptions
from arc_scaleset_lab.harness.waiting import eventually

RUN_ID = uuid.uuid4().hex[:6]


async def test_the_demo_behind_a_proxy_with_a_private_ca_runs_every_job_and_all_traffic_goes_through_the_proxy(
    cluster: TestCluster,
) -> None:
    options = DemoOptions(
        runners_min=1,
        runners_max=4,
        jobs=6,
        job_rate=4.0,
        duration_min=0.5,
        duration_max=1.5,
        burst=3,
        seed=2,
        tls=True,
        proxy=True,
        namespace=f"e2e-demo-{RUN_ID}",
        name="demo-proxied",
        ready_timeout=120.0,
        settle_timeout=120.0,
    )
    workdir = Path(tempfile.mkdtemp(prefix="arc-scaleset-e2e-demo-"))
    network = DemoNetwork(workdir, tls=options.tls, proxy=options.proxy, tie_to_parent=True)
    network.start()
    system = System(
        workdir,
        kubeconfig=cluster.kubeconfig,
        options=network.system_options(
            SystemOptions(
                controller_namespace=f"arc-e2e-demo-{RUN_ID}",
                watch_namespace=options.namespace,  # the cluster is shared: reconcile only the demo's scale set
                long_poll_seconds=2.0,
                session_timeout=10.0,
            )
        ),
    )
    try:
        await system.start()
        assert system.sim_url.startswith("https://")
        summary = await Scenario(system, options, DemoState(), network=network).run()
    finally:
        with contextlib.suppress(Exception):  # the scale set goes while its controller runs: no finalizer left
            await _delete_scale_set(system, options)
        await system.stop()
        await network.stop()

    assert summary.audit.exactly_once, summary.audit
    assert summary.settled
    assert summary.burst == 3
    traffic = summary.traffic
    assert traffic is not None
    assert traffic.all_through_proxy, traffic
    assert traffic.via_proxy > 0
    assert traffic.tunnels > 0
    assert traffic.direct == {}, "requests that reached the sim without the proxy"
    assert traffic.refused == 0
    # Read once at the end: a runner that just finished its job may still have its pod beside the idle ones.
    assert traffic.runner_pods >= options.runners_min, "the idle runners left at the end"
    assert traffic.runner_pods_without_proxy == (), "every runner pod takes https_proxy from the proxy Secret"
    assert summary.ok
    assert any(line.startswith("proxy:") and "none bypassed it" in line for line in summary.lines())
    # The proxy's password is a secret of the run like the PAT: no process logged it.
    leaks = find_leaks(system.log_files(), system.ledger)
    assert not leaks, leaks[:5]
    shutil.rmtree(workdir, ignore_errors=True)


async def _delete_scale_set(system: System, options: DemoOptions) -> None:
    with contextlib.suppress(NotFound):
        await system.kube.delete(AUTOSCALING_RUNNER_SETS, options.name, namespace=options.namespace)

    async def gone() -> bool:
        try:
            await system.kube.get(AUTOSCALING_RUNNER_SETS, options.name, namespace=options.namespace)
        except NotFound:
            return True
        return False

    await eventually(gone, f"AutoscalingRunnerSet {options.name} to be gone", timeout=60.0)
