"""Where a job's wait went (issue 29), on the running system: a job whose runner pod waits for a node shows that
wait as the largest phase of its timeline, in ``arc-scaleset jobs``, in ``gha_controller_job_wait_phase_seconds``
and in ``explain``, and still in ``jobs`` once its runner is deleted; and its busy runner's pod carries the job's
cost labels.

The lab's node provisioner runs on a :class:`FakeClock`: the node appears only once the test lets its delay pass,
so the pod waits for a node exactly as long as the test holds the node back (at least :data:`NODE_WAIT` seconds).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import uuid
from typing import Any

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.clock import FakeClock
from arc_scaleset.controllers.ephemeralrunner.cost_labels import LABEL_JOB, LABEL_REPOSITORY, label_value
from arc_scaleset.kube import resources
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.cluster.node_pool import is_unschedulable
from arc_scaleset_lab.cluster.provisioner import NodeProvisioner
from arc_scaleset_lab.demo.cold_nodes import ColdNodes
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.system import System
from arc_scaleset_lab.harness.waiting import eventually
from tests.e2e.conftest import SCALE_SET_NAMESPACE
from tests.e2e.harness import REPOSITORY, ScaleSetHandle
from tests.e2e.test_e2e_status_explain import arc

NODE_DELAY = 600.0  # on the provisioner's fake clock: no node appears unless the test advances it
NODE_WAIT = 20.0
"""Real seconds the runner pod is held without a node: well above what any other phase takes in the lab."""
JOB_SECONDS = 60.0  # long enough to read the busy runner's timeline while it runs
HOSTILE_JOB = "--deploy (prod) 🚀 " + "x" * 70
WAIT_PHASE = "gha_controller_job_wait_phase_seconds"


def _phase_sums(metrics: str, name: str) -> dict[str, float]:
    """``phase`` -> the ``_sum`` of the scale set's wait histogram."""
    sums = {}
    for line in metrics.splitlines():
        match = re.match(rf"^{WAIT_PHASE}_sum\{{(?P<labels>[^}}]*)\}} (?P<value>\S+)$", line)
        if match and f'name="{name}"' in match["labels"]:
            phase = re.search(r'phase="([^"]*)"', match["labels"])
            assert phase is not None
            sums[phase.group(1)] = float(match["value"])
    return sums


async def _runner_pod(system: System, handle: ScaleSetHandle) -> dict[str, Any] | None:
    for runner in (await handle.snapshot()).live_runners():
        with contextlib.suppress(NotFound):
            return await system.kube.get(resources.PODS, runner.name, namespace=SCALE_SET_NAMESPACE)
    return None


async def test_a_job_that_waited_for_a_node_shows_it_in_its_timeline_jobs_metrics_explain_and_its_pods_labels(
    system: System,
) -> None:
    run = uuid.uuid4().hex[:6]
    cold = ColdNodes(delay=NODE_DELAY, idle=NODE_DELAY, max_nodes=1, node_size=1, pool_name=f"wait-{run}")
    clock = FakeClock()
    provisioner = NodeProvisioner(system.kube, cold.pool(), clock=clock)
    name = f"wait-{run}"
    secret = await system.create_pat_secret(SCALE_SET_NAMESPACE, name=f"{name}-github-token")
    manifest = scale_sets.autoscaling_runner_set(
        name=name, namespace=SCALE_SET_NAMESPACE, config_url=system.config_url(), secret=secret,
        min_runners=0, max_runners=1, template=cold.place(scale_sets.runner_template()),
    )  # fmt: skip
    handle = ScaleSetHandle.tracked(system, namespace=SCALE_SET_NAMESPACE, name=name, min_runners=0)
    await system.kube.create(AUTOSCALING_RUNNER_SETS, manifest, namespace=SCALE_SET_NAMESPACE)
    try:
        await handle.wait_ready()
        handle.job_ids += await system.sim.enqueue_job(
            [name], repository=REPOSITORY, duration=JOB_SECONDS, display_name=HOSTILE_JOB
        )

        # The runner pod finds no node; the test holds the node back for NODE_WAIT seconds of the API's clock.
        async def waited_long_enough() -> dict[str, Any] | None:
            pod = await _runner_pod(system, handle)
            created = ObjectView(pod).creation_timestamp if pod is not None else None
            if pod is None or created is None or not is_unschedulable(pod):
                return None
            return pod if dt.datetime.now(dt.UTC) - created >= dt.timedelta(seconds=NODE_WAIT) else None

        pod = await eventually(waited_long_enough, timeout=NODE_WAIT + 60, what="the runner pod without a node")
        runner = str(pod["metadata"]["name"])
        assert (await provisioner.scan()).launch == 1
        await clock.advance(NODE_DELAY)
        assert len((await provisioner.scan()).create) == 1

        async def started() -> dict[str, Any] | None:
            er = await system.kube.get(EPHEMERAL_RUNNERS, runner, namespace=SCALE_SET_NAMESPACE)
            return er if "started" in ((er.get("status") or {}).get("jobTimeline") or {}) else None

        await eventually(started, timeout=90, what="the job started on its runner")

        # kubectl arc jobs: the job, with the node as the largest part of its wait, and as the window's slowest.
        code, output = await arc(system, "jobs", name, "-n", SCALE_SET_NAMESPACE, "-o", "json")
        assert code == 0, output
        doc = json.loads(output)
        (job,) = doc["jobs"]
        assert job["runner"] == runner
        assert job["started"] is True
        assert job["slowestPhase"] == "node", job
        assert job["phases"]["node"] >= NODE_WAIT - 1, job
        assert job["summary"].endswith("s waiting for a node")
        assert doc["slowestPhase"]["phase"] == "node"
        code, text = await arc(system, "jobs", name, "-n", SCALE_SET_NAMESPACE)
        assert code == 0, text
        assert "waiting for a node" in text
        assert "jobs wait mostly for nodes" in text

        # explain says it.
        code, output = await arc(system, "explain", name, "-n", SCALE_SET_NAMESPACE, "-o", "json")
        assert code == 0, output
        lines = [finding["line"] for finding in json.loads(output)["findings"]]
        assert any(line.startswith("jobs wait mostly for nodes: ") for line in lines), lines

        # The histogram: one observation per phase, the node's the largest.
        async def observed() -> dict[str, float] | None:
            sums = _phase_sums(await system.controller_metrics(), name)
            return sums if sums.get("node") else None

        sums = await eventually(observed, timeout=30, what=f"{WAIT_PHASE} of the scale set")
        assert max(sums, key=lambda phase: sums[phase]) == "node", sums
        assert sums["node"] >= NODE_WAIT - 1, sums

        # Cost labels on the busy runner's pod: the repository, and the hostile job name made a valid label value.
        pod = await system.kube.get(resources.PODS, runner, namespace=SCALE_SET_NAMESPACE)
        labels, annotations = pod["metadata"].get("labels") or {}, pod["metadata"].get("annotations") or {}
        assert labels.get(LABEL_REPOSITORY) == label_value(REPOSITORY)
        assert labels.get(LABEL_JOB) == label_value(HOSTILE_JOB)
        assert annotations.get(LABEL_JOB) == HOSTILE_JOB

        await handle.assert_every_job_ran_once(timeout=JOB_SECONDS + 60)

        # Its runner deleted, the job stays in `jobs` (its runner set keeps it), with its phases and its run.
        async def kept_after_the_runner() -> dict[str, Any] | None:
            if runner in {r.name for r in (await handle.snapshot()).runners}:
                return None
            code, output = await arc(system, "jobs", name, "-n", SCALE_SET_NAMESPACE, "-o", "json")
            assert code == 0, output
            jobs = json.loads(output)["jobs"]
            return jobs[0] if jobs and jobs[0]["finished"] else None

        kept = await eventually(kept_after_the_runner, timeout=60, what="the finished job listed without its runner")
        assert (kept["runner"], kept["jobId"], kept["slowestPhase"]) == (runner, job["jobId"], "node"), kept
        assert kept["phases"] == job["phases"], "the wait is the one seen while the runner ran"
        assert kept["runSeconds"] is not None
    finally:
        await handle.stop_tracking()
        with contextlib.suppress(Exception):
            await handle.delete(timeout=JOB_SECONDS + 60)
        for node in (await system.kube.list(resources.NODES, label_selector=cold.pool().selector)).items:
            with contextlib.suppress(NotFound):
                await system.kube.delete(resources.NODES, node["metadata"]["name"])
