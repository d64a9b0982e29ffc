"""Each job's wait as an OpenTelemetry trace (issue 29), on the running system: a controller started with
``--otlp-endpoint`` posts OTLP/HTTP protobuf to the lab's receiver (:mod:`arc_scaleset_lab.harness.otlp_receiver`,
decoding ``ExportTraceServiceRequest`` as a collector does), which gets exactly one trace per job: a ``job_wait``
root from when GitHub queued the job to when it started, and under it the phases of its timeline as spans, in
time order, each starting where the one before ended, so they add up to the wait.

"Exactly one" is read after the controller stopped: a graceful stop sends whatever it still had queued, so no
trace can arrive later.
"""

from __future__ import annotations

import datetime as dt
import itertools
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from arc_scaleset.api.job_timeline import ORDER
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.otlp_receiver import OtlpReceiver, ReceivedSpan
from arc_scaleset_lab.harness.system import SystemOptions
from arc_scaleset_lab.harness.waiting import eventually
from tests.e2e.conftest import RUN_ID
from tests.e2e.harness import REPOSITORY, ScaleSetFactory, started_system

JOBS = 3
JOB_SECONDS = 5.0  # long enough for the controller to see each job started while its runner is busy
PHASE_ORDER = [phase.value for _, phase in ORDER]
NAMESPACE = f"e2e-otel-{RUN_ID}"


@pytest.fixture
async def receiver() -> AsyncIterator[OtlpReceiver]:
    server = OtlpReceiver()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def roots(receiver: OtlpReceiver) -> list[ReceivedSpan]:
    return [span for span in receiver.spans if not span.parent_span_id]


def check_trace(spans: list[ReceivedSpan], *, scale_set: str) -> ReceivedSpan:
    """One trace as the controller sends it: one ``job_wait`` root, its phases under it in order, back to back from
    the root's start to its end; the root returned."""
    (root,) = [span for span in spans if not span.parent_span_id]
    phases = [span for span in spans if span.parent_span_id]
    assert root.name == "job_wait"
    assert phases, "a trace without phases"
    assert all(span.parent_span_id == root.span_id for span in phases)
    assert [span.name for span in phases] == sorted((span.name for span in phases), key=PHASE_ORDER.index)
    assert len({span.name for span in phases}) == len(phases)
    assert phases[0].start_ns == root.start_ns
    assert phases[-1].end_ns == root.end_ns
    for before, after in itertools.pairwise(phases):
        assert before.end_ns == after.start_ns, (before, after)
    assert abs(sum(span.seconds for span in phases) - root.seconds) < 1e-6
    for span in (root, *phases):
        assert span.attributes["name"] == scale_set
        assert span.attributes["namespace"] == NAMESPACE
        assert span.attributes["repository"] == REPOSITORY
        assert str(span.attributes["runner"]).startswith(f"{scale_set}-")
        assert span.resource["service.name"] == "arc-scaleset-controller"
    assert all(span.attributes["phase"] == span.name for span in phases)
    return root


async def test_each_job_is_one_trace_with_its_phases_as_spans_in_order_adding_up_to_its_wait(
    cluster: TestCluster, receiver: OtlpReceiver
) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="arc-scaleset-e2e-otel-"))
    options = SystemOptions(
        controller_namespace=f"arc-{NAMESPACE}",
        watch_namespace=NAMESPACE,
        long_poll_seconds=2.0,
        controller_args=(f"--otlp-endpoint={receiver.url}",),
    )
    async with started_system(workdir, kubeconfig=cluster.kubeconfig, namespace=NAMESPACE, options=options) as system:
        factory = ScaleSetFactory(system, namespace=NAMESPACE, stem="traced")
        try:
            # Queued before the scale set exists: each job waits at least until its listener runs. The milestones
            # are kept to the second, and the lab can run a job within the second it was queued (its trace would
            # then be a root without phases), so the set is made only once the clock has left that second.
            job_ids = await system.sim.enqueue_job([factory.stem], repository=REPOSITORY, duration=JOB_SECONDS,
                                                   count=JOBS)  # fmt: skip
            queued_by = int(time.time())
            await eventually(
                lambda: int(time.time()) > queued_by, timeout=2, what="the second the jobs were queued in to end"
            )
            handle = await factory.create(min_runners=0, max_runners=JOBS)
            handle.job_ids += job_ids
            await handle.assert_every_job_ran_once(timeout=JOB_SECONDS + 120)
            jobs = {str(job["jobId"]): job for job in await handle.jobs()}
            # Sent while the controller runs (the batch processor posts every few seconds), not only at its stop.
            await eventually(lambda: len(roots(receiver)) >= JOBS, timeout=60, what=f"{JOBS} job_wait spans")
        finally:
            await factory.delete_all()
        await system.stop_controller()
    shutil.rmtree(workdir, ignore_errors=True)

    traces = receiver.traces()
    assert len(traces) == JOBS, {trace: [s.name for s in spans] for trace, spans in traces.items()}
    by_job = {}
    for spans in traces.values():
        root = check_trace(spans, scale_set=handle.name)
        by_job[str(root.attributes["job_id"])] = root
    assert sorted(by_job) == sorted(jobs)
    for job_id, root in by_job.items():
        # Its first phase: queued before any listener could be offered it.
        assert traces[root.trace_id][1].name == "offer", traces[root.trace_id]
        # The root spans the job's wait: from GitHub's queue time (kept to the second on the runner's status).
        queued = dt.datetime.fromisoformat(jobs[job_id]["enqueuedAt"].replace("Z", "+00:00"))
        assert root.start_ns // 1_000_000_000 == int(queued.timestamp()), (job_id, root)
        started = dt.datetime.fromisoformat(jobs[job_id]["startedAt"].replace("Z", "+00:00"))
        assert root.end_ns / 1e9 >= int(started.timestamp()), (job_id, root)
