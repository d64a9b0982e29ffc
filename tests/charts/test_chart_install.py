"""The two charts installed with helm on the real control plane make a working scale set, and the controller
needs no permission beyond what they grant: it runs as the controller chart's ServiceAccount, watching one
namespace. Uninstalling the scale set leaves nothing behind (ARC #3282: objects stuck on finalizers after
``helm uninstall``)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import AlreadyExists, NotFound
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.helm import Helm, service_account_kubeconfig
from arc_scaleset_lab.harness.system import System, SystemOptions
from arc_scaleset_lab.harness.waiting import eventually
from tests.charts.paths import CONTROLLER_CHART, SCALE_SET_CHART
from tests.e2e.harness import ScaleSetHandle

RUN_ID = uuid.uuid4().hex[:6]
CONTROLLER_NAMESPACE = f"arc-helm-{RUN_ID}"
RUNNER_NAMESPACE = f"runners-helm-{RUN_ID}"
CONTROLLER_RELEASE = "arc"
CONTROLLER_SERVICE_ACCOUNT = "arc-gha-rs-controller"  # <release>-gha-rs-controller
SCALE_SET = "helm-set"
CHART_OBJECTS = (
    (resources.SECRETS, f"{SCALE_SET}-gha-rs-github-secret"),
    (resources.ROLES, f"{SCALE_SET}-gha-rs-manager"),
    (resources.ROLE_BINDINGS, f"{SCALE_SET}-gha-rs-manager"),
    (resources.SERVICE_ACCOUNTS, f"{SCALE_SET}-gha-rs-no-permission"),
)


@pytest.fixture
async def system(cluster: TestCluster, request: pytest.FixtureRequest) -> AsyncIterator[System]:
    """The controller chart installed in its own namespace, watching RUNNER_NAMESPACE only, and the system
    running with the controller authenticated as the chart's ServiceAccount. Its work directory (logs, and the
    ServiceAccount's token) is removed afterwards, unless a test failed."""
    helm = Helm(kubeconfig=cluster.kubeconfig)
    workdir = Path(tempfile.mkdtemp(prefix="arc-scaleset-helm-"))
    async with KubeClient.from_kubeconfig(cluster.kubeconfig) as admin:
        for namespace in (CONTROLLER_NAMESPACE, RUNNER_NAMESPACE):
            with contextlib.suppress(AlreadyExists):
                await admin.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
        values = {"flags": {"watchSingleNamespace": RUNNER_NAMESPACE}}
        await helm.install(CONTROLLER_CHART, CONTROLLER_RELEASE, CONTROLLER_NAMESPACE, values)
        controller_kubeconfig = await service_account_kubeconfig(
            admin, cluster.kubeconfig, CONTROLLER_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT, workdir
        )
    options = SystemOptions(
        controller_namespace=CONTROLLER_NAMESPACE,
        controller_kubeconfig=controller_kubeconfig,
        controller_args=(f"--watch-single-namespace={RUNNER_NAMESPACE}",),
        long_poll_seconds=2.0,
    )
    running = System(workdir, kubeconfig=cluster.kubeconfig, options=options)
    try:
        await running.start()
        yield running
    finally:
        await running.stop()
        with contextlib.suppress(Exception):
            await helm.uninstall(CONTROLLER_RELEASE, CONTROLLER_NAMESPACE)
        helm.close()
        async with KubeClient.from_kubeconfig(cluster.kubeconfig) as admin:
            for namespace in (CONTROLLER_NAMESPACE, RUNNER_NAMESPACE):
                with contextlib.suppress(NotFound):
                    await admin.delete(resources.NAMESPACES, namespace)
        if request.session.testsfailed:
            print(f"\nchart test logs kept in {running.log_dir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


async def test_charts_install_a_scale_set_that_runs_jobs_with_only_the_charts_permissions_and_uninstall_cleanly(
    system: System, cluster: TestCluster
) -> None:
    helm = Helm(kubeconfig=cluster.kubeconfig)
    values = {
        "githubConfigUrl": system.config_url(),
        "githubConfigSecret": {"github_token": system.pat},
        "minRunners": 1,
        "maxRunners": 3,
        "template": scale_sets.runner_template(),
        "controllerServiceAccount": {"namespace": CONTROLLER_NAMESPACE, "name": CONTROLLER_SERVICE_ACCOUNT},
    }
    handle = ScaleSetHandle.tracked(system, namespace=RUNNER_NAMESPACE, name=SCALE_SET, min_runners=1)
    try:
        await helm.install(SCALE_SET_CHART, SCALE_SET, RUNNER_NAMESPACE, values)
        await handle.wait_ready(timeout=90)
        await handle.enqueue(2, duration=1.0)
        await handle.assert_every_job_ran_once(timeout=90)
        scale_set_id = (await handle.snapshot()).scale_set_id

        await helm.uninstall(SCALE_SET, RUNNER_NAMESPACE)

        async def nothing_left() -> bool:
            try:
                await system.kube.get(AUTOSCALING_RUNNER_SETS, SCALE_SET, namespace=RUNNER_NAMESPACE)
                return False
            except NotFound:
                pass
            if (await system.kube.list(EPHEMERAL_RUNNERS, namespace=RUNNER_NAMESPACE)).items:
                return False
            for resource, name in CHART_OBJECTS:
                with contextlib.suppress(NotFound):
                    await system.kube.get(resource, name, namespace=RUNNER_NAMESPACE)
                    return False
            return True

        await eventually(nothing_left, timeout=90, what="the scale set and every chart object gone after uninstall")
        assert scale_set_id not in {s["id"] for s in await system.sim.scale_sets()}, "scale set left on GitHub"
        assert not await system.sim.runners(), "runners left registered on GitHub"
        refused = [line for line in (system.log_dir / "controller.log").read_text().splitlines() if "Forbidden" in line]
        assert not refused, "the controller needed permissions the charts do not grant:\n" + "\n".join(refused[:5])
    finally:
        await handle.stop_tracking()
        helm.close()
