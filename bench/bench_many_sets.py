"""Many scale sets: N AutoscalingRunnerSets, one listener process each (or one shared), a steady workload.

    .venv/bin/python bench/bench_many_sets.py [--sets 10,100] [--jobs 2 | --total-jobs N] [--rate 0.008]
                                              [--idle 30] [--duration-min 2] [--duration-max 6] [--seed 1]
                                              [--shared-secret] [--shared-listener [--max-members M]]
                                              [--qps Q] [--long-poll 5] [--counts-in-status]
                                              [--saturate N] [--saturate-duration 0.5] [--max-runners 5]
                                              [--timeout SECONDS] [--reuse DIR]

For each size in ``--sets`` (in order, one after the other, on one control plane: a fresh one, or the one
recorded in ``--reuse DIR``), the whole system runs as it does in the demo and the end-to-end suite
(:class:`arc_scaleset_lab.harness.system.System`): the simulated GitHub, the controller manager as its own
process (leader election on, watching the bench's namespace) and the node agent, which runs a real
``arc-scaleset listener`` process for every listener pod and plays the runner pods. Then:

1. **setup**: N AutoscalingRunnerSets (minRunners 0, maxRunners ``--max-runners``, 5; each with its own PAT
   Secret as the scale-set chart makes them; ``--shared-secret``: one for all) are applied at once (at most
   ``CONCURRENCY`` requests in flight). Timed until every set *converged*: its listener process runs, its
   listener holds its message session in the simulated GitHub, and the ARS's status is ``Running`` with
   ``Ready=True``. ``--shared-listener`` (implies ``--shared-secret``) annotates every set
   ``listener.arc-scaleset.dev/shared: "true"`` (issue 30; docs/listener.md, "Shared listener"): the sets,
   one namespace and one Secret, are one group served by one listener process per 100 sets (``--max-members``:
   the controller's ``--shared-listener-max-members``, 0 for no count limit).
2. **idle**: ``--idle`` seconds with nothing to do: what N quiet sets cost per second (resyncs, timers,
   polls; long polls of the listeners).
3. **workload**: ``--jobs`` jobs per set, each set's jobs in random order among the others', arriving as a
   Poisson process of ``--rate`` jobs per second *per set* (so the load per set is the same at every size),
   each running ``--duration-min`` to ``--duration-max`` seconds. Timed until every job completed; the jobs
   must each have run exactly once. The default rate keeps 100 sets (0.8 jobs/s) under what the controller's
   default client limit of 20 requests per second carries (about 16 to 20 requests per job): past it, jobs
   queue behind the limit whatever the number of sets, which is not what this measures. ``--total-jobs N``
   instead: N jobs in all at every size, each to a different set while there are sets left, arriving at
   ``--rate`` times N per second at every size (as if N sets had one job each): the same stream of jobs at
   10 and at 1,000 sets, so the per-job figures compare without 1,000 jobs queueing behind the client limit.
4. **saturated** (with ``--saturate N``): N jobs per set queued at once, each running ``--saturate-duration``
   seconds, timed until every one completed: the jobs per second the controller sustains at ARC's default
   client limit (20 QPS, burst 30; the sets' ``maxRunners`` bound the runners at once: raise it with
   ``--max-runners`` so that the client limit, not the sets, bounds the rate). Run the script
   with ``PYTHONPATH`` pointing at another checkout to measure that one's controller on the same machine.
5. **teardown**: every ARS deleted at once, timed until none is left (listeners, runner sets, GitHub scale
   sets removed by the controller).

Figures per size: the controller's CPU seconds in each window (from ``/proc``), its RSS at the end and its
peak (``VmHWM``), the p95 per controller of the time a reconcile takes
(``controller_runtime_reconcile_time_seconds``) and of the time a key waits in the work queue before a worker
takes it (``workqueue_queue_duration_seconds``: with one worker per controller, what many sets add to a
set's latency) over the setup and workload windows (from its ``/metrics``; the histogram's bucket bound),
the listeners' RSS (each process's
``VmRSS``: sum and median; the sum per scale set against ARC's listener, :data:`ARC_LISTENER_MB`) and the node
agent's, how long the node agent took to start every listener
process, and the job queue-to-start latency. Then, between the smallest and the largest size, the ratio of
each per-set cost: 1.00 means the cost per set does not grow with the number of sets.

The machine's other processes share its CPU: wall-clock times vary with the load; the CPU seconds are the
steadier figures. Every wait's timeout grows with the number of sets (``--timeout``, default
:func:`default_timeout`). Exit code 0 when every size converged and every job ran exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from bench_memory import ARC_LISTENER_MB  # this script's directory is on sys.path

from arc_scaleset.api import keys
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.listener_group import ANNOTATION_SHARED, SHARED_VALUE
from arc_scaleset.controllers.settings import DEFAULT_SHARED_LISTENER_MAX_MEMBERS
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.demo.api_writes import client_writes, series
from arc_scaleset_lab.demo.summary import audit_jobs, percentile, queue_latencies
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.cluster import TestCluster, start_test_cluster
from arc_scaleset_lab.harness.system import ORG, System, SystemOptions
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim.workload import WorkloadSpec, plan

POLL = 1.0
POLL_SETS = 250
"""Sets per second of polling interval: a convergence check lists every ARS, so at 1,000 sets it polls every 4 s."""
CONCURRENCY = 32
"""Requests of the bench in flight at once when it creates or deletes the sets (the controller's own QPS limit,
not the bench, is what the set-up measures)."""
LISTENER_GOAL = 0.3
"""Issue 30: listener memory per scale set, shared, at most 0.3 times ARC's listener."""
T = TypeVar("T")
RECONCILE_HISTOGRAM = "controller_runtime_reconcile_time_seconds"
QUEUE_HISTOGRAM = "workqueue_queue_duration_seconds"


# -- /proc ---------------------------------------------------------------------------------------------


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far (0.0 when it is gone)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_mb(pid: int | None, field_name: str = "VmRSS") -> float:
    """``field_name`` (VmRSS: resident now, VmHWM: peak resident) of process ``pid`` in MB (0.0 when gone)."""
    if pid is None:
        return 0.0
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


async def bounded_gather(jobs: Sequence[Callable[[], Awaitable[T]]], limit: int = CONCURRENCY) -> list[T]:
    """Run ``jobs`` concurrently, at most ``limit`` at a time; their results in order."""
    gate = asyncio.Semaphore(limit)

    async def one(job: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await job()

    return await asyncio.gather(*(one(job) for job in jobs))


def default_timeout(sets: int) -> float:
    """Seconds any one wait may take at ``sets`` sets: 10 minutes, plus 1.5 s per set past 100 (the controller's
    client QPS, not the machine, bounds how fast sets converge and go)."""
    return 600.0 + 1.5 * max(0, sets - 100)


def load_average() -> str:
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "?"


# -- metrics ---------------------------------------------------------------------------------------------


Buckets = dict[str, dict[str, dict[float, float]]]
"""{histogram: {controller: {le: cumulative count}}}"""


def histogram_buckets(text: str) -> Buckets:
    """Cumulative bucket counts of the reconcile-time and queue-wait histograms, by controller."""
    buckets: Buckets = {}
    for histogram in (RECONCILE_HISTOGRAM, QUEUE_HISTOGRAM):
        by_controller: dict[str, dict[float, float]] = defaultdict(dict)
        for labels, value in series(text, histogram + "_bucket"):
            le = labels.get("le", "")
            by_controller[labels.get("controller", "")][float("inf") if le == "+Inf" else float(le)] = value
        buckets[histogram] = by_controller
    return buckets


def histogram_quantile(after: Mapping[float, float], before: Mapping[float, float], q: float) -> tuple[float, int]:
    """The upper bound of the bucket holding quantile ``q`` of the observations made between two scrapes, and
    how many there were (``nan`` when none). A bucket bound, as Prometheus's ``histogram_quantile`` without
    its interpolation: a p95 of 0.05 means "95% took at most 0.05 s"."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0.0
    if total <= 0:
        return float("nan"), 0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= q * total:
            return bound, int(total)
    return bounds[-1], int(total)


def client_requests(text: str) -> tuple[int, int]:
    """(all requests, writes) the controller made to the Kubernetes API so far (``rest_client_requests_total``)."""
    total = sum(value for _labels, value in series(text, "rest_client_requests_total"))
    return int(total), client_writes(text)


def client_requests_by_method(text: str) -> Counter[str]:
    """The controller's requests so far by HTTP method (``rest_client_requests_total``)."""
    counts: Counter[str] = Counter()
    for labels, value in series(text, "rest_client_requests_total"):
        counts[labels.get("method", "?")] += int(value)
    return counts


# Requests of the kubelet's and scheduler's roles (played by kwok and the node agent), heartbeats and Events:
# not the operator's work (as arc_scaleset_lab/demo/api_writes.py counts writes).
NOT_THE_OPERATORS = frozenset({"pods/status", "pods/binding", "nodes", "nodes/status", "leases", "events"})


def server_requests(text: str) -> Counter[str]:
    """The API server's requests so far by ``VERB resource[/subresource]`` (``apiserver_request_total``, every
    client: the controller, the listeners, the node agent, kwok, the scheduler), less what is not the
    operator's (:data:`NOT_THE_OPERATORS`) and what has no resource (discovery, ``/metrics``)."""
    counts: Counter[str] = Counter()
    for labels, value in series(text, "apiserver_request_total"):
        resource = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
        if resource and resource not in NOT_THE_OPERATORS:
            counts[f"{labels.get('verb', '?')} {resource}"] += int(value)
    return counts


# -- one size --------------------------------------------------------------------------------------------


@dataclass
class SizeResult:
    sets: int
    listeners_started: float = float("nan")  # seconds until every listener process ran
    sessions: float = float("nan")  # ... every listener held its session
    converged: float = float("nan")  # ... every ARS Running and Ready (and the two above)
    cpu: dict[str, float] = field(default_factory=dict)  # controller CPU seconds by window
    agent_cpu: dict[str, float] = field(default_factory=dict)  # node agent (+ its listeners) CPU seconds
    listeners_cpu_idle: float = 0.0
    idle_seconds: float = 0.0
    jobs: int = 0
    jobs_seconds: float = float("nan")
    exactly_once: bool = False
    latency_p50: float = float("nan")
    latency_p95: float = float("nan")
    requests: dict[str, tuple[int, int]] = field(default_factory=dict)  # Kubernetes API (all, writes) by window
    # {window: the controller's requests by HTTP method}, {window: the API server's by "VERB resource"}
    methods: dict[str, Counter[str]] = field(default_factory=dict)
    server: dict[str, Counter[str]] = field(default_factory=dict)
    # {window: {histogram: {controller: (p95, observations)}}}
    p95: dict[str, dict[str, dict[str, tuple[float, int]]]] = field(default_factory=dict)
    controller_rss: float = 0.0
    controller_peak: float = 0.0
    listener_rss: list[float] = field(default_factory=list)
    listener_peak: list[float] = field(default_factory=list)  # each listener process's VmHWM
    agent_rss: float = 0.0
    teardown: float = float("nan")
    saturated_jobs: int = 0
    saturated_seconds: float = float("nan")
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exactly_once and not self.problems


def ready(ars: Mapping[str, Any]) -> bool:
    status = ars.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    return status.get("phase") == "Running" and conditions.get("Ready") == "True"


class Bench:
    def __init__(self, system: System, args: argparse.Namespace, sets: int, namespace: str) -> None:
        self.system = system
        self.args = args
        self.sets = sets
        self.namespace = namespace
        self.names = [f"set-{i:04d}" for i in range(sets)]
        self.result = SizeResult(sets=sets)
        self.timeout: float = args.timeout or default_timeout(sets)
        self.poll = POLL * max(1.0, sets / POLL_SETS)
        self.shared = bool(args.shared_listener)

    async def wait_for(self, check: Callable[[], Awaitable[bool]], what: str) -> float:
        """Seconds until ``check()`` was true, polling at this size's interval within this size's timeout; raises
        TimeoutError naming ``what``."""
        start = time.monotonic()
        await eventually(check, what, timeout=self.timeout, interval=self.poll, max_interval=self.poll)
        return time.monotonic() - start

    @property
    def kube(self) -> KubeClient:
        return self.system.kube

    def controller_cpu(self) -> float:
        return cpu_seconds(self.system.controller_pid)

    def agent_cpu(self) -> float:
        """The node agent's CPU seconds plus its listener children's (those still running)."""
        listeners = self.system.listener_pids().values()
        return cpu_seconds(self.system.agent_pid) + sum(cpu_seconds(pid) for pid in listeners)

    async def setup(self) -> None:
        # A Secret per set, as the scale-set chart makes one per release (the controller watches each one a
        # listener is built from); --shared-secret: one for all.
        if self.args.shared_secret or self.shared:
            shared = await self.system.create_pat_secret(self.namespace)
            secrets = dict.fromkeys(self.names, shared)
        else:
            secrets = {name: f"{name}-github-secret" for name in self.names}
            await bounded_gather([partial(self.system.create_pat_secret, self.namespace, s) for s in secrets.values()])
        started = time.monotonic()
        await bounded_gather([partial(self.create_set, name, secrets[name]) for name in self.names])
        result = self.result
        # One process per set, or at least one for the group (one namespace, one Secret, one pod shape): a
        # shard per --max-members sets (docs/listener.md, "Shards").
        processes = 1 if self.shared else self.sets

        async def all_listeners() -> bool:
            return len(self.system.listener_pids()) >= processes

        async def converged() -> bool:
            listed = await self.kube.list(AUTOSCALING_RUNNER_SETS, namespace=self.namespace)
            ids = set()
            for ars in listed.items:
                if not ready(ars):
                    return False
                with contextlib.suppress(KeyError, ValueError):
                    ids.add(int(ObjectView(ars).annotations[keys.ANNOTATION_RUNNER_SCALE_SET_ID]))
            held = {s.get("scaleSetId") for s in await self.system.sim.sessions() if s.get("ownerName")}
            if len(ids) == self.sets and ids <= held and math.isnan(result.sessions):
                result.sessions = time.monotonic() - started
            return len(listed.items) == self.sets and len(ids) == self.sets and ids <= held

        listeners = asyncio.create_task(self.wait_for(all_listeners, "every listener process"))
        try:
            await self.wait_for(converged, f"{self.sets} scale sets to converge")
            result.converged = time.monotonic() - started
            result.listeners_started = await listeners
        finally:
            listeners.cancel()
        if math.isnan(result.sessions):
            result.sessions = result.converged

    async def create_set(self, name: str, secret: str) -> None:
        body = scale_sets.autoscaling_runner_set(
            name=name, namespace=self.namespace, config_url=self.system.config_url(), secret=secret,
            min_runners=0, max_runners=self.args.max_runners, template=scale_sets.runner_template(),
        )  # fmt: skip
        if self.shared:
            body["metadata"]["annotations"] = {ANNOTATION_SHARED: SHARED_VALUE}
        await self.kube.create(AUTOSCALING_RUNNER_SETS, body, namespace=self.namespace)

    async def delete_set(self, name: str) -> None:
        await self.kube.delete(AUTOSCALING_RUNNER_SETS, name, namespace=self.namespace, missing_ok=True)

    def job_targets(self) -> list[str]:
        """The set of each job, in arrival order: ``--jobs`` per set, or ``--total-jobs`` over distinct sets."""
        args = self.args
        shuffle = random.Random(args.seed).shuffle
        if args.total_jobs:
            names = list(self.names)
            shuffle(names)
            return [names[i % self.sets] for i in range(args.total_jobs)]
        targets = [name for name in self.names for _ in range(args.jobs)]
        shuffle(targets)
        return targets

    async def workload(self) -> None:
        args = self.args
        targets = self.job_targets()
        spec = WorkloadSpec(jobs=len(targets), rate=args.rate * (args.total_jobs or self.sets),
                            duration_min=args.duration_min, duration_max=args.duration_max, seed=args.seed)  # fmt: skip
        start = time.monotonic()
        for job, target in zip(plan(spec), targets, strict=True):
            await asyncio.sleep(max(0.0, job.at - (time.monotonic() - start)))
            await self.system.sim.enqueue_job(target, repository=f"{ORG}/many", duration=job.duration,
                                              display_name=f"{target}-{job.display_name}")  # fmt: skip
        self.result.jobs = spec.jobs

        async def all_completed() -> bool:
            counts = (await self.system.sim.stats()).get("jobs") or {}
            return int(counts.get("completed") or 0) >= spec.jobs

        await self.wait_for(all_completed, f"{spec.jobs} jobs to complete")
        self.result.jobs_seconds = time.monotonic() - start
        jobs = await self.system.sim.jobs()
        audit = audit_jobs(jobs)
        self.result.exactly_once = audit.exactly_once and audit.total == spec.jobs
        if not self.result.exactly_once:
            self.result.problems.append(
                f"jobs: {audit.total} seen, {audit.completed} completed, ran twice: {audit.ran_more_than_once[:5]}"
                f", never ran: {audit.never_ran[:5]}"
            )
        latencies = queue_latencies(jobs)
        self.result.latency_p50, self.result.latency_p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)

    async def saturated(self) -> None:
        """``--saturate`` jobs per set queued at once; timed until every job of the run completed, each once."""
        args = self.args
        before = int(((await self.system.sim.stats()).get("jobs") or {}).get("completed") or 0)
        count = args.saturate * self.sets
        start = time.monotonic()
        await asyncio.gather(*(
            self.system.sim.enqueue_job(name, repository=f"{ORG}/many", duration=args.saturate_duration,
                                        display_name=f"{name}-saturated", count=args.saturate)
            for name in self.names
        ))  # fmt: skip

        async def all_completed() -> bool:
            counts = (await self.system.sim.stats()).get("jobs") or {}
            return bool(int(counts.get("completed") or 0) >= before + count)

        await eventually(all_completed, f"{count} queued jobs to complete", timeout=self.timeout, interval=0.1,
                         max_interval=0.1)  # fmt: skip
        self.result.saturated_seconds = time.monotonic() - start
        self.result.saturated_jobs = count
        audit = audit_jobs(await self.system.sim.jobs())
        if not (audit.exactly_once and audit.total == self.result.jobs + count):
            self.result.exactly_once = False
            self.result.problems.append(
                f"saturated: {audit.total} jobs seen, ran twice: {audit.ran_more_than_once[:5]}"
            )

    async def teardown(self) -> None:
        started = time.monotonic()
        await bounded_gather([partial(self.delete_set, name) for name in self.names])

        async def gone() -> bool:
            return not (await self.kube.list(AUTOSCALING_RUNNER_SETS, namespace=self.namespace)).items

        await self.wait_for(gone, "every AutoscalingRunnerSet to be deleted")
        self.result.teardown = time.monotonic() - started

    async def run(self) -> SizeResult:
        result = self.result
        await self.measure("setup", self.setup)
        await self.measure("idle", self.idle)
        await self.measure("workload", self.workload)
        if self.args.saturate:
            await self.measure("saturated", self.saturated)
        listeners = self.system.listener_pids().values()
        result.listener_rss = [memory_mb(pid) for pid in listeners]
        result.listener_peak = [memory_mb(pid, "VmHWM") for pid in listeners]
        result.agent_rss = memory_mb(self.system.agent_pid)
        result.controller_rss = memory_mb(self.system.controller_pid)
        result.controller_peak = memory_mb(self.system.controller_pid, "VmHWM")
        await self.measure("teardown", self.teardown)
        return result

    async def measure(self, window: str, step: Callable[[], Awaitable[None]]) -> None:
        """Run ``step``, recording the controller's CPU seconds, API requests and p95s over it."""
        result = self.result
        ctl, agent = self.controller_cpu(), self.agent_cpu()
        text = await self.system.controller_metrics()
        before, requests, methods = histogram_buckets(text), client_requests(text), client_requests_by_method(text)
        server = server_requests(str(await self.kube.request_raw("GET", "/metrics")))
        await step()
        result.cpu[window] = self.controller_cpu() - ctl
        if window != "teardown":  # the listeners that exit take their CPU seconds with them
            result.agent_cpu[window] = self.agent_cpu() - agent
        text = await self.system.controller_metrics()
        after, done = histogram_buckets(text), client_requests(text)
        result.requests[window] = (done[0] - requests[0], done[1] - requests[1])
        result.methods[window] = client_requests_by_method(text) - methods
        result.server[window] = server_requests(str(await self.kube.request_raw("GET", "/metrics"))) - server
        result.p95[window] = {
            histogram: {
                name: histogram_quantile(buckets, before.get(histogram, {}).get(name, {}), 0.95)
                for name, buckets in by_controller.items()
            }
            for histogram, by_controller in after.items()
        }
        print(f"  {self.sets} sets: {window} done (load average {load_average()})", file=sys.stderr, flush=True)

    async def idle(self) -> None:
        pids = self.system.listener_pids().values()
        before = sum(cpu_seconds(pid) for pid in pids)
        started = time.monotonic()
        await asyncio.sleep(self.args.idle)  # the window measured: nothing to wait for but time
        self.result.idle_seconds = time.monotonic() - started
        self.result.listeners_cpu_idle = sum(cpu_seconds(pid) for pid in pids) - before


def controller_args(args: argparse.Namespace) -> tuple[str, ...]:
    """The controller's flags this run sets; its defaults for the rest."""
    found = [f"--k8s-client-rate-limiter-qps={args.qps}"] if args.qps else []
    if args.max_members is not None:
        found.append(f"--shared-listener-max-members={args.max_members}")
    if args.counts_in_status:
        found.append("--runner-counts-in-status=true")
    return tuple(found)


async def run_size(cluster: TestCluster, args: argparse.Namespace, sets: int) -> SizeResult:
    run_id = uuid.uuid4().hex[:6]
    namespace = f"many-sets-{run_id}"
    workdir = Path(tempfile.mkdtemp(prefix=f"arc-scaleset-many-{sets}-"))
    options = SystemOptions(
        controller_namespace=f"arc-many-{run_id}",
        watch_namespace=namespace,
        long_poll_seconds=args.long_poll,
        ready_timeout=args.timeout or default_timeout(sets),
        controller_args=controller_args(args),
    )
    system = System(workdir, kubeconfig=cluster.kubeconfig, options=options)
    await system.start()
    ok = False
    try:
        await system.ensure_namespace(namespace)
        result = await Bench(system, args, sets, namespace).run()
        ok = result.ok
        return result
    finally:
        await system.stop()
        with contextlib.suppress(Exception):
            async with KubeClient.from_kubeconfig(cluster.kubeconfig) as kube:
                for name in (namespace, options.controller_namespace):
                    with contextlib.suppress(NotFound):
                        await kube.delete(resources.NAMESPACES, name)
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"  logs kept in {workdir / 'logs'}", file=sys.stderr)


# -- report ----------------------------------------------------------------------------------------------


def report_size(r: SizeResult) -> None:
    """Print the figures of one size (as soon as it is done: a run stopped later keeps them)."""
    n = r.sets
    rss = r.listener_rss
    print(f"sets: {n}")
    print(
        f"  converged: {'yes' if r.ok else 'NO'}; every listener process started after {r.listeners_started:.1f} s,"
        f" every session held after {r.sessions:.1f} s, every ARS Running and Ready after {r.converged:.1f} s"
    )
    once = "yes" if r.exactly_once else "NO"
    print(
        f"  jobs: {r.jobs} completed after {r.jobs_seconds:.1f} s, exactly once: {once};"
        f" queue-to-start p50 {r.latency_p50:.1f} s, p95 {r.latency_p95:.1f} s"
    )
    print("  controller CPU seconds: " + ", ".join(f"{w} {s:.2f} ({s / n:.3f} per set)" for w, s in r.cpu.items()))
    idle_rate = r.cpu.get("idle", 0.0) / r.idle_seconds if r.idle_seconds else float("nan")
    listener_rate = r.listeners_cpu_idle / r.idle_seconds / n if r.idle_seconds else float("nan")
    print(
        f"  idle: controller {idle_rate * 1000:.1f} ms CPU per s ({idle_rate * 1000 / n:.2f} per set),"
        f" listeners {listener_rate * 1000:.2f} ms per s each"
    )
    print("  controller API requests (writes): " + ", ".join(
        f"{w} {total} ({writes})" for w, (total, writes) in r.requests.items()
    ) + f"; workload per job {r.requests.get('workload', (0, 0))[0] / max(r.jobs, 1):.1f}")  # fmt: skip
    jobs = max(r.jobs, 1)
    print("  controller API requests per job in the workload, by method: " + ", ".join(
        f"{method} {count / jobs:.2f}" for method, count in r.methods.get("workload", Counter()).most_common()
    ))  # fmt: skip
    server = r.server.get("workload", Counter())
    print(
        f"  API server requests per job in the workload (controller, listeners and the bench's own polls;"
        f" {sum(server.values()) / jobs:.2f} in all): "
        + ", ".join(f"{what} {count / jobs:.2f}" for what, count in server.most_common())
    )
    setup = r.server.get("setup", Counter())
    # Which of the controller's client buckets (one per resource type) the set-up leans on (issue 30).
    print(
        f"  API server requests per set at set-up ({sum(setup.values()) / n:.2f} in all; the top 12): "
        + ", ".join(f"{what} {count / n:.2f}" for what, count in setup.most_common(12))
    )
    print("  node agent + listeners CPU seconds: " + ", ".join(f"{w} {s:.2f}" for w, s in r.agent_cpu.items()))
    for window in ("setup", "workload", "teardown"):
        for histogram, what in ((RECONCILE_HISTOGRAM, "reconcile time"), (QUEUE_HISTOGRAM, "queue wait")):
            found = sorted(r.p95.get(window, {}).get(histogram, {}).items())
            print(f"  {what} p95, {window}: " + ", ".join(
                f"{name} {p95:g} s ({count})" for name, (p95, count) in found if count
            ))  # fmt: skip
    print(f"  controller RSS: {r.controller_rss:.1f} MB (peak {r.controller_peak:.1f} MB)")
    if rss:
        print(
            f"  listener RSS: {len(rss)} processes, median {statistics.median(rss):.1f} MB,"
            f" max {max(rss):.1f} MB, total {sum(rss):.0f} MB; node agent {r.agent_rss:.1f} MB"
        )
        per_set = sum(rss) / n
        print(
            f"  listener memory per scale set: {per_set:.2f} MB (RSS sum / {n} sets; peak sum"
            f" {sum(r.listener_peak) / n:.2f} MB), {per_set / ARC_LISTENER_MB:.3f} x ARC's listener"
            f" ({ARC_LISTENER_MB:.1f} MB per set, issue 30, measured 2026-06-30, not in this run;"
            f" goal <= {LISTENER_GOAL})"
        )
    if r.saturated_jobs:
        total, writes = r.requests.get("saturated", (0, 0))
        print(
            f"  saturated: {r.saturated_jobs} jobs queued at once completed after {r.saturated_seconds:.1f} s:"
            f" {r.saturated_jobs / r.saturated_seconds:.2f} jobs per second; controller requests per job"
            f" {total / r.saturated_jobs:.1f} ({writes / r.saturated_jobs:.1f} writes)"
        )
    print(f"  teardown: every ARS gone after {r.teardown:.1f} s")
    for problem in r.problems:
        print(f"  problem: {problem}")


def report(results: Sequence[SizeResult]) -> None:
    """Print the per-set cost ratios of the largest size over the smallest."""
    if len(results) < 2:
        return
    small, large = min(results, key=lambda r: r.sets), max(results, key=lambda r: r.sets)
    if small.sets == large.sets:
        return
    print(f"per-set cost, {large.sets} sets / {small.sets} sets (1.00: no growth with the number of sets):")

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}" if b > 0 and a == a and b == b else "n/a"

    rows = [
        ("controller CPU, setup", large.cpu.get("setup", 0) / large.sets, small.cpu.get("setup", 0) / small.sets),
        ("controller CPU, idle (per s)", large.cpu.get("idle", 0) / large.idle_seconds / large.sets,
         small.cpu.get("idle", 0) / small.idle_seconds / small.sets),
        ("controller CPU, workload (per job)", large.cpu.get("workload", 0) / max(large.jobs, 1),
         small.cpu.get("workload", 0) / max(small.jobs, 1)),
        ("controller CPU, teardown", large.cpu.get("teardown", 0) / large.sets,
         small.cpu.get("teardown", 0) / small.sets),
        ("API requests, setup", large.requests.get("setup", (0, 0))[0] / large.sets,
         small.requests.get("setup", (0, 0))[0] / small.sets),
        ("API requests, workload (per job)", large.requests.get("workload", (0, 0))[0] / max(large.jobs, 1),
         small.requests.get("workload", (0, 0))[0] / max(small.jobs, 1)),
        ("API requests, teardown", large.requests.get("teardown", (0, 0))[0] / large.sets,
         small.requests.get("teardown", (0, 0))[0] / small.sets),
        ("controller RSS (MB)", large.controller_rss / large.sets, small.controller_rss / small.sets),
        ("listener RSS (median MB)", statistics.median(large.listener_rss or [0]),
         statistics.median(small.listener_rss or [0])),
        ("listener RSS per set (sum / sets, MB)", sum(large.listener_rss) / large.sets,
         sum(small.listener_rss) / small.sets),
        ("time to converge", large.converged / large.sets, small.converged / small.sets),
        ("time to tear down", large.teardown / large.sets, small.teardown / small.sets),
    ]  # fmt: skip
    for label, a, b in rows:
        print(f"  {label}: {ratio(a, b)}  ({a:.4g} vs {b:.4g})")
    print(f"p95, {large.sets} sets / {small.sets} sets:")
    for window in ("setup", "workload", "teardown"):
        for histogram, what in ((RECONCILE_HISTOGRAM, "reconcile time"), (QUEUE_HISTOGRAM, "queue wait")):
            big, little = large.p95.get(window, {}).get(histogram, {}), small.p95.get(window, {}).get(histogram, {})
            for name in sorted(set(big) & set(little)):
                a, b = big[name][0], little[name][0]
                if math.isnan(a) or math.isnan(b):
                    continue  # no reconcile of that controller in that window at one of the sizes
                print(f"  {what}, {window}, {name}: {ratio(a, b)}  ({a:g} s vs {b:g} s)")


async def main(args: argparse.Namespace) -> int:
    sizes = [int(s) for s in re.split(r"[,\s]+", args.sets.strip()) if s]
    print(f"machine: {os.cpu_count()} cores; load average at start {load_average()}", file=sys.stderr)
    members = DEFAULT_SHARED_LISTENER_MAX_MEMBERS if args.max_members is None else args.max_members
    groups = f"shared listeners of at most {members} sets" if members else "one shared listener"
    mode = groups if args.shared_listener else "a listener per set"
    counts = "; runner counts in the status too" if args.counts_in_status else ""
    print(f"mode: {mode}; " + ("one credentials Secret" if args.shared_secret or args.shared_listener else
                               "a credentials Secret per set") + counts)  # fmt: skip
    results = []
    with start_test_cluster(reuse=Path(args.reuse) if args.reuse else None) as cluster:
        for sets in sizes:
            print(f"running {sets} scale sets ...", file=sys.stderr, flush=True)
            results.append(await run_size(cluster, args, sets))
            report_size(results[-1])
            sys.stdout.flush()
    print(f"load average at the end: {load_average()}")
    report(results)
    return 0 if all(r.ok for r in results) else 1


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="10,100", help="sizes to run, comma-separated (default: 10,100)")
    parser.add_argument("--jobs", type=int, default=2, help="jobs per scale set (default: 2)")
    parser.add_argument("--rate", type=float, default=0.008,
                        help="job arrivals per second per scale set (default: 0.008)")  # fmt: skip
    parser.add_argument("--duration-min", type=float, default=2.0, help="shortest job, seconds (default: 2)")
    parser.add_argument("--duration-max", type=float, default=6.0, help="longest job, seconds (default: 6)")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of the idle window (default: 30)")
    parser.add_argument("--long-poll", type=float, default=5.0,
                        help="the simulated GitHub's message long poll, seconds (default: 5)")  # fmt: skip
    parser.add_argument("--shared-secret", action="store_true",
                        help="one credentials Secret for all sets (default: one per set, as charts make)")  # fmt: skip
    parser.add_argument("--saturate", type=int, default=0,
                        help="jobs per set queued at once after the workload (default: 0, none)")  # fmt: skip
    parser.add_argument("--max-runners", type=int, default=5,
                        help="each set's maxRunners: how many jobs run at once per set (default: 5)")  # fmt: skip
    parser.add_argument("--saturate-duration", type=float, default=0.5,
                        help="seconds each --saturate job runs (default: 0.5)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1, help="workload seed (default: 1)")
    parser.add_argument("--shared-listener", action="store_true",
                        help="every set annotated for a shared listener, one Secret for all (issue 30)")  # fmt: skip
    parser.add_argument("--max-members", type=int, default=None,
                        help="the controller's --shared-listener-max-members (default: its own, "
                        f"{DEFAULT_SHARED_LISTENER_MAX_MEMBERS})")  # fmt: skip
    parser.add_argument("--total-jobs", type=int, default=0,
                        help="N jobs in all at every size, one per set while sets last (default: --jobs)")  # fmt: skip
    parser.add_argument("--counts-in-status", action="store_true",
                        help="the controller's --runner-counts-in-status=true (default: off, as ARC's current "
                        "code: the counts in the metrics only)")  # fmt: skip
    parser.add_argument("--qps", type=float, default=0.0,
                        help="the controller's --k8s-client-rate-limiter-qps (default: its own, ARC's 20)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=0.0,
                        help="seconds any one wait may take (default: 600, plus 1.5 per set past 100)")  # fmt: skip
    parser.add_argument("--reuse", help="work directory of a running cluster (arc-scaleset cluster up --dir)")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.total_jobs < 0 or args.rate <= 0 or not 0 <= args.duration_min <= args.duration_max:
        parser.error("need --jobs >= 1, --total-jobs >= 0, --rate > 0 and 0 <= --duration-min <= --duration-max")
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args(sys.argv[1:]))))
