"""``arc-scaleset force-cleanup`` releases a scale set the controller left behind (ARC #3282): the controller
is gone, ``helm uninstall`` deleted the set and its credentials Secret, and everything hangs on finalizers."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import (
    ANNOTATION_CLEANUP_GITHUB_SECRET_NAME,
    ANNOTATION_RUNNER_SCALE_SET_ID,
    AUTOSCALING_LISTENER_FINALIZER,
    CLEANUP_PROTECTION_FINALIZER,
)
from arc_scaleset.controllers.ephemeralrunnerset.builders import desired_ephemeral_runner
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

NAME = "left-behind"


async def force_cleanup(cluster: TestCluster, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "arc_scaleset.cli", "force-cleanup", "--kubeconfig", str(cluster.kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, output.decode()


async def names(kube: KubeClient, resource: resources.Resource, namespace: str) -> list[str]:
    return [o["metadata"]["name"] for o in (await kube.list(resource, namespace=namespace)).items]


async def test_force_cleanup_releases_everything_a_gone_controller_left_on_finalizers(
    start_env: EnvFactory, kube: KubeClient, cluster: TestCluster
) -> None:
    # The controllers build the scale set (registered, runner set, listener), then stop for good.
    async with start_env(cleanup=False) as env:
        await env.kube.patch(
            resources.SECRETS, "gh-secret", {"metadata": {"finalizers": [CLEANUP_PROTECTION_FINALIZER]}},
            namespace=env.namespace,
        )  # fmt: skip
        annotations = {ANNOTATION_CLEANUP_GITHUB_SECRET_NAME: "gh-secret"}
        body = env.ars_body(NAME, minRunners=1, maxRunners=2)
        body["metadata"]["annotations"] = annotations
        await kube.create(AUTOSCALING_RUNNER_SETS, body, namespace=env.namespace)
        ready = await eventually(lambda: env.running(NAME), timeout=60, what="the scale set running")
    namespace, listener_namespace = env.namespace, env.controller_namespace
    (ers,) = (await kube.list(EPHEMERAL_RUNNER_SETS, namespace=namespace)).items
    await kube.create(EPHEMERAL_RUNNERS, desired_ephemeral_runner(ers), namespace=namespace)
    scale_set_id = ready["metadata"]["annotations"][ANNOTATION_RUNNER_SCALE_SET_ID]

    # helm uninstall: the set and the chart's Secret are deleted; with no controller they hang.
    await kube.delete(AUTOSCALING_RUNNER_SETS, NAME, namespace=namespace)
    await kube.delete(resources.SECRETS, "gh-secret", namespace=namespace)

    # A decoy in the scale set's namespace, its spec and UID annotation copied from the real listener: it names
    # the scale set, but the command must never delete or release it (issue 26).
    (real,) = (await kube.list(AUTOSCALING_LISTENERS, namespace=listener_namespace)).items
    decoy = {
        "apiVersion": real["apiVersion"], "kind": real["kind"], "spec": real["spec"],
        "metadata": {"name": "decoy", "annotations": real["metadata"]["annotations"],
                     "finalizers": [AUTOSCALING_LISTENER_FINALIZER]},
    }  # fmt: skip
    await kube.create(AUTOSCALING_LISTENERS, decoy, namespace=namespace)
    code, undecided = await force_cleanup(cluster, "--namespace", namespace, "--name", NAME, "--dry-run")
    assert code == 0, undecided
    assert "all claim this scale set: none released" in undecided
    assert "decoy" not in undecided.split("all claim")[0]

    code, dry = await force_cleanup(
        cluster, "--namespace", namespace, "--name", NAME, "--controller-namespace", listener_namespace, "--dry-run"
    )
    assert code == 0, dry
    assert "would delete EphemeralRunner" in dry
    assert "would remove finalizers" in dry
    assert await names(kube, AUTOSCALING_RUNNER_SETS, namespace) == [NAME], "a dry run changes nothing"

    code, output = await force_cleanup(
        cluster, "--namespace", namespace, "--name", NAME, "--controller-namespace", listener_namespace
    )
    assert code == 0, output
    assert f"scale set {scale_set_id} is still registered on GitHub" in output

    async def all_gone() -> bool:
        left: list[Any] = [
            *await names(kube, AUTOSCALING_RUNNER_SETS, namespace),
            *await names(kube, EPHEMERAL_RUNNER_SETS, namespace),
            *await names(kube, EPHEMERAL_RUNNERS, namespace),
            *await names(kube, AUTOSCALING_LISTENERS, listener_namespace),
            *[n for n in await names(kube, resources.SECRETS, namespace) if n == "gh-secret"],
        ]
        return not left

    await eventually(all_gone, timeout=30, what="every object of the scale set gone")
    left = await kube.get(AUTOSCALING_LISTENERS, "decoy", namespace=namespace)
    assert left["metadata"]["finalizers"] == [AUTOSCALING_LISTENER_FINALIZER], "the decoy is left as it was"
    assert "deletionTimestamp" not in left["metadata"]
    await kube.patch(AUTOSCALING_LISTENERS, "decoy", {"metadata": {"finalizers": None}}, namespace=namespace)
    await kube.delete(AUTOSCALING_LISTENERS, "decoy", namespace=namespace)

    code, output = await force_cleanup(cluster, "--namespace", namespace, "--name", NAME)
    assert code == 1
    assert f"AutoscalingRunnerSet {namespace}/{NAME} not found" in output
