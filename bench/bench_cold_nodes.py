"""Cold nodes: how long a job waits for a runner when nodes take a while to appear, and what the room kept for
runners costs, with no room kept, with idle runners, and with shared warm capacity (issue 27).

    .venv/bin/python bench/bench_cold_nodes.py [--sets 10] [--bursts 4] [--burst-size 4] [--job-seconds 10]
                                               [--node-delay 60] [--node-idle 15] [--node-size 4] [--max-nodes 16]
                                               [--long-poll 2] [--timeout 900] [--reuse DIR] [--only a,b,c]
                                               [--keep-logs]

One control plane (a fresh one, or ``--reuse DIR``), and for each variant a system of its own
(:class:`arc_scaleset_lab.harness.system.System`: the simulated GitHub, the controller manager and the node agent
as processes) with ``--sets`` AutoscalingRunnerSets whose runners have one shape (one CPU and 2 GiB, on a node pool
of its own that starts empty). The lab's node provisioner (:mod:`arc_scaleset_lab.cluster.provisioner`) plays the
cluster autoscaler: a node of ``--node-size`` CPUs appears ``--node-delay`` seconds after a pod finds no room, and a
node empty for ``--node-idle`` seconds goes. The variants, one after the other in the same run:

- **(a) cold**: ``minRunners: 0``; every burst waits for a node;
- **(b) hot pool**: ``minRunners: --burst-size`` on *every* set: the smallest pool of idle runners with which no
  burst waits for a node (a burst may come to any set), so its queue-to-start is as good as (c)'s or better (an
  idle runner takes a job as it is queued);
- **(c) warm capacity**: ``minRunners: 0`` and ``warmCapacity.runners: --burst-size`` on every set: the sets share
  one pool of placeholders (their runners have one shape), so the pool is as large as one burst, not one burst per
  set; a burst's runner pods preempt placeholders and start at once, and the preempted placeholders wait for the
  next node in the background.

The workload: ``--bursts`` bursts of ``--burst-size`` jobs (``--job-seconds`` each) arriving at one instant, each on
one set (round robin over the sets), one burst every ``--node-delay + --job-seconds + --node-idle + 15`` seconds:
the room a burst took is back before the next (warm capacity's next node has come), and the nodes a burst's
runners needed are gone again (with ``minRunners: 0`` every burst meets no node, as after a quiet hour).
Measured from the first burst until every job completed: the jobs' queue-to-start (from the simulated GitHub:
enqueued to started) p50 and p95, and the *reserved node-seconds* (the pool's nodes integrated over that window,
sampled every second: what the room costs, the busy nodes included).

Printed per variant, then as ratios: (c)'s p95 against (a)'s and (b)'s, and (c)'s node-seconds against (b)'s
(goal: p95 at most 8 s, node-seconds at most 40% of the hot pool's). A shorter ``--node-delay`` than the 60 s a
real autoscaler needs scales the waits down (and the run's length); say so with the figures. Exit code 0 when
every variant ran every job exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.warm_capacity import LABEL_WARM_POOL
from arc_scaleset.controllers.settings import DEFAULT_WARM_PRIORITY_CLASS
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import AlreadyExists, NotFound
from arc_scaleset.kube.resources import Resource
from arc_scaleset_lab.cluster.node_pool import holds_node
from arc_scaleset_lab.cluster.provisioner import NodeProvisioner
from arc_scaleset_lab.demo.cold_nodes import ColdNodes
from arc_scaleset_lab.demo.summary import audit_jobs, parse_time, percentile, queue_latencies
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.cluster import TestCluster, start_test_cluster
from arc_scaleset_lab.harness.system import ORG, System, SystemOptions

PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
SAMPLE_SECONDS = 1.0
REFILL_MARGIN = 15.0


@dataclass(frozen=True)
class Variant:
    key: str
    title: str
    min_runners: int = 0
    warm: int = 0


@dataclass
class VariantResult:
    variant: Variant
    latencies: list[float] = field(default_factory=list)
    slow: list[str] = field(default_factory=list)
    """For each job that waited more than 5 s: when the listener acquired it, GitHub gave it a runner, it started."""
    node_seconds: float = 0.0
    window: float = 0.0
    nodes_added: int = 0
    exactly_once: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def p50(self) -> float:
        return percentile(self.latencies, 0.5)

    @property
    def p95(self) -> float:
        return percentile(self.latencies, 0.95)


def variants(args: argparse.Namespace) -> list[Variant]:
    every = [
        Variant("a", "(a) cold: minRunners 0"),
        Variant("b", f"(b) hot pool: minRunners {args.burst_size} per set", min_runners=args.burst_size),
        Variant("c", f"(c) warm capacity: one shared pool of {args.burst_size} placeholders", warm=args.burst_size),
    ]
    chosen = set(args.only.split(",")) if args.only else {"a", "b", "c"}
    return [v for v in every if v.key in chosen]


async def wait_for(check: Callable[[], Awaitable[bool]], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.5)


class NodeMeter:
    """Integrates the pool's node count (as the provisioner's last scan saw it) over time."""

    def __init__(self, provisioner: NodeProvisioner) -> None:
        self.provisioner = provisioner
        self.node_seconds = 0.0
        self.counting = False

    async def run(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(SAMPLE_SECONDS)
            now = time.monotonic()
            if self.counting:
                self.node_seconds += len(self.provisioner.nodes) * (now - last)
            last = now


class Run:
    """One variant on its own system."""

    def __init__(self, system: System, args: argparse.Namespace, variant: Variant, run_id: str) -> None:
        self.system, self.args, self.variant = system, args, variant
        self.namespace = f"cold-{variant.key}-{run_id}"
        self.cold = ColdNodes(
            delay=args.node_delay, idle=args.node_idle, max_nodes=args.max_nodes, node_size=args.node_size,
            pool_name=f"cold-{variant.key}-{run_id}",
        )  # fmt: skip
        self.names = [f"set-{i}" for i in range(args.sets)]
        self.result = VariantResult(variant)

    @property
    def kube(self) -> KubeClient:
        return self.system.kube

    async def run(self) -> VariantResult:
        provisioner = NodeProvisioner(self.kube, self.cold.pool(), report=lambda line: None)
        meter = NodeMeter(provisioner)
        tasks = [asyncio.create_task(provisioner.run()), asyncio.create_task(meter.run())]
        try:
            await self.setup()
            meter.counting = True
            started = time.monotonic()
            await self.workload()
            self.result.window = time.monotonic() - started
            meter.counting = False
            self.result.node_seconds = meter.node_seconds
            self.result.nodes_added = provisioner.added
            await self.teardown()
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        return self.result

    async def setup(self) -> None:
        await self.system.ensure_namespace(self.namespace)
        template = self.cold.place(scale_sets.runner_template())
        for name in self.names:
            secret = await self.system.create_pat_secret(self.namespace, name=f"{name}-github-token")
            manifest = scale_sets.autoscaling_runner_set(
                name=name, namespace=self.namespace, config_url=self.system.config_url(), secret=secret,
                min_runners=self.variant.min_runners, max_runners=self.args.burst_size * 2 + self.variant.min_runners,
                template=template,
            )  # fmt: skip
            if self.variant.warm:
                manifest["spec"]["warmCapacity"] = {"runners": self.variant.warm}
            await self.kube.create(AUTOSCALING_RUNNER_SETS, manifest, namespace=self.namespace)
        await wait_for(self.ready, timeout=self.args.timeout, what=f"{self.variant.title}: every set ready")

    async def ready(self) -> bool:
        """Every listener holds its session, and the room the variant keeps is on nodes."""
        if len(await self.system.sim.sessions()) < len(self.names):
            return False
        pods = (await self.kube.list(resources.PODS, namespace=self.namespace)).items
        idle = sum(1 for pod in pods if holds_node(pod) and pod["status"].get("phase") == "Running")
        if idle < self.variant.min_runners * len(self.names):
            return False
        if self.variant.warm:
            placeholders = (await self.kube.list(resources.PODS, namespace=self.system.controller_namespace,
                                                 label_selector=LABEL_WARM_POOL)).items  # fmt: skip
            return sum(1 for pod in placeholders if holds_node(pod)) >= self.variant.warm
        return True

    async def workload(self) -> None:
        args = self.args
        gap = args.node_delay + args.job_seconds + args.node_idle + REFILL_MARGIN
        start = time.monotonic()
        for burst in range(args.bursts):
            await asyncio.sleep(max(0.0, burst * gap - (time.monotonic() - start)))
            target = self.names[burst % len(self.names)]
            await self.system.sim.enqueue_job(target, repository=f"{ORG}/cold", duration=args.job_seconds,
                                              count=args.burst_size)  # fmt: skip
        total: int = args.bursts * args.burst_size

        async def all_completed() -> bool:
            counts = (await self.system.sim.stats()).get("jobs") or {}
            return int(counts.get("completed") or 0) >= total

        await wait_for(all_completed, timeout=args.timeout, what=f"{self.variant.title}: {total} jobs to complete")
        jobs = await self.system.sim.jobs()
        audit = audit_jobs(jobs)
        self.result.exactly_once = audit.exactly_once and audit.total == total
        if not self.result.exactly_once:
            self.result.problems.append(f"jobs: {audit}")
        self.result.latencies = queue_latencies(jobs)
        self.result.slow = [_steps(job) for job, wait in zip(jobs, self.result.latencies, strict=False) if wait > 5]

    async def teardown(self) -> None:
        for name in self.names:
            with contextlib.suppress(NotFound):
                await self.kube.delete(AUTOSCALING_RUNNER_SETS, name, namespace=self.namespace)

        async def gone() -> bool:
            sets = (await self.kube.list(AUTOSCALING_RUNNER_SETS, namespace=self.namespace)).items
            placeholders = (await self.kube.list(resources.PODS, namespace=self.system.controller_namespace,
                                                 label_selector=LABEL_WARM_POOL)).items  # fmt: skip
            return len(sets) == 0 and len(placeholders) == 0

        await wait_for(gone, timeout=self.args.timeout, what="the scale sets and placeholders to go")
        # Pods on the pool's nodes are gone (kwok finishes a deletion only on a node it manages): now the nodes.
        for node in (await self.kube.list(resources.NODES, label_selector=self.cold.pool().selector)).items:
            with contextlib.suppress(NotFound):
                await self.kube.delete(resources.NODES, node["metadata"]["name"])


def _steps(job: dict[str, Any]) -> str:
    """A job's steps as seconds after it was queued."""
    enqueued = parse_time(job.get("enqueuedAt"))
    steps = []
    for key in ("acquiredAt", "assignedAt", "startedAt"):
        at = parse_time(job.get(key))
        steps.append(f"{key[:-2]} +{(at - enqueued).total_seconds():.1f} s" if at and enqueued else f"{key[:-2]} -")
    return ", ".join(steps)


async def run_variant(cluster: TestCluster, args: argparse.Namespace, variant: Variant) -> VariantResult:
    run_id = uuid.uuid4().hex[:6]
    workdir = Path(tempfile.mkdtemp(prefix=f"arc-scaleset-cold-{variant.key}-"))
    options = SystemOptions(
        controller_namespace=f"arc-cold-{variant.key}-{run_id}",
        watch_namespace=f"cold-{variant.key}-{run_id}",
        long_poll_seconds=args.long_poll,
        ready_timeout=args.timeout,
    )
    system = System(workdir, kubeconfig=cluster.kubeconfig, options=options)
    await system.start()
    result: VariantResult | None = None
    try:
        result = await Run(system, args, variant, run_id).run()
        return result
    finally:
        await system.stop()
        with contextlib.suppress(Exception):
            async with KubeClient.from_kubeconfig(cluster.kubeconfig) as kube:
                for name in (f"cold-{variant.key}-{run_id}", options.controller_namespace):
                    with contextlib.suppress(NotFound):
                        await kube.delete(resources.NAMESPACES, name)
        if result is not None and result.exactly_once and not args.keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"  logs kept in {workdir / 'logs'}", file=sys.stderr)


async def ensure_priority_class(cluster: TestCluster) -> None:
    """The placeholders' PriorityClass, as the controller chart makes it."""
    body: dict[str, Any] = {"metadata": {"name": DEFAULT_WARM_PRIORITY_CLASS}, "value": -10,
                            "preemptionPolicy": "Never", "globalDefault": False}  # fmt: skip
    async with KubeClient.from_kubeconfig(cluster.kubeconfig) as kube:
        with contextlib.suppress(AlreadyExists):
            await kube.create(PRIORITY_CLASSES, body)


def report(args: argparse.Namespace, results: Sequence[VariantResult]) -> None:
    print(
        f"{args.sets} scale sets, one runner shape (1 CPU, 2 GiB); {args.bursts} bursts of {args.burst_size} jobs of"
        f" {args.job_seconds:g} s; nodes of {args.node_size} CPUs appear {args.node_delay:g} s after a pod finds no"
        f" room, go after {args.node_idle:g} s empty"
    )
    for r in results:
        once = "yes" if r.exactly_once else "NO"
        print(
            f"{r.variant.title}: queue-to-start p50 {r.p50:.1f} s, p95 {r.p95:.1f} s; reserved node-seconds"
            f" {r.node_seconds:.0f} over {r.window:.0f} s ({r.nodes_added} nodes added); exactly once: {once}"
        )
        print("  queue-to-start, every job (s): " + " ".join(f"{latency:.1f}" for latency in r.latencies))
        for line in r.slow:
            print(f"  slow job: {line}")
        for problem in r.problems:
            print(f"  problem: {problem}")
    by_key = {r.variant.key: r for r in results}
    warm, hot, cold = by_key.get("c"), by_key.get("b"), by_key.get("a")
    if warm is None:
        return

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}" if b > 0 else "n/a"

    if cold is not None:
        print(f"ratio (c)/(a): p95 {ratio(warm.p95, cold.p95)}")
    if hot is not None:
        print(
            f"ratio (c)/(b): p95 {ratio(warm.p95, hot.p95)}, reserved node-seconds"
            f" {ratio(warm.node_seconds, hot.node_seconds)} (goal: at most 0.40)"
        )
    print(f"goal (c) p95 <= 8 s: {'met' if warm.p95 <= 8.0 else 'NOT met'} ({warm.p95:.1f} s)")


async def main(args: argparse.Namespace) -> int:
    print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    results = []
    with start_test_cluster(reuse=Path(args.reuse) if args.reuse else None) as cluster:
        await ensure_priority_class(cluster)
        for variant in variants(args):
            print(f"running {variant.title} ...", file=sys.stderr, flush=True)
            results.append(await run_variant(cluster, args, variant))
    report(args, results)
    return 0 if all(r.exactly_once for r in results) else 1


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=10, help="scale sets, one runner shape (default: 10)")
    parser.add_argument("--bursts", type=int, default=4, help="bursts, each on one set in turn (default: 4)")
    parser.add_argument("--burst-size", type=int, default=4, help="jobs per burst, arriving at once (default: 4)")
    parser.add_argument("--job-seconds", type=float, default=10.0, help="each job's duration (default: 10)")
    parser.add_argument("--node-delay", type=float, default=60.0,
                        help="seconds from a pod finding no room to its node (default: 60)")  # fmt: skip
    parser.add_argument("--node-idle", type=float, default=15.0, help="seconds a node stays empty (default: 15)")
    parser.add_argument("--node-size", type=int, default=4, help="CPUs per node, 4 GiB each (default: 4)")
    parser.add_argument("--max-nodes", type=int, default=16, help="most nodes of the pool (default: 16)")
    parser.add_argument("--long-poll", type=float, default=2.0, help="the sim's message long poll (default: 2)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds any one wait may take (default: 900)")
    parser.add_argument("--keep-logs", action="store_true", help="keep each variant's logs, also when it passed")
    parser.add_argument("--only", default="", help="comma-separated variants to run: a, b, c (default: all)")
    parser.add_argument("--reuse", help="work directory of a running cluster (arc-scaleset cluster up --dir)")
    args = parser.parse_args(argv)
    if args.sets < 1 or args.bursts < 1 or args.burst_size < 1 or args.node_delay < 0 or args.job_seconds < 0:
        parser.error("need --sets, --bursts and --burst-size >= 1, --node-delay and --job-seconds >= 0")
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args(sys.argv[1:]))))
