"""Side by side with ARC itself: the same scale set on the same control plane and the same simulated GitHub,
run by ARC's Go controller and listener (v0.27.6, built from its module) and by this project, in
alternating rounds.

    .venv/bin/python bench/bench_vs_arc.py [--runners 200] [--rounds 3] [--burst 50] [--job-seconds 2]
                                           [--qps 20] [--reuse DIR] [--only arc|ours]

Needs root (ARC's listener reads its service account from a fixed path: the node agent gives it one in a
private mount namespace, see ``arc_scaleset_lab/node/arc_listener.py``). ARC is built on first use into the
version-keyed cache (``arc_scaleset_lab/cluster/arc_binaries.py``: about 1.5 min cold, seconds warm).

One control plane (a fresh one, or ``--reuse`` a running one: its CRDs are replaced), one simulated GitHub
process and one node agent (it plays runner pods for both sides, and listener pods: ARC's binary for ARC's
pods, ``arc-scaleset listener`` for ours) serve every round. A round of one side:

1. its CRDs are applied (ARC's ``actions.github.com`` CRDs from its module, or ours), replacing the other
   side's (the CRDs are cluster-scoped and differ: the sides cannot run at once);
2. its controller starts as a process (ARC's manager with default flags but a loopback metrics port; ours
   with ``--k8s-client-rate-limiter-qps`` ``--qps``, 20 by default: ARC's client default), with GitHub App
   credentials in the scale set's Secret (what most installations use);
3. **scale-up**: an AutoscalingRunnerSet with minRunners = maxRunners = N is created; timed until N runner
   pods exist, N runners are registered with the sim, and N EphemeralRunners report Running;
4. **scale-down**: minRunners goes to 0 (each controller rolls its listener, which asks for 0); timed until
   no runner pod and no EphemeralRunner is left;
5. **burst**: ``--burst`` jobs are queued at once (``--job-seconds`` each) on the scale set now at 0 runners:
   jobs arrive faster than runners can start; each job's queue-to-start latency is read from the sim;
6. the scale set is deleted and the controller stopped.

Figures per round: the times above; API server requests per runner during scale-up and scale-down
(``apiserver_request_total``, every client: controller, listener, scheduler, kwok, node agent -- the same
others on both sides), writes (POST/PUT/PATCH/DELETE/DELETECOLLECTION/APPLY) and reads (GET/LIST); the
controller's CPU seconds in each window and its peak RSS (VmHWM: a fresh process per round); the listener's peak RSS
(sampled every 0.5 s, every listener process of the round); job latency p50/p95. Printed per side as
medians over the rounds, then as ratios project/ARC (below 1: the project is faster or cheaper).
On a 2-core machine every process competes for CPU; the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import datetime as dt
import json
import os
import re
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import arc_scaleset
from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.kube.client import KubeClient, PatchType
from arc_scaleset.kube.errors import AlreadyExists, NotFound
from arc_scaleset.kube.informer import Informer
from arc_scaleset.kube.resources import NAMESPACES, PODS, Resource
from arc_scaleset_lab.cluster import arc_binaries
from arc_scaleset_lab.cluster.localcluster import free_port
from arc_scaleset_lab.cluster.processes import ManagedProcess
from arc_scaleset_lab.harness.cluster import install_crds, start_test_cluster
from arc_scaleset_lab.harness.system import arc_scaleset_command, create_app_secret
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.node.arc_listener import can_run_arc_listener
from arc_scaleset_lab.sim.admin_client import SimAdminClient

CONTROLLER_NAMESPACE = "arc-systems"
ARC_LISTENER_IMAGE = f"ghcr.io/actions/gha-runner-scale-set-controller:{arc_binaries.ARC_CHART_VERSION}"
OUR_LISTENER_IMAGE = "ghcr.io/arc-scaleset/arc-scaleset:bench"
RUNNER_TEMPLATE = {
    "spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "runner", "image": "ghcr.io/actions/actions-runner:2.330.0",
                        "command": ["/home/runner/run.sh"]}],
    }
}  # fmt: skip
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"})
READ_VERBS = frozenset({"GET", "LIST"})
_METRIC_LINE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')
SIDES = ("arc", "ours")
ORG = "bench-org"


# -- measuring ----------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) so far of process ``pid`` (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_kib(pid: int, field_name: str) -> int:
    """``VmHWM`` (peak) or ``VmRSS`` of ``pid`` in KiB (0 when it is gone)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


def children_of(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                    found.append(int(entry.name))
    return found


async def api_requests(kube: KubeClient) -> collections.Counter[str]:
    """The API server's request counts so far (every client), by verb."""
    text = await kube.request_raw("GET", "/metrics")
    counts: collections.Counter[str] = collections.Counter()
    for line in str(text).splitlines():
        match = _METRIC_LINE.match(line)
        if match is not None:
            counts[dict(_LABEL.findall(match["labels"])).get("verb", "")] += int(float(match["value"]))
    return counts


def per_runner(after: collections.Counter[str], before: collections.Counter[str], verbs: frozenset[str],
               runners: int) -> float:  # fmt: skip
    return sum(after[v] - before[v] for v in verbs) / runners


class PeakSampler:
    """Samples the peak RSS of the node agent's listener children every ``interval`` seconds."""

    def __init__(self, agent_pid: int, interval: float = 0.5) -> None:
        self.agent_pid = agent_pid
        self.interval = interval
        self.listener_peak_kib = 0
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        for pid in children_of(self.agent_pid):
            # The node agent's children are listener processes only (runner pods are played in process).
            self.listener_peak_kib = max(self.listener_peak_kib, memory_kib(pid, "VmHWM"))

    async def _run(self) -> None:
        while True:
            await asyncio.to_thread(self.sample)
            await asyncio.sleep(self.interval)

    def __enter__(self) -> PeakSampler:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()
        self.sample()


async def until(check: Callable[[], Awaitable[bool] | bool], what: str, *, timeout: float,
                interval: float = 0.1) -> float:  # fmt: skip
    """Wait until ``check()`` holds (polled with backoff up to ``interval``); the monotonic time it held."""
    await eventually(check, what, timeout=timeout, interval=0.01, max_interval=interval)
    return time.monotonic()


def parse_time(value: str | None) -> dt.datetime | None:
    if not value or value.startswith("0001-"):
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


# -- one round ----------------------------------------------------------------------------------------


@dataclass
class Round:
    side: str
    pods_seconds: float = 0.0
    registered_seconds: float = 0.0
    running_seconds: float = 0.0
    up_writes: float = 0.0
    up_reads: float = 0.0
    up_cpu: float = 0.0
    down_seconds: float = 0.0
    down_writes: float = 0.0
    down_reads: float = 0.0
    down_cpu: float = 0.0
    controller_peak_mib: float = 0.0
    listener_peak_mib: float = 0.0
    latency_p50: float = 0.0
    latency_p95: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)


@dataclass
class Lab:
    """What every round shares: the cluster, the sim, the node agent."""

    kubeconfig: Path
    workdir: Path
    kube: KubeClient
    sim: SimAdminClient
    sim_url: str
    agent: ManagedProcess
    arc_dir: Path
    qps: float
    processes: list[ManagedProcess] = field(default_factory=list)


def start_controller(lab: Lab, side: str, round_no: int) -> tuple[ManagedProcess, str]:
    """Start ``side``'s controller; its process and its metrics URL (ready when that answers)."""
    port = free_port()
    env = {**os.environ, "KUBECONFIG": str(lab.kubeconfig), "CONTROLLER_MANAGER_POD_NAMESPACE": CONTROLLER_NAMESPACE}
    if side == "arc":
        # ARC's defaults but a loopback metrics port (its default :8080 is shared by every process here).
        argv = [str(lab.arc_dir / arc_binaries.MANAGER), "--auto-scaling-runner-set-only",
                f"--metrics-addr=127.0.0.1:{port}"]  # fmt: skip
        env["CONTROLLER_MANAGER_CONTAINER_IMAGE"] = ARC_LISTENER_IMAGE
    else:
        argv = arc_scaleset_command(
            "controller", f"--kubeconfig={lab.kubeconfig}", "--auto-scaling-runner-set-only",
            f"--metrics-addr=127.0.0.1:{port}",
            f"--k8s-client-rate-limiter-qps={lab.qps:g}",
            f"--k8s-client-rate-limiter-burst={max(30, int(lab.qps * 1.5))}",
        )  # fmt: skip
        env["CONTROLLER_MANAGER_CONTAINER_IMAGE"] = OUR_LISTENER_IMAGE
    process = ManagedProcess(f"controller-{side}-{round_no}", argv,
                             log_path=lab.workdir / f"controller-{side}-{round_no}.log", env=env)  # fmt: skip
    process.start(tie_to_parent=True)
    lab.processes.append(process)
    return process, f"http://127.0.0.1:{port}/metrics"


async def http_ok(url: str) -> bool:
    import aiohttp

    try:
        async with aiohttp.ClientSession() as session, session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as r:
            return r.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


def runner_set(side: str, name: str, namespace: str, config_url: str, secret: str, runners: int) -> dict[str, Any]:
    # ARC deletes a set whose version label is not the one it was built with; ours accepts its own version.
    version = arc_binaries.ARC_CHART_VERSION if side == "arc" else arc_scaleset.__version__
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/version": version}},
        "spec": {
            "githubConfigUrl": config_url,
            "githubConfigSecret": secret,
            "runnerScaleSetName": name,
            "minRunners": runners,
            "maxRunners": runners,
            "template": RUNNER_TEMPLATE,
        },
    }


async def force_cleanup(kube: KubeClient, namespaces: list[str]) -> None:
    """Remove every finalizer of the scale-set objects left in ``namespaces`` (a controller that is gone)."""
    kinds: list[Resource] = [AUTOSCALING_RUNNER_SETS, EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS, AUTOSCALING_LISTENERS]
    for namespace in namespaces:
        for kind in kinds:
            with contextlib.suppress(NotFound):
                for obj in (await kube.list(kind, namespace=namespace)).items:
                    if obj["metadata"].get("finalizers"):
                        with contextlib.suppress(NotFound):
                            await kube.patch(kind, obj["metadata"]["name"], {"metadata": {"finalizers": None}},
                                             namespace=namespace, patch_type=PatchType.MERGE)  # fmt: skip
                    with contextlib.suppress(NotFound):
                        await kube.delete(kind, obj["metadata"]["name"], namespace=namespace)


async def run_round(lab: Lab, side: str, round_no: int, args: argparse.Namespace) -> Round:
    runners = args.runners
    result = Round(side)
    crds = arc_binaries.crd_documents(lab.arc_dir) if side == "arc" else None
    await install_crds(lab.kube, crds)
    namespace = f"bench-{side}-{round_no}-{secrets.token_hex(3)}"
    await lab.kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    secret = "github-app"
    await create_app_secret(lab.kube, lab.sim, namespace, name=secret)
    controller, metrics_url = start_controller(lab, side, round_no)
    pid = controller.pid
    assert pid is not None

    async def ready() -> bool:
        if controller.exit_code() is not None:
            raise RuntimeError(f"{controller.name} exited:\n{controller.log_tail(30)}")
        return await http_ok(metrics_url)

    await until(ready, f"{side}'s controller to serve /metrics", timeout=90)
    pods = Informer(lab.kube, PODS, namespace=namespace)
    ers = Informer(lab.kube, EPHEMERAL_RUNNERS, namespace=namespace)
    pods.start()
    ers.start()
    await pods.wait_synced()
    await ers.wait_synced()
    name = f"bench-{side}-{round_no}-{secrets.token_hex(2)}"
    scale_set_ids: set[int] = set()

    def live_pods() -> int:
        return sum(1 for p in pods.store.list() if not p["metadata"].get("deletionTimestamp"))

    def running_ers() -> int:
        return sum(1 for e in ers.store.list() if (e.get("status") or {}).get("phase") == "Running")

    async def registered() -> int:
        if not scale_set_ids:
            scale_set_ids.update(s["id"] for s in await lab.sim.scale_sets() if s.get("name") == name)
        return sum(1 for r in await lab.sim.runners() if r.get("runnerScaleSetId") in scale_set_ids)

    try:
        with PeakSampler(lab.agent.pid or 0) as sampler:
            # -- scale-up --
            before, cpu_before = await api_requests(lab.kube), cpu_seconds(pid)
            start = time.monotonic()
            await lab.kube.create(AUTOSCALING_RUNNER_SETS,
                                  runner_set(side, name, namespace, f"{lab.sim_url}/{ORG}", secret, runners),
                                  namespace=namespace)  # fmt: skip
            timeout = 120 + runners * 2.0
            pods_at = until(lambda: live_pods() >= runners, f"{runners} runner pods", timeout=timeout)
            registered_at = until(lambda: _at_least(registered(), runners), f"{runners} registered runners",
                                  timeout=timeout, interval=0.5)  # fmt: skip
            running_at = until(lambda: running_ers() >= runners, f"{runners} Running EphemeralRunners", timeout=timeout)
            t_pods, t_reg, t_run = await asyncio.gather(pods_at, registered_at, running_at)
            after, cpu_after = await api_requests(lab.kube), cpu_seconds(pid)
            result.pods_seconds, result.registered_seconds = t_pods - start, t_reg - start
            result.running_seconds = t_run - start
            result.up_writes = per_runner(after, before, WRITE_VERBS, runners)
            result.up_reads = per_runner(after, before, READ_VERBS, runners)
            result.up_cpu = cpu_after - cpu_before
            print(f"  {side} round {round_no}: {runners} pods {result.pods_seconds:.1f}s, registered "
                  f"{result.registered_seconds:.1f}s, Running {result.running_seconds:.1f}s",
                  file=sys.stderr)  # fmt: skip

            # -- scale-down --
            before, cpu_before = after, cpu_seconds(pid)
            start = time.monotonic()
            await lab.kube.patch(AUTOSCALING_RUNNER_SETS, name, {"spec": {"minRunners": 0}}, namespace=namespace,
                                 patch_type=PatchType.MERGE)  # fmt: skip
            t_down = await until(lambda: live_pods() == 0 and len(ers.store) == 0, "no runner pod and no ER",
                                 timeout=timeout)  # fmt: skip
            after, cpu_after = await api_requests(lab.kube), cpu_seconds(pid)
            result.down_seconds = t_down - start
            result.down_writes = per_runner(after, before, WRITE_VERBS, runners)
            result.down_reads = per_runner(after, before, READ_VERBS, runners)
            result.down_cpu = cpu_after - cpu_before
            print(f"  {side} round {round_no}: down to 0 in {result.down_seconds:.1f}s", file=sys.stderr)

            # -- burst of jobs on an empty scale set --
            if args.burst > 0:
                ids = set(
                    await lab.sim.enqueue_job(
                        name, repository=f"{ORG}/repo", duration=args.job_seconds, count=args.burst
                    )
                )

                async def burst_done() -> bool:
                    jobs = [j for j in await lab.sim.jobs() if j.get("runnerRequestId") in ids]
                    return len(jobs) == len(ids) and all(j.get("finishedAt") and parse_time(j["finishedAt"])
                                                         for j in jobs)  # fmt: skip

                await until(burst_done, f"{args.burst} jobs to run", timeout=120 + args.burst * 5.0, interval=0.5)
                latencies = []
                for job in await lab.sim.jobs():
                    if job.get("runnerRequestId") in ids:
                        queued, started = parse_time(job.get("enqueuedAt")), parse_time(job.get("startedAt"))
                        if queued and started:
                            latencies.append((started - queued).total_seconds())
                result.latency_p50, result.latency_p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
                print(f"  {side} round {round_no}: burst of {args.burst}: latency p50 {result.latency_p50:.1f}s "
                      f"p95 {result.latency_p95:.1f}s", file=sys.stderr)  # fmt: skip
            result.controller_peak_mib = memory_kib(pid, "VmHWM") / 1024
        result.listener_peak_mib = sampler.listener_peak_kib / 1024
    finally:
        await pods.stop()
        await ers.stop()
        await teardown(lab, side, controller, namespace, name)
    return result


async def _at_least(count: Awaitable[int], n: int) -> bool:
    return await count >= n


async def teardown(lab: Lab, side: str, controller: ManagedProcess, namespace: str, name: str) -> None:
    """Delete the scale set and let the controller finalize it (bounded), then stop it and clean up by force."""
    with contextlib.suppress(NotFound):
        await lab.kube.delete(AUTOSCALING_RUNNER_SETS, name, namespace=namespace)

    async def gone() -> bool:
        try:
            await lab.kube.get(AUTOSCALING_RUNNER_SETS, name, namespace=namespace)
        except NotFound:
            return True
        return False

    with contextlib.suppress(TimeoutError):
        await until(gone, "the scale set to be finalized", timeout=120, interval=1.0)
    await asyncio.to_thread(controller.stop, timeout=15.0)
    await force_cleanup(lab.kube, [namespace, CONTROLLER_NAMESPACE])
    with contextlib.suppress(NotFound):
        await lab.kube.delete(NAMESPACES, namespace)


# -- the lab ------------------------------------------------------------------------------------------


async def start_sim(workdir: Path, processes: list[ManagedProcess]) -> str:
    state_file, token_file = workdir / "sim.json", workdir / "sim-tokens"
    token_file.write_text("ghp_" + secrets.token_hex(18) + "\n")
    sim = ManagedProcess("sim", arc_scaleset_command(
        "sim", "--host=127.0.0.1", "--port=0", f"--state-file={state_file}", f"--token-file={token_file}",
        "--long-poll-seconds=5",
    ), log_path=workdir / "sim.log")  # fmt: skip
    sim.start(tie_to_parent=True)
    processes.append(sim)
    await until(state_file.is_file, "the simulated GitHub", timeout=60)
    return str(json.loads(state_file.read_text())["url"])


async def start_agent(kubeconfig: Path, sim_url: str, workdir: Path, arc_dir: Path) -> ManagedProcess:
    ready = workdir / "node-agent.ready"
    agent = ManagedProcess("node-agent", [
        sys.executable, "-m", "arc_scaleset_lab.node.agent", f"--kubeconfig={kubeconfig}", f"--sim-url={sim_url}",
        f"--listener-namespace={CONTROLLER_NAMESPACE}", f"--log-dir={workdir}", f"--work-dir={workdir / 'pods'}",
        f"--ready-file={ready}", f"--arc-listener-binary={arc_dir / arc_binaries.LISTENER}",
    ], log_path=workdir / "node-agent.log")  # fmt: skip
    agent.start(tie_to_parent=True)
    await until(ready.is_file, "the node agent", timeout=60)
    return agent


async def main(args: argparse.Namespace) -> list[Round]:
    if not can_run_arc_listener():
        raise SystemExit("bench_vs_arc needs root: ARC's listener is given its service account in a mount namespace")
    started = time.monotonic()
    cold = not arc_binaries.is_built()
    arc_dir = arc_binaries.build()
    if cold:
        print(f"built ARC {arc_binaries.ARC_VERSION} in {time.monotonic() - started:.0f}s", file=sys.stderr)
    rounds: list[Round] = []
    with start_test_cluster(reuse=Path(args.reuse) if args.reuse else None) as cluster, \
            tempfile.TemporaryDirectory(prefix="bench-vs-arc-") as tmp:  # fmt: skip
        workdir = Path(args.workdir) if args.workdir else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        processes: list[ManagedProcess] = []
        kube = KubeClient.from_kubeconfig(cluster.kubeconfig)
        try:
            with contextlib.suppress(AlreadyExists):
                await kube.create(NAMESPACES, {"metadata": {"name": CONTROLLER_NAMESPACE}})
            sim_url = await start_sim(workdir, processes)
            agent = await start_agent(cluster.kubeconfig, sim_url, workdir, arc_dir)
            processes.append(agent)
            async with SimAdminClient(sim_url, timeout=30.0) as sim:
                lab = Lab(cluster.kubeconfig, workdir, kube, sim, sim_url, agent, arc_dir, args.qps, processes)
                sides = [args.only] if args.only else list(SIDES)
                for round_no in range(args.rounds):
                    # Alternate which side goes first, so neither always meets a fresher API server.
                    for side in sides if round_no % 2 == 0 else reversed(sides):
                        rounds.append(await run_round(lab, side, round_no, args))
        finally:
            for process in reversed(processes):
                await asyncio.to_thread(process.stop, timeout=15.0)
            await kube.close()
    report(args, rounds)
    return rounds


FIGURES = (
    ("pods_seconds", "seconds to N runner pods"),
    ("registered_seconds", "seconds to N registered runners"),
    ("running_seconds", "seconds to N Running EphemeralRunners"),
    ("down_seconds", "seconds to 0 (minRunners N -> 0)"),
    ("up_writes", "API writes per runner, scale-up"),
    ("up_reads", "API GETs+LISTs per runner, scale-up"),
    ("down_writes", "API writes per runner, scale-down"),
    ("down_reads", "API GETs+LISTs per runner, scale-down"),
    ("up_cpu", "controller CPU seconds, scale-up"),
    ("down_cpu", "controller CPU seconds, scale-down"),
    ("controller_peak_mib", "controller peak RSS MiB"),
    ("listener_peak_mib", "listener peak RSS MiB"),
    ("latency_p50", "job queue-to-start p50 s (burst)"),
    ("latency_p95", "job queue-to-start p95 s (burst)"),
)


def report(args: argparse.Namespace, rounds: list[Round]) -> None:
    load = os.getloadavg()
    print(f"bench_vs_arc: {args.runners} runners, {args.rounds} round(s) per side, burst {args.burst} jobs of "
          f"{args.job_seconds:g}s, client QPS {args.qps:g} (ARC v{arc_binaries.ARC_VERSION.lstrip('v')} default 20), "
          f"credentials: GitHub App; {os.cpu_count()} CPUs, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")  # fmt: skip
    medians: dict[str, dict[str, float]] = {}
    for side in SIDES:
        mine = [r for r in rounds if r.side == side]
        if mine:
            medians[side] = {key: statistics.median(getattr(r, key) for r in mine) for key, _ in FIGURES}
    print(f"{'figure (median)':42} {'ARC':>10} {'project':>10} {'project/ARC':>12}")
    for key, label in FIGURES:
        arc, ours = medians.get("arc", {}).get(key), medians.get("ours", {}).get(key)
        ratio = f"{ours / arc:12.2f}" if arc and ours is not None else f"{'-':>12}"
        print(f"{label:42} {_cell(arc)} {_cell(ours)} {ratio}")
    if "arc" in medians and "ours" in medians:
        for key, label in FIGURES:
            arc, ours = medians["arc"][key], medians["ours"][key]
            if arc:
                print(f"ratio {label}: {ours / arc:.2f}")


def _cell(value: float | None) -> str:
    return f"{value:10.2f}" if value is not None else f"{'-':>10}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runners", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per side, alternating (default 3)")
    parser.add_argument("--burst", type=int, default=50, help="jobs queued at once after the scale-down (0: none)")
    parser.add_argument("--job-seconds", type=float, default=2.0, help="how long each burst job runs")
    parser.add_argument("--qps", type=float, default=20.0, help="our controller's client QPS (ARC's default: 20)")
    parser.add_argument("--only", choices=SIDES, help="run one side only")
    parser.add_argument("--reuse", help="work directory of a running cluster (its CRDs are replaced)")
    parser.add_argument("--workdir", help="keep logs here (default: a temporary directory, removed)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
