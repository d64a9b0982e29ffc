"""Resident memory of the controller manager and of one listener, as separate processes, at a runner count.

    .venv/bin/python bench/bench_memory.py [--runners 200,1000] [--jobs 200] [--qps 100] [--credentials pat|app]
        [--reuse DIR]
    .venv/bin/python bench/bench_memory.py --shared 1,10,100 [--shared-jobs 2] [--long-poll 5] [--tls] [--reuse DIR]

Starts a fresh local control plane (or reuses ``--reuse``) and the whole system as the demo and the e2e
suite run it (``arc_scaleset_lab.harness.system``): the simulated GitHub, ``arc-scaleset controller`` (its
own process, leader election on) and the node agent, which runs the listener pod as a real
``arc-scaleset listener`` process. Then, in a scratch namespace:

* **controller, idle**: its RSS once ``/readyz`` answers, before any scale set exists;
* **each level of ``--runners``** (ascending): an AutoscalingRunnerSet whose ``minRunners`` holds that many
  idle runners; once every one is Running (registered, its pod running), the controller's and the
  listener's RSS, sampled for a few seconds: *steady* is the last sample's ``VmRSS``, *peak* the
  process's ``VmHWM`` (its highest RSS since it started);
* **listener under load** (at the first level): ``--jobs`` jobs arrive at once; they run on the idle
  runners and the listener asks for as many more; measured when every job has completed.

Also ``python -X importtime`` of each entry point's modules (what ``arc-scaleset controller`` and
``arc-scaleset listener`` import before their first request): module count, cumulative import time and
the RSS of a process that imported them and did nothing else.

With ``--shared SIZES`` it measures the shared listener instead (issue 30; docs/listener.md, "Shared listener
(process)"), without the controller: the simulated GitHub (in this process) with as many scale sets as the
largest size, their EphemeralRunnerSets, then

* **per-set listener**: ``arc-scaleset listener`` for one scale set, as its pod runs it (``LISTENER_CONFIG_PATH``);
* **each size**: ``arc-scaleset listener`` in group mode (``LISTENER_GROUP_SECRET``) whose Secret holds that many
  members; measured once every member holds its session and has polled, then once each member has scaled its
  set for ``--shared-jobs`` jobs (every job's runner is never started, so the jobs stay assigned).

With ``--tls`` the simulated GitHub serves HTTPS with a CA of its own, given to every listener as
``server_root_ca`` (as GitHub Enterprise Server behind a private CA): each connection then holds TLS buffers.

It prints each process's steady RSS, the group's per member (RSS / members) and per added member (the slope
from the smallest size), and the ratios of the per-set listener's RSS to them. ARC's listener is about 26.5 MB
per set (issue 30, measured on 2026-06-30, not in this run).

The figures are the kernel's (``/proc/<pid>/status``), in MB of 2^20 bytes. Nothing here is a ratio:
memory does not depend on the machine's speed, but it does on the Python build and the installed packages.
The scale set's credentials are a PAT, or with ``--credentials app`` a GitHub App registered in the simulated
GitHub (as ``bench_vs_arc.py`` and the e2e suite use): its JWTs are signed while they run, through the
system OpenSSL (about 0.3 MB more than a PAT).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.listener_config import ListenerConfig
from arc_scaleset.api.listener_group import GROUP_NAMESPACE_ENV, GROUP_SECRET_ENV
from arc_scaleset.github import ActionsClient, PersonalAccessToken, SystemInfo, TransportOptions, parse_config_url
from arc_scaleset.kube.client import KubeClient, PatchType
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.resources import NAMESPACES, SECRETS
from arc_scaleset.observability.logging import configure_logging
from arc_scaleset_lab.harness.cluster import install_crds, start_test_cluster
from arc_scaleset_lab.harness.scale_sets import autoscaling_runner_set, runner_template
from arc_scaleset_lab.harness.system import ORG, System, SystemOptions
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim.server import SimulatedGitHub
from arc_scaleset_lab.sim.state import SimConfig

MB = 1024 * 1024
SAMPLE_SECONDS = 5.0
SAMPLE_INTERVAL = 0.5
SCALE_SET = "bench-memory"

# What each entry point imports before it serves: the command module and what its run() imports lazily.
ENTRY_POINT_MODULES = {
    "controller": (
        "arc_scaleset.cli",
        "arc_scaleset.cmd.controller",
        "arc_scaleset.kube.client",
        "arc_scaleset.kube.manager",
        "arc_scaleset.kube.leader_election",
        "arc_scaleset.cmd.controller_setup",
        "arc_scaleset.controllers.context",
    ),
    "listener": ("arc_scaleset.cli", "arc_scaleset.listener.command", "arc_scaleset.listener.app"),
}


@dataclass(frozen=True)
class Memory:
    rss: int
    """VmRSS, bytes: resident now."""
    hwm: int
    """VmHWM, bytes: the highest resident size since the process started."""

    def text(self) -> str:
        return f"steady {self.rss / MB:.1f} MB, peak {self.hwm / MB:.1f} MB"


def memory_of(pid: int) -> Memory:
    """``VmRSS`` and ``VmHWM`` of a running process (the kernel reports kB)."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
    return Memory(rss=fields["VmRSS"], hwm=fields["VmHWM"])


async def steady_memory(pid: int) -> Memory:
    """Sample for :data:`SAMPLE_SECONDS` (what is still settling settles) and return the last sample."""
    deadline = time.monotonic() + SAMPLE_SECONDS
    sample = memory_of(pid)
    while time.monotonic() < deadline:
        await asyncio.sleep(SAMPLE_INTERVAL)
        sample = memory_of(pid)
    return sample


def import_figures(modules: tuple[str, ...]) -> str:
    """Import ``modules`` in a fresh interpreter under ``-X importtime``: modules, seconds, RSS after."""
    code = (
        "import importlib, sys\n"
        # As `arc-scaleset controller|listener` starts (arc_scaleset/cli.py): no rich, which the image lacks.
        "from arc_scaleset import cli\n"
        "getattr(cli, '_without_terminal_rendering', lambda: None)()\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "status = open('/proc/self/status').read()\n"
        "print(len(sys.modules), [l.split()[1] for l in status.splitlines() if l.startswith('VmRSS')][0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    count, rss_kb = done.stdout.split()
    # Top-level lines (no indentation after the second "|") carry the cumulative time of everything below them.
    total_us = 0
    heaviest: list[tuple[int, str]] = []
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if match and len(match.group(2)) == 1:
            total_us += int(match.group(1))
            heaviest.append((int(match.group(1)), match.group(3)))
    top = ", ".join(f"{name} {us / 1000:.0f} ms" for us, name in sorted(heaviest, reverse=True)[:4])
    return f"{count} modules, {total_us / 1e6:.2f} s cumulative, RSS after import {int(rss_kb) / 1024:.1f} MB ({top})"


async def running_runners(kube: KubeClient, namespace: str) -> int:
    listed = await kube.list(EPHEMERAL_RUNNERS, namespace=namespace)
    return sum(
        1
        for er in listed.items
        if (er.get("status") or {}).get("phase") == "Running" and not er["metadata"].get("deletionTimestamp")
    )


async def main(args: argparse.Namespace) -> None:
    levels = sorted({int(n) for n in args.runners.split(",")})
    for name, modules in ENTRY_POINT_MODULES.items():
        print(f"import, {name}: {import_figures(modules)}")
    with (
        start_test_cluster(reuse=Path(args.reuse) if args.reuse else None) as cluster,
        tempfile.TemporaryDirectory(prefix="bench-memory-") as workdir,
    ):
        namespace = f"bench-memory-{uuid.uuid4().hex[:6]}"
        options = SystemOptions(
            watch_namespace=namespace,
            long_poll_seconds=2.0,
            log_level="warn",
            controller_args=(
                f"--k8s-client-rate-limiter-qps={args.qps}",
                f"--k8s-client-rate-limiter-burst={args.qps * 2}",
            ),
            ready_timeout=120.0,
        )
        system = System(Path(workdir), kubeconfig=cluster.kubeconfig, options=options)
        await system.start()
        try:
            await measure(system, namespace, levels, args)
        finally:
            await clean_up(system, namespace, timeout=args.timeout)
            await system.stop()


async def clean_up(system: System, namespace: str, *, timeout: float) -> None:
    """Delete the scale set while the controller runs (its runners' finalizers need it), then the namespace."""
    with contextlib.suppress(NotFound):
        await system.kube.delete(AUTOSCALING_RUNNER_SETS, SCALE_SET, namespace=namespace)

    async def no_runners() -> bool:
        return not (await system.kube.list(EPHEMERAL_RUNNERS, namespace=namespace)).items

    with contextlib.suppress(TimeoutError):
        await eventually(no_runners, "the runners to be deleted", timeout=timeout, interval=1.0)
    with contextlib.suppress(NotFound):
        await system.kube.delete(NAMESPACES, namespace)


async def measure(system: System, namespace: str, levels: list[int], args: argparse.Namespace) -> None:
    controller = system.controller_pid
    assert controller is not None
    print(f"controller, idle (no scale set): {(await steady_memory(controller)).text()}")
    await system.ensure_namespace(namespace)
    if args.credentials == "app":
        secret = await system.create_app_secret(namespace)
    else:
        secret = await system.create_pat_secret(namespace)
    print(f"credentials: {'GitHub App' if args.credentials == 'app' else 'PAT'}")
    name = SCALE_SET
    ars = autoscaling_runner_set(
        name=name,
        namespace=namespace,
        config_url=system.config_url(),
        secret=secret,
        min_runners=levels[0],
        max_runners=levels[-1] + args.jobs,
        template=runner_template(),
    )
    await system.kube.create(AUTOSCALING_RUNNER_SETS, ars, namespace=namespace)
    for index, level in enumerate(levels):
        if index:
            patch = {"spec": {"minRunners": level}}
            await system.kube.patch(AUTOSCALING_RUNNER_SETS, name, patch, namespace=namespace,
                                    patch_type=PatchType.MERGE)  # fmt: skip
        started = time.monotonic()

        async def all_running(level: int = level) -> bool:
            return await running_runners(system.kube, namespace) >= level

        await eventually(all_running, f"{level} Running runners", timeout=args.timeout, interval=1.0)
        seconds = time.monotonic() - started
        listeners = system.listener_pids()
        print(f"{level} idle runners (Running after {seconds:.0f} s):")
        print(f"  controller: {(await steady_memory(controller)).text()}")
        for pod in sorted(listeners):
            print(f"  listener {pod}: {(await steady_listener_memory(system, pod, timeout=args.timeout)).text()}")
        if index == 0 and args.jobs:
            await load(system, name, listeners, args.jobs, timeout=args.timeout)


async def steady_listener_memory(system: System, pod: str, *, timeout: float) -> Memory:
    """:func:`steady_memory` of the listener of ``pod``. A changed ``minRunners`` changes the listener's config,
    so the controller replaces the listener (same pod name, new process) while the runners scale: a process
    that exits while sampled is sampled again in its successor."""

    async def sampled() -> Memory | None:
        pid = system.listener_pids().get(pod)
        if pid is None:
            return None
        try:
            return await steady_memory(pid)
        except FileNotFoundError:  # /proc/<pid> went with the replaced process
            return None

    found: Memory = await eventually(sampled, f"listener {pod} to run", timeout=timeout, interval=1.0)
    return found


async def load(system: System, scale_set: str, listeners: dict[str, int], jobs: int, *, timeout: float) -> None:
    """``jobs`` jobs at once; the figures once every one has completed."""
    ids = set(await system.sim.enqueue_job(scale_set, repository=f"{ORG}/bench", duration=1.0, count=jobs))

    async def all_completed() -> bool:
        return sum(
            1 for job in await system.sim.jobs() if job["runnerRequestId"] in ids and job["state"] == "completed"
        ) == len(ids)

    started = time.monotonic()
    try:
        await eventually(all_completed, f"{jobs} jobs to complete", timeout=timeout, interval=1.0)
    except TimeoutError:
        states = collections.Counter(job["state"] for job in await system.sim.jobs() if job["runnerRequestId"] in ids)
        raise TimeoutError(f"jobs did not complete in {timeout:g} s: {dict(states)}") from None
    print(f"  after {jobs} jobs at once (all completed after {time.monotonic() - started:.0f} s):")
    for pod, pid in sorted(listeners.items()):
        with contextlib.suppress(OSError):
            print(f"    listener {pod}: {memory_of(pid).text()}")
    if system.controller_pid is not None:
        print(f"    controller: {memory_of(system.controller_pid).text()}")


# --- the shared listener (--shared) ---------------------------------------------------------------------------

SHARED_PAT = "ghp_bench_memory_shared_0123456789abcdef"
SHARED_SECRET = "arc-shared-listener-bench"
ARC_LISTENER_MB = 26.5
"""ARC's listener, per scale set (issue 30, measured 2026-06-30): for scale, not measured in this run."""


class SharedBench:
    """The scale sets' EphemeralRunnerSets (made once) and, per measured process, a fresh simulated GitHub with
    as many scale sets, so that no process inherits another's sessions or jobs."""

    def __init__(
        self, kube: KubeClient, namespace: str, kubeconfig: Path, workdir: Path, *, long_poll: float, tls: bool
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.long_poll = long_poll
        self.tls = tls
        self._sim: SimulatedGitHub | None = None
        self.scale_set_ids: list[int] = []

    @property
    def sim(self) -> SimulatedGitHub:
        assert self._sim is not None, "inside fresh_sim() only"
        return self._sim

    @staticmethod
    def name(index: int) -> str:
        return f"bench-set-{index:03d}"

    async def create_runner_set(self, index: int) -> None:
        runner = {
            "githubConfigUrl": "https://github.com/bench",
            "githubConfigSecret": "unused",
            "runnerScaleSetId": 1,
            "spec": {"containers": [{"name": "runner", "image": "runner"}]},
        }
        ers = {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "EphemeralRunnerSet",
            "metadata": {"name": self.name(index), "namespace": self.namespace},
            "spec": {"patchID": 0, "ephemeralRunnerSpec": runner},
        }
        await self.kube.create(EPHEMERAL_RUNNER_SETS, ers, namespace=self.namespace)

    @contextlib.asynccontextmanager
    async def fresh_sim(self, sets: int) -> AsyncIterator[None]:
        config = SimConfig(long_poll_seconds=self.long_poll)
        async with await SimulatedGitHub.start(config=config, tls=self.tls) as sim:
            sim.credentials.add_token(SHARED_PAT)
            token = PersonalAccessToken(SHARED_PAT)
            transport = TransportOptions(root_ca_pem=sim.ca_pem)
            github = parse_config_url(sim.config_url(ORG))
            async with ActionsClient(github, token, system_info=SystemInfo(), transport=transport) as client:
                ids = [(await client.create_runner_scale_set(name=self.name(i), runner_group_id=1)).id
                       for i in range(sets)]  # fmt: skip
            self._sim, self.scale_set_ids = sim, ids
            try:
                yield
            finally:
                self._sim = None
                for index in range(sets):
                    patch = {"spec": {"replicas": 0}}
                    await self.kube.patch(EPHEMERAL_RUNNER_SETS, self.name(index), patch, namespace=self.namespace)

    def config(self, index: int) -> ListenerConfig:
        return ListenerConfig.from_document(
            {
                "configure_url": self.sim.config_url(ORG),
                "github_token": SHARED_PAT,
                "ephemeral_runner_set_namespace": self.namespace,
                "ephemeral_runner_set_name": self.name(index),
                "max_runners": 100,
                "min_runners": 0,
                "runner_scale_set_id": self.scale_set_ids[index],
                "runner_scale_set_name": self.name(index),
                "server_root_ca": self.sim.ca_pem or "",
                "log_level": "warn",
                "log_format": "json",
                "metrics_addr": "127.0.0.1:0",
                "metrics_endpoint": "/metrics",
            }
        )

    async def measure(self, environment: dict[str, str], members: int, jobs: int) -> tuple[Memory, Memory]:
        """Run ``arc-scaleset listener`` with ``environment``: its RSS once its ``members`` sets poll, then once
        each has scaled its set for ``jobs`` jobs; it is stopped (SIGTERM) after."""
        env = {k: v for k, v in os.environ.items() if k not in ("LISTENER_CONFIG_PATH", GROUP_SECRET_ENV)}
        env.update(environment, KUBECONFIG=str(self.kubeconfig), HOSTNAME="bench-listener")
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "arc_scaleset.cli", "listener", env=env, stdout=subprocess.DEVNULL
        )
        try:
            await self.polling(members)
            idle = await steady_memory(process.pid)
            await self.scaled(members, jobs)
            busy = await steady_memory(process.pid)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), timeout=60)
            except TimeoutError:
                process.kill()
                await process.wait()
        return idle, busy

    async def polling(self, members: int) -> None:
        """Every one of the first ``members`` sets holds a session that has been polled."""

        def all_polling() -> bool:
            sessions = self.sim.state.sessions
            return all(
                (found := sessions.get(scale_set_id)) is not None and found.last_seen > found.created_at
                for scale_set_id in self.scale_set_ids[:members]
            )

        await eventually(all_polling, f"{members} sessions polling", timeout=300, interval=0.5)

    async def scaled(self, members: int, jobs: int) -> None:
        for index in range(members):
            for _ in range(jobs):
                self.sim.state.enqueue_job(self.name(index), repository=f"{ORG}/bench", duration=60.0)

        async def all_scaled() -> bool:
            listed = await self.kube.list(EPHEMERAL_RUNNER_SETS, namespace=self.namespace)
            replicas = {ers["metadata"]["name"]: ers["spec"].get("replicas", 0) for ers in listed.items}
            return all(replicas.get(self.name(index)) == jobs for index in range(members))

        await eventually(all_scaled, f"{members} sets scaled to {jobs}", timeout=300, interval=0.5)


async def main_shared(args: argparse.Namespace) -> None:
    sizes = sorted({int(n) for n in args.shared.split(",")})
    configure_logging(level="warn", stream=sys.stderr)  # the bench's own GitHub calls: not worth a line each
    with (
        start_test_cluster(reuse=Path(args.reuse) if args.reuse else None) as cluster,
        tempfile.TemporaryDirectory(prefix="bench-memory-") as workdir,
    ):
        async with KubeClient.from_kubeconfig(cluster.kubeconfig) as kube:
            await install_crds(kube)
            namespace = f"bench-memory-{uuid.uuid4().hex[:6]}"
            await kube.create(NAMESPACES, {"metadata": {"name": namespace}})
            try:
                bench = SharedBench(
                    kube, namespace, cluster.kubeconfig, Path(workdir), long_poll=args.long_poll, tls=args.tls
                )
                for index in range(sizes[-1]):
                    await bench.create_runner_set(index)
                await measure_shared(bench, sizes, jobs=args.shared_jobs)
            finally:
                with contextlib.suppress(NotFound):
                    await kube.delete(NAMESPACES, namespace)


async def measure_shared(bench: SharedBench, sizes: list[int], *, jobs: int) -> None:
    config_path = bench.workdir / "config.json"
    async with bench.fresh_sim(1):
        config_path.write_bytes(bench.config(0).to_json())
        single_idle, single_busy = await bench.measure({"LISTENER_CONFIG_PATH": str(config_path)}, 1, jobs)
    print(f"per-set listener: idle {single_idle.text()}; after {jobs} jobs {single_busy.text()}")
    print(f"  ARC's listener per set (issue 30, not this run): {ARC_LISTENER_MB:.1f} MB")
    rows: list[tuple[int, Memory, Memory]] = []
    for size in sizes:
        async with bench.fresh_sim(size):
            data = {bench.name(i): base64.b64encode(bench.config(i).to_json()).decode() for i in range(size)}
            with contextlib.suppress(NotFound):
                await bench.kube.delete(SECRETS, SHARED_SECRET, namespace=bench.namespace)
            secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SHARED_SECRET}, "data": data}
            await bench.kube.create(SECRETS, secret, namespace=bench.namespace)
            group_env = {GROUP_SECRET_ENV: SHARED_SECRET, GROUP_NAMESPACE_ENV: bench.namespace}
            idle, busy = await bench.measure(group_env, size, jobs)
        rows.append((size, idle, busy))
        print(f"shared listener, {size} members: idle {idle.text()}; after {jobs} jobs each {busy.text()}")
    print_shared(single_idle, single_busy, rows)


def print_shared(single_idle: Memory, single_busy: Memory, rows: list[tuple[int, Memory, Memory]]) -> None:
    print("members | idle RSS | per member | per added member | busy RSS | per member | per-set listener / per member")
    first_size, first_idle, _ = rows[0]
    for size, idle, busy in rows:
        added = f"{(idle.rss - first_idle.rss) / (size - first_size) / MB:5.2f} MB" if size > first_size else "    -   "
        per_idle, per_busy = idle.rss / size / MB, busy.rss / size / MB
        print(
            f"{size:7d} | {idle.rss / MB:6.1f} MB | {per_idle:6.2f} MB | {added:>11} | {busy.rss / MB:6.1f} MB"
            f" | {per_busy:6.2f} MB | {single_idle.rss / MB / per_idle:5.1f}x idle, "
            f"{single_busy.rss / MB / per_busy:5.1f}x busy (ARC: {ARC_LISTENER_MB / per_busy:5.1f}x)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--runners", default="200,1000", help="idle runner counts to measure at, ascending (default 200,1000)"
    )
    parser.add_argument(
        "--jobs", type=int, default=200, help="jobs arriving at once for the listener's load figure (0: none)"
    )
    parser.add_argument("--qps", type=int, default=100, help="the controller's Kubernetes client QPS (burst: twice)")
    parser.add_argument(
        "--credentials", choices=("pat", "app"), default="pat", help="the scale set's GitHub credentials (default pat)"
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for each level or the jobs")
    parser.add_argument("--reuse", help="work directory of a running cluster (arc-scaleset cluster up --dir)")
    parser.add_argument("--shared", default="", help="measure the shared listener at these member counts (1,10,100)")
    parser.add_argument("--shared-jobs", type=int, default=2, help="with --shared: jobs per member (default 2)")
    parser.add_argument("--long-poll", type=float, default=5.0, help="with --shared: the sim's long poll, seconds")
    parser.add_argument("--tls", action="store_true", help="with --shared: HTTPS, the sim CA in the configs")
    arguments = parser.parse_args()
    asyncio.run(main_shared(arguments) if arguments.shared else main(arguments))
