"""Capacity truth, end to end (docs/capacity.md): a scale set whose runner namespace's ResourceQuota admits 5
runners advertises 5, not its ``maxRunners`` of 20, so of a burst of 20 jobs it takes no more than 5 and a
sibling scale set with the same labels, in another namespace, runs the rest -- every job exactly once, and no
runner pod of the first set is refused by the quota.

The quota is enforced and its usage counted by the real API server and kube-controller-manager. The two sets
live in two namespaces, so this file starts a system of its own whose controller watches every namespace (the
shared e2e system watches one).
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import CONDITION_CAPACITY_LIMITED
from arc_scaleset.controllers.ephemeralrunnerset.capacity import REASON_QUOTA
from arc_scaleset.kube import resources
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset_lab.demo.summary import audit_jobs
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.system import System, SystemOptions
from arc_scaleset_lab.harness.waiting import eventually
from tests.e2e.harness import REPOSITORY, ScaleSetHandle, started_system

RUN_ID = uuid.uuid4().hex[:6]
QUOTA_NAMESPACE = f"e2e-cap-{RUN_ID}"
SIBLING_NAMESPACE = f"e2e-cap-sib-{RUN_ID}"
LABEL = f"capacity-{RUN_ID}"
RUNNER_CPU = "100m"
QUOTA_CPU = "500m"  # 5 runners of 100m
JOBS = 20
MAX_RUNNERS = 20


@pytest.fixture(scope="module")
async def capacity_system(cluster: TestCluster) -> AsyncIterator[System]:
    workdir = Path(tempfile.mkdtemp(prefix="arc-scaleset-e2e-capacity-"))
    options = SystemOptions(
        controller_namespace=f"arc-e2e-cap-{RUN_ID}",
        watch_namespace=None,  # two scale-set namespaces: the controller watches them all
        long_poll_seconds=2.0,
        session_timeout=10.0,
    )
    try:
        async with started_system(
            workdir, kubeconfig=cluster.kubeconfig, namespace=QUOTA_NAMESPACE, options=options
        ) as running:
            await running.ensure_namespace(SIBLING_NAMESPACE, labels={"arc-scaleset.dev/test": "true"})
            yield running
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def create_set(system: System, *, namespace: str, name: str) -> ScaleSetHandle:
    """A scale set of ``maxRunners`` 20 whose runners request 100m CPU, labelled :data:`LABEL` besides its name."""
    secret = await system.create_pat_secret(namespace, name=f"{name}-github-token")
    handle = ScaleSetHandle.tracked(system, namespace=namespace, name=name, min_runners=0)
    template = scale_sets.runner_template(env={scale_sets.TEMPLATE_REVISION_ENV: "1"})
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": RUNNER_CPU, "memory": "64Mi"}}
    manifest = scale_sets.autoscaling_runner_set(
        name=name,
        namespace=namespace,
        config_url=system.config_url(),
        secret=secret,
        min_runners=0,
        max_runners=MAX_RUNNERS,
        template=template,
    )
    manifest["spec"]["runnerScaleSetLabels"] = [LABEL]
    await system.kube.create(AUTOSCALING_RUNNER_SETS, manifest, namespace=namespace)
    return handle


async def advertises(system: System, handle: ScaleSetHandle, capacity: int) -> bool:
    """Whether the set's listener sent ``X-ScaleSetMaxCapacity: capacity`` with its last poll (the sim's record)."""
    scale_set_id = (await handle.snapshot()).scale_set_id
    sessions = await system.sim.sessions()
    return any(s["scaleSetId"] == scale_set_id and s.get("maxCapacity") == capacity for s in sessions)


async def quota_refusals(system: System, namespace: str) -> list[str]:
    """Events in ``namespace`` that say the quota refused a pod."""
    events = (await system.kube.list(resources.CORE_EVENTS, namespace=namespace)).items
    return [
        f"{e.get('reason')}: {e.get('message')}"
        for e in events
        if e.get("reason") == "QuotaExceeded" or "exceeded quota" in str(e.get("message", ""))
    ]


async def test_a_set_whose_quota_admits_5_takes_5_jobs_of_a_burst_and_its_sibling_runs_the_rest(
    capacity_system: System,
) -> None:
    system = capacity_system
    quota: dict[str, Any] = {
        "metadata": {"name": "runners"},
        "spec": {"hard": {"requests.cpu": QUOTA_CPU, "requests.memory": "2Gi"}},
    }
    await system.kube.create(resources.RESOURCE_QUOTAS, quota, namespace=QUOTA_NAMESPACE)
    first = await create_set(system, namespace=QUOTA_NAMESPACE, name=f"cap-first-{RUN_ID}")

    async def first_registered() -> bool:
        return (await first.snapshot()).scale_set_id is not None

    # The sibling only once the first holds its scale set ID: the controller registers sets concurrently, and the
    # first must be the older scale set on GitHub (below).
    await eventually(first_registered, "the first set registered on GitHub", timeout=90)
    sibling = await create_set(system, namespace=SIBLING_NAMESPACE, name=f"cap-sibling-{RUN_ID}")
    try:
        # Both listeners poll, the first advertising what its quota admits rather than its maxRunners.
        await eventually(lambda: advertises(system, first, 5), "the first set to advertise 5", timeout=90)
        await eventually(lambda: advertises(system, sibling, MAX_RUNNERS), "the sibling to advertise 20", timeout=90)
        first_id = (await first.snapshot()).scale_set_id
        sibling_id = (await sibling.snapshot()).scale_set_id
        assert first_id is not None
        assert sibling_id is not None
        # The first set is the older one: without capacity truth it would be offered every job.
        assert first_id < sibling_id

        job_ids = set(await system.sim.enqueue_job([LABEL], repository=REPOSITORY, duration=15.0, count=JOBS))
        first.job_ids = sibling.job_ids = sorted(job_ids)

        jobs = await first.wait_jobs_completed(timeout=180)
        audit = audit_jobs(jobs)
        assert audit.exactly_once, audit
        assert audit.succeeded == JOBS, audit
        by_set = {set_id: sum(1 for j in jobs if j["scaleSetId"] == set_id) for set_id in (first_id, sibling_id)}
        assert by_set == {first_id: 5, sibling_id: JOBS - 5}, by_set
        assert first.tracker.created <= 5, "the first set never made a runner its quota cannot hold"
        assert await quota_refusals(system, QUOTA_NAMESPACE) == []

        async def runner_sets_advertising_5() -> list[dict[str, Any]] | None:
            listed = (await system.kube.list(EPHEMERAL_RUNNER_SETS, namespace=QUOTA_NAMESPACE)).items
            return listed if [e["status"].get("advertisedCapacity") for e in listed] == [5] else None

        # The quota's usage lets go of the last runner pod a moment after the pod is gone (kube-controller-manager
        # recounts it); the set, which watches its quota, advertises all 5 again then.
        ers = await eventually(runner_sets_advertising_5, "the set to advertise its quota's 5 again", timeout=60)
        condition = get_condition(ers[0]["status"].get("conditions"), CONDITION_CAPACITY_LIMITED)
        assert condition is not None
        assert (condition["status"], condition["reason"]) == ("True", REASON_QUOTA)
    finally:
        for handle in (first, sibling):
            await handle.stop_tracking()
            await handle.delete(timeout=90)
