"""ARC's own controller release, upgraded in place to this project's chart with the values it was installed with
(docs/migration.md, step 3), keeps its Deployment and its ServiceAccount. Kubernetes refuses an upgrade that
changes a Deployment's pod selector, which would leave the user with ARC's controller scaled to 0 and no other;
and the scale sets' RoleBindings, made by ARC's scale-set chart, name the ServiceAccount.

ARC's chart is the one of the ARC release the side-by-side benchmark builds (its Go module's ``charts/``)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest

from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.cluster import arc_binaries
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.helm import Helm
from tests.charts.paths import CONTROLLER_CHART

RELEASE = f"arc-{uuid.uuid4().hex[:6]}"
NAMESPACE = f"{RELEASE}-systems"
CONTROLLER = f"{RELEASE}-gha-rs-controller"


@pytest.fixture
async def admin(cluster: TestCluster) -> AsyncIterator[KubeClient]:
    async with KubeClient.from_kubeconfig(cluster.kubeconfig) as client:
        await client.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})
        try:
            yield client
        finally:
            with contextlib.suppress(NotFound):
                await client.delete(resources.NAMESPACES, NAMESPACE)


async def test_arcs_controller_release_upgrades_in_place_to_this_chart(cluster: TestCluster, admin: KubeClient) -> None:
    arc_chart = await asyncio.to_thread(arc_binaries.controller_chart)
    helm = Helm(kubeconfig=cluster.kubeconfig)
    values = {"replicaCount": 1}
    try:
        # The cluster's CRDs are this project's (a superset of ARC's): ARC's chart installs only its objects.
        await helm.install(arc_chart, RELEASE, NAMESPACE, values, skip_crds=True)
        before = await admin.get(resources.DEPLOYMENTS, CONTROLLER, namespace=NAMESPACE)
        await helm.upgrade(CONTROLLER_CHART, RELEASE, NAMESPACE, values)

        after = await admin.get(resources.DEPLOYMENTS, CONTROLLER, namespace=NAMESPACE)
        assert ObjectView(after).uid == ObjectView(before).uid, "the same Deployment, upgraded in place"
        assert after["spec"]["selector"] == before["spec"]["selector"]
        pod = after["spec"]["template"]["spec"]
        assert pod["containers"][0]["command"] == ["arc-scaleset", "controller"], "it runs this project now"
        assert pod["serviceAccountName"] == before["spec"]["template"]["spec"]["serviceAccountName"] == CONTROLLER
        await admin.get(resources.SERVICE_ACCOUNTS, CONTROLLER, namespace=NAMESPACE)
    finally:
        with contextlib.suppress(Exception):
            await helm.uninstall(RELEASE, NAMESPACE)
        helm.close()
