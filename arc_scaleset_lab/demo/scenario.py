"""The demo's story, against a started :class:`~arc_scaleset_lab.harness.system.System`:

1. a namespace, a GitHub-credentials Secret and an AutoscalingRunnerSet pointing at the simulated GitHub;
2. wait until the listener holds its session and the minimum of runners is idle;
3. the workload: jobs arrive (reproducibly, from ``--seed``) with varied durations, and early on a burst of
   them at one instant, more than the idle runners can take: queue-to-start latency shows the scale-up;
4. once half of them have arrived, the runner template changes (image tag and an env var): the revision
   rolls, idle runners are replaced, busy ones finish their job first;
5. the queue drains and the set returns to its minimum, every runner of the new revision;
6. the summary: jobs, queue-to-start latency, runners, API writes per runner, exactly-once; with ``--proxy``,
   whether all GitHub traffic went through the proxy (:mod:`arc_scaleset_lab.demo.network`);
7. :meth:`Scenario.report`: what the HTML report draws (:mod:`arc_scaleset_lab.demo.report_recorder` gathers it).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.tasks import cancel_and_wait
from arc_scaleset_lab.cluster.provisioner import NodeProvisioner
from arc_scaleset_lab.demo import api_writes
from arc_scaleset_lab.demo.cold_nodes import ColdNodes
from arc_scaleset_lab.demo.network import DemoNetwork
from arc_scaleset_lab.demo.report_data import ReportData
from arc_scaleset_lab.demo.report_recorder import ReportRecorder
from arc_scaleset_lab.demo.summary import Summary, audit_jobs, queue_latencies
from arc_scaleset_lab.demo.view import DemoState
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.runner_tracker import RunnerTracker
from arc_scaleset_lab.harness.system import ORG, System
from arc_scaleset_lab.sim.workload import PlannedJob, WorkloadSpec, run_workload

FIRST_IMAGE = "ghcr.io/actions/actions-runner:2.330.0"
SECOND_IMAGE = "ghcr.io/actions/actions-runner:2.331.0"
OBSERVE_PERIOD = 0.25


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    runners_min: int = 2
    runners_max: int = 30
    jobs: int = 60
    job_rate: float = 1.0
    duration_min: float = 3.0
    duration_max: float = 20.0
    seed: int = 1
    burst: int | None = None  # jobs of the workload that arrive at one instant; None: a third of them
    tls: bool = False
    proxy: bool = False
    cold: ColdNodes | None = None  # --cold-nodes: runners on a node pool that starts empty
    namespace: str = "arc-runners"
    name: str = "arc-runners"
    ready_timeout: float = 180.0
    settle_timeout: float = 240.0

    @property
    def burst_jobs(self) -> int:
        return self.jobs // 3 if self.burst is None else self.burst

    def workload(self) -> WorkloadSpec:
        """The seeded workload; its burst comes after a tenth of the other jobs, so the set is already serving
        when it lands, and before the template change (at half the jobs) unless the burst is most of them."""
        return WorkloadSpec(
            jobs=self.jobs,
            rate=self.job_rate,
            duration_min=self.duration_min,
            duration_max=self.duration_max,
            seed=self.seed,
            labels=(self.name,),
            repositories=(f"{ORG}/web", f"{ORG}/api", f"{ORG}/docs"),
            burst=self.burst_jobs,
            burst_after=(self.jobs - self.burst_jobs) // 10,
        )


def template(revision: int, cold: ColdNodes | None = None) -> dict[str, Any]:
    image = FIRST_IMAGE if revision == 1 else SECOND_IMAGE
    runner = scale_sets.runner_template(image=image, env={scale_sets.TEMPLATE_REVISION_ENV: str(revision)})
    return cold.place(runner) if cold is not None else runner


class DemoError(RuntimeError):
    """The demo could not get the scale set going; the message says what was awaited and what was seen."""


class Scenario:
    """The story above; ``network`` (``--tls``/``--proxy``) configures how the scale set reaches GitHub."""

    def __init__(
        self, system: System, options: DemoOptions, state: DemoState, *, network: DemoNetwork | None = None
    ) -> None:
        self.system = system
        self.options = options
        self.state = state
        self.network = network
        self.tracker = RunnerTracker(system.kube, namespace=options.namespace, runner_set=options.name)
        self.recorder = ReportRecorder(system.kube, namespace=options.namespace, runners=self.tracker)
        self._t0 = time.monotonic()
        self._change_task: asyncio.Task[None] | None = None
        cold = options.cold
        self.provisioner = NodeProvisioner(system.kube, cold.pool(), report=state.log) if cold is not None else None

    def _tick(self) -> None:
        self.state.elapsed = time.monotonic() - self._t0

    async def _observe(self) -> None:
        system, options = self.system, self.options
        snapshot, stats = await asyncio.gather(
            scale_sets.observe(
                system.kube,
                system.sim,
                namespace=options.namespace,
                name=options.name,
                controller_namespace=system.controller_namespace,
            ),
            system.sim.stats(),
        )
        previous = self.state.snapshot
        self._tick()
        self.state.snapshot = snapshot
        self.recorder.record(snapshot)
        self.state.jobs_by_state = dict(stats.get("jobs") or {})
        self.state.runners_created = self.tracker.created
        if self.provisioner is not None and self.options.cold is not None:
            self.state.nodes = self.options.cold.nodes_line(self.provisioner.nodes, self.provisioner.launches)
        self._note_changes(previous, snapshot)

    def _note_changes(self, before: scale_sets.ScaleSetSnapshot | None, after: scale_sets.ScaleSetSnapshot) -> None:
        if before is None:
            return
        if after.session_owner and not before.session_owner:
            self.state.log(f"listener session opened by {after.session_owner}")
        if before.session_owner and not after.session_owner:
            self.state.log("listener session closed")
        if after.desired_revision != before.desired_revision:
            self.state.log(f"runner set: desired revision {after.desired_revision}")
        if after.applied_revision != before.applied_revision:
            self.state.log(f"runner set: revision {after.applied_revision} applied (idle runners replaced)")
        if after.ars_phase != before.ars_phase and after.ars_phase:
            self.state.log(f"AutoscalingRunnerSet phase {after.ars_phase}")

    async def _observe_until(self, done: Any, *, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            started = time.monotonic()
            with contextlib.suppress(Exception):  # a slow or failed read only delays the picture
                await self._observe()
            if self.state.snapshot is not None and done(self.state.snapshot):
                return
            if time.monotonic() > deadline:
                raise DemoError(f"timed out after {timeout:.0f}s waiting for {what}")
            await asyncio.sleep(max(0.0, OBSERVE_PERIOD - (time.monotonic() - started)))

    async def run(self) -> Summary:
        system, options, state = self.system, self.options, self.state
        spec = options.workload()
        state.jobs_planned = spec.jobs
        await system.ensure_namespace(options.namespace)
        secret = await system.create_pat_secret(options.namespace)
        writes_before = api_writes.apiserver_writes(await system.kube.request_raw("GET", "/metrics"))
        controller_before = api_writes.client_writes(await system.controller_metrics())
        tracker_task = asyncio.create_task(self.tracker.run(), name="runner-tracker")
        recorder_task = asyncio.create_task(self.recorder.run(), name="report-recorder")
        nodes_task = asyncio.create_task(self.provisioner.run(), name="node-provisioner") if self.provisioner else None
        try:
            manifest = scale_sets.autoscaling_runner_set(
                name=options.name,
                namespace=options.namespace,
                config_url=system.config_url(),
                secret=secret,
                min_runners=options.runners_min,
                max_runners=options.runners_max,
                template=template(1, options.cold),
            )
            if self.network is not None:
                manifest["spec"].update(
                    await self.network.scale_set_spec(system, namespace=options.namespace, name=options.name)
                )
            await system.kube.create(AUTOSCALING_RUNNER_SETS, manifest, namespace=options.namespace)
            state.stage = "scale set starting"
            state.log(
                f"AutoscalingRunnerSet {options.namespace}/{options.name} applied "
                f"(min {options.runners_min}, max {options.runners_max})"
            )
            await self._observe_until(
                lambda s: s.session_owner and s.idle_running >= options.runners_min,
                timeout=options.ready_timeout,
                what=f"the listener's session and {options.runners_min} idle runners",
            )
            self._t0 = time.monotonic()
            self.recorder.started()
            self._tick()
            burst = f" ({spec.burst} of them at once after the first {spec.burst_after})" if spec.burst else ""
            state.log(f"ready: {options.runners_min} idle runners; workload of {spec.jobs} jobs starts{burst}")
            state.stage = "workload"
            workload = asyncio.create_task(self._workload(spec), name="workload")
            try:
                await self._observe_until(
                    lambda s: workload.done() and state.jobs_done >= spec.jobs,
                    timeout=options.settle_timeout + spec.jobs / spec.rate + options.duration_max,
                    what="every job to complete",
                )
                workload.result()
                state.stage = "draining"
                state.log("every job completed; waiting for the set to return to its minimum")
                settled = True
                try:
                    await self._observe_until(
                        lambda s: s.settled_at(options.runners_min),
                        timeout=options.settle_timeout,
                        what="the set to return to its minimum",
                    )
                    state.log(f"settled: {options.runners_min} idle runners of the new revision")
                except DemoError as failure:
                    settled = False
                    state.log(str(failure))
            finally:
                await cancel_and_wait(workload)
            state.stage = "done" if settled else "did not settle"
            jobs = await system.sim.jobs()
            writes = api_writes.operator_writes(
                writes_before, api_writes.apiserver_writes(await system.kube.request_raw("GET", "/metrics"))
            )
            controller_text = await system.controller_metrics()
            controller_writes = (
                api_writes.client_writes(controller_text) - controller_before if controller_text else None
            )
            network = self.network
            traffic = await network.traffic(system, namespace=options.namespace) if network is not None else None
            notes = network.notes(namespace=options.namespace, name=options.name) if network is not None else ()
            if options.cold is not None and self.provisioner is not None:
                added, removed = self.provisioner.added, self.provisioner.removed
                notes = (*notes, options.cold.summary_line(added=added, removed=removed))
            return Summary(
                audit=audit_jobs(jobs),
                latencies=tuple(queue_latencies(jobs)),
                runners_created=self.tracker.created,
                runners_by_revision=dict(self.tracker.by_revision()),
                operator_writes=sum(writes.values()),
                writes_by_resource=api_writes.by_resource(writes),
                controller_writes=controller_writes,
                elapsed=state.elapsed,
                settled=settled,
                burst=spec.burst,
                traffic=traffic,
                notes=notes,
            )
        finally:
            await cancel_and_wait(tracker_task, recorder_task, nodes_task)

    async def report(self, summary: Summary | None = None) -> ReportData:
        """The run's report (:mod:`arc_scaleset_lab.demo.report_html` draws it), also after a failed run: what was
        seen until then. Reads the sim's job records, so call it before the system stops."""
        options = self.options
        return self.recorder.data(
            title=f"arc-scaleset demo: {options.namespace}/{options.name}, {options.jobs} jobs (seed {options.seed})",
            jobs=await self.system.sim.jobs(),
            summary=summary.lines() if summary is not None else (),
            events=self.state.events,
        )

    async def _workload(self, spec: WorkloadSpec) -> Sequence[int]:
        half = max(1, spec.jobs // 2)

        async def enqueue(labels: Sequence[str], repository: str, duration: float, name: str) -> int:
            ids = await self.system.sim.enqueue_job(
                list(labels), repository=repository, duration=duration, display_name=name
            )
            return ids[0]

        def on_enqueued(job_id: int, job: PlannedJob) -> None:
            self.state.jobs_enqueued += 1
            if self.state.jobs_enqueued >= half and self._change_task is None:
                self._change_task = asyncio.create_task(self._change_template(), name="template-change")

        ids = await run_workload(spec, enqueue, on_enqueued=on_enqueued)
        self.state.log(f"all {len(ids)} jobs enqueued")
        if self._change_task is not None:
            await self._change_task
        return ids

    async def _change_template(self) -> None:
        options = self.options
        await self.system.kube.patch(
            AUTOSCALING_RUNNER_SETS,
            options.name,
            {"spec": {"template": template(2, options.cold)}},
            namespace=options.namespace,
        )
        self.state.log(
            f"runner template changed: image {SECOND_IMAGE.rsplit(':', 1)[1]}, "
            f"{scale_sets.TEMPLATE_REVISION_ENV}=2 (busy runners finish first)"
        )
