"""Resident memory of the controller manager and of one listener, as separate processes, at a runner count.

    .venv/bin/python bench/bench_memory.py [--runners 200,1000] [--jobs 200] [--qps 100] [--credentials pat|app]
        [--reuse DIR]

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

The figures are the kernel's (``/proc/<pid>/status``), in MB of 2^20 bytes. Nothing here is a ratio:
memory does not depend on the machine's speed, but it does on the Python build and the installed packages.
The scale set's credentials are a PAT, or with ``--credentials app`` a GitHub App registered in the simulated
GitHub (as ``bench_vs_arc.py`` and the e2e suite use): its JWTs are signed while they run, through the
system OpenSSL (about 0.3 MB more than a PAT).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import re
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.kube.client import KubeClient, PatchType
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.resources import NAMESPACES
from arc_scaleset_lab.harness.cluster import start_test_cluster
from arc_scaleset_lab.harness.scale_sets import autoscaling_runner_set, runner_template
from arc_scaleset_lab.harness.system import ORG, System, SystemOptions
from arc_scaleset_lab.harness.waiting import eventually

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
    asyncio.run(main(parser.parse_args()))
