"""Scale-up of N runners (default 200) by the EphemeralRunnerSet + EphemeralRunner controllers, against the
API server's own create throughput measured in the same run; then the scale-down of those N runners to 0.

    .venv/bin/python bench/bench_scale_up.py [--runners 200] [--concurrency 20] [--rounds 5] [--warmup 1]
                                             [--credentials pat|app] [--no-limit] [--reuse DIR]
                                             [--profile FILE] [--profile-down FILE] [--trace]

Starts a fresh local control plane (or reuses ``--reuse``), installs the CRDs, starts the simulated GitHub,
and in one scratch namespace per phase:

* **controllers**: the two reconcilers run in-process through the manager, with the same concurrency as the
  limit (``--concurrency`` both for the set's bounded runner creation and for the EphemeralRunner workers);
  an EphemeralRunnerSet goes from 0 to N replicas. Timed from the patch until N EphemeralRunners, then N
  runner pods, exist (every runner registered with the sim, its JIT Secret written, its pod created). The
  objects are counted in the controller's own informer caches, as the API server's watch events arrive.
  API writes per runner are counted on the controller's client (including the status write that mirrors
  "Running", 2 s after). Then **scale-down**: the set goes from N to 0 replicas (patch ID 0, as a listener
  with no jobs asks); timed from the patch until no EphemeralRunner, then no runner pod, is left in the
  caches, with the CPU seconds of the same window and the API writes per runner. Every runner is idle, so
  each one is removed from GitHub and deleted.
* **limit**: a plain client creates the same objects per runner -- an EphemeralRunner, a Secret and a Pod,
  one after the other -- with the same concurrency and nothing else: what the API server can take with
  that concurrency. Timed on the same basis, until a watch has seen every pod (the time until the last
  create returned is printed too).

Both runs also report the API server's own count of mutating requests (``apiserver_request_total``) per
runner (those include the scheduler's bindings and kwok's pod status writes), and the CPU seconds each
process of the control plane and this one (``bench``: controllers and simulated GitHub) used in the timed
window. On two cores every process competes for the same CPU: the figures show where it went.

``--credentials app`` gives the controllers a GitHub App (ID, installation ID, private key) instead of a PAT:
what most installations use, and what costs an RSA key load wherever credentials are built anew.
``--no-limit`` skips the limit runs (when only the controllers' figures are wanted).

Runs alternate in order, after ``--warmup`` rounds that are not counted (a fresh API server's first
requests of a kind are slower: caches, CEL programs, watch caches). Figures are medians over ``--rounds``
(best-of shown too); single rounds on a 2-core machine vary by +-30%. The ratio is median limit time /
median controllers time (target: at least 0.70). ``--profile FILE`` writes a cProfile of the first
counted controllers run (a measurement aid only); ``--profile-down FILE`` the same of its scale-down. The
controllers and the simulated GitHub share this process, so ``bench`` CPU seconds include the simulator's.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import cProfile
import os
import re
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunner.reconciler import EphemeralRunnerReconciler
from arc_scaleset.controllers.ephemeralrunnerset.reconciler import EphemeralRunnerSetReconciler
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.gc_tuning import freeze_startup_objects
from arc_scaleset.github import ActionsClient, PersonalAccessToken, SystemInfo, parse_config_url
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.informer import Informer
from arc_scaleset.kube.manager import Manager
from arc_scaleset.kube.resources import NAMESPACES, PODS, SECRETS
from arc_scaleset_lab.harness.cluster import install_crds, start_test_cluster
from arc_scaleset_lab.sim import SimConfig, SimulatedGitHub

REPO = Path(__file__).resolve().parents[1]
PAT = "ghp_bench_scale_up_0123456789"
APP_ID, INSTALLATION_ID = 4242, 4343
TEMPLATE = {"spec": {"containers": [{"name": "runner", "image": "ghcr.io/actions/actions-runner:latest"}]}}
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
APISERVER_WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"})
_METRIC_LINE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')
POLL = 0.02
NAMESPACE_GONE_TIMEOUT = 120.0


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """CPU time (user + system) so far of each process in ``pids`` and of this one (``bench``), by name."""
    ticks = os.sysconf("SC_CLK_TCK")
    seconds = {}
    for name, pid in {**pids, "bench": os.getpid()}.items():
        with contextlib.suppress(OSError):
            # Fields after the parenthesised command: utime and stime are the 12th and 13th.
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            seconds[name] = (int(fields[11]) + int(fields[12])) / ticks
    return seconds


def cpu_used(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {name: after[name] - before.get(name, 0.0) for name in after}


@dataclass
class ControllersRun:
    ers_seconds: float
    pods_seconds: float
    cpu: dict[str, float]
    """CPU seconds each process used from the patch until every pod was seen."""
    writes_per_runner: float
    writes_by_kind: dict[str, float]
    reads_per_runner: float
    server_writes: dict[str, float]
    down: DownRun

    @property
    def server_writes_per_runner(self) -> float:
        return sum(self.server_writes.values())


@dataclass
class DownRun:
    """The scale-down from N runners to 0."""

    ers_seconds: float
    """Until no EphemeralRunner was left in the controller's cache."""
    pods_seconds: float
    """Until no runner pod was left."""
    cpu: dict[str, float]
    writes_per_runner: float
    writes_by_kind: dict[str, float]


@dataclass
class LimitRun:
    seconds: float
    cpu: dict[str, float]
    """Until the last create returned."""
    watched_seconds: float
    """Until a watch had seen every pod: the basis of the controllers' figure, which counts pods as they
    reach the controller's cache."""
    server_writes: dict[str, float]

    @property
    def server_writes_per_runner(self) -> float:
        return sum(self.server_writes.values())


async def new_namespace(kube: KubeClient, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"metadata": {"name": name}})
    return name


async def server_writes(kube: KubeClient) -> collections.Counter[str]:
    """The API server's count of mutating requests so far (every client), by ``VERB resource[/subresource]``."""
    text = await kube.request_raw("GET", "/metrics")
    counts: collections.Counter[str] = collections.Counter()
    for line in str(text).splitlines():
        match = _METRIC_LINE.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        if labels.get("verb") in APISERVER_WRITE_VERBS:
            resource = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
            counts[f"{labels['verb']} {resource}"] += int(float(match["value"]))
    return counts


def _per_runner(after: collections.Counter[str], before: collections.Counter[str], runners: int,
                *, minus: str | None = None) -> dict[str, float]:  # fmt: skip
    """The change from ``before`` to ``after`` per runner, by kind (``minus``: one request of ours to leave out)."""
    diff = collections.Counter(after)
    diff.subtract(before)
    if minus is not None:
        diff[minus] -= 1
    return {kind: n / runners for kind, n in sorted(diff.items()) if n > 0}


async def until_running(manager: Manager) -> None:
    def running() -> bool:
        return manager.ready and all(c.running for c in manager.controllers)

    while not running():  # noqa: ASYNC110 - the manager offers no event for "controllers started"
        await asyncio.sleep(0.05)


async def wait_counts(manager: Manager, namespace: str, runners: int, start: float, *,
                      trace: bool) -> tuple[float, float]:  # fmt: skip
    """Seconds until ``runners`` ERs, then as many pods, are in the controller's caches."""
    runner_cache, pod_cache = manager.cache(EPHEMERAL_RUNNERS), manager.cache(PODS)
    ers_done: float | None = None
    next_trace = 0.0
    while True:
        now = time.perf_counter() - start
        ers, pods = len(runner_cache), len(pod_cache)  # the manager caches this namespace only
        if trace and now >= next_trace:
            queues = " ".join(f"{c.name}={len(c.queue)}" for c in manager.controllers)
            print(f"    t={now:5.2f}s ERs={ers:4d} pods={pods:4d} queues: {queues}", file=sys.stderr)
            next_trace = now + 0.25
        if ers_done is None and ers >= runners:
            ers_done = now
        if ers_done is not None and pods >= runners:
            return ers_done, now
        await asyncio.sleep(POLL)


async def wait_empty(manager: Manager, start: float, *, trace: bool) -> tuple[float, float]:
    """Seconds until no ER, then no pod, is left in the controller's caches."""
    runner_cache, pod_cache = manager.cache(EPHEMERAL_RUNNERS), manager.cache(PODS)
    ers_done: float | None = None
    next_trace = 0.0
    while True:
        now = time.perf_counter() - start
        ers, pods = len(runner_cache), len(pod_cache)
        if trace and now >= next_trace:
            queues = " ".join(f"{c.name}={len(c.queue)}" for c in manager.controllers)
            print(f"    t={now:5.2f}s ERs={ers:4d} pods={pods:4d} queues: {queues}", file=sys.stderr)
            next_trace = now + 0.25
        if ers_done is None and ers == 0:
            ers_done = now
        if ers_done is not None and pods == 0:
            return ers_done, now
        await asyncio.sleep(POLL)


def github_secret_data(credentials: str, sim: SimulatedGitHub) -> dict[str, str]:
    """The GitHub config Secret's ``data`` for ``--credentials``: the PAT, or a GitHub App the sim knows."""
    if credentials == "pat":
        fields = {"github_token": PAT}
    else:
        app = sim.credentials.add_app(app_id=APP_ID, installation_ids=[INSTALLATION_ID])
        assert app.private_key_pem is not None
        fields = {"github_app_id": str(APP_ID), "github_app_installation_id": str(INSTALLATION_ID),
                  "github_app_private_key": app.private_key_pem}  # fmt: skip
    return {key: base64.b64encode(value.encode()).decode() for key, value in fields.items()}


def _writes(kube: KubeClient) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for (verb, path), n in kube.request_counts.items():
        if verb in WRITE_VERBS:
            counts[f"{verb} {_kind_of(path)}"] += n
    return counts


def _kind_of(path: str) -> str:
    for kind in ("ephemeralrunners/status", "ephemeralrunnersets/status", "ephemeralrunners", "ephemeralrunnersets",
                 "secrets", "pods", "events", "leases"):  # fmt: skip
        if kind in path:
            return kind
    return path


async def controllers_run(kube_config: Path, kube: KubeClient, sim: SimulatedGitHub, scale_set_id: int, *,
                          runners: int, concurrency: int, pids: dict[str, int], credentials: str,
                          profile: cProfile.Profile | None, profile_down: cProfile.Profile | None,
                          trace: bool) -> ControllersRun:  # fmt: skip
    namespace = await new_namespace(kube, "bench-ctl")
    await kube.create(SECRETS, {"metadata": {"name": "gh", "namespace": namespace},
                                "data": github_secret_data(credentials, sim)})  # fmt: skip
    controller_kube = KubeClient.from_kubeconfig(kube_config)
    manager = Manager(controller_kube, namespaces={namespace}, metrics_address=None)
    settings = ControllerSettings(controller_namespace=namespace, controller_image="bench",
                                  runner_create_concurrency=concurrency,
                                  runner_max_concurrent_reconciles=concurrency)  # fmt: skip
    ctx = ControllerContext.create(controller_kube, manager, settings, environ={})
    manager.add(EphemeralRunnerSetReconciler(ctx).controller())
    manager.add(EphemeralRunnerReconciler(ctx).controller())
    task = asyncio.create_task(manager.run())
    try:
        await kube.create(EPHEMERAL_RUNNER_SETS, {
            "apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunnerSet",
            "metadata": {"name": "bench", "namespace": namespace},
            "spec": {"replicas": 0, "patchID": 0, "ephemeralRunnerSpec": {
                "githubConfigUrl": sim.config_url("org"), "githubConfigSecret": "gh",
                "runnerScaleSetId": scale_set_id, **TEMPLATE}},
        })  # fmt: skip
        await until_running(manager)
        await asyncio.sleep(0.5)  # let the finalizer pass settle before the clock starts
        writes_before = _writes(controller_kube)
        reads_before = sum(n for (verb, _), n in controller_kube.request_counts.items() if verb == "get")
        server_before = await server_writes(kube)
        if profile is not None:
            profile.enable()
        cpu_before = cpu_seconds(pids)
        start = time.perf_counter()
        await kube.patch(EPHEMERAL_RUNNER_SETS, "bench", {"spec": {"replicas": runners}}, namespace=namespace)
        ers_seconds, pods_seconds = await wait_counts(manager, namespace, runners, start, trace=trace)
        cpu = cpu_used(cpu_seconds(pids), cpu_before)
        if profile is not None:
            profile.disable()
        # Let the pass that mirrors "Running" finish too, for an honest writes-per-runner figure.
        await asyncio.sleep(2.0)
        server_after = await server_writes(kube)
        writes = _writes(controller_kube)
        writes.subtract(writes_before)
        reads = sum(n for (verb, _), n in controller_kube.request_counts.items() if verb == "get") - reads_before
        down = await scale_down(manager, kube, controller_kube, namespace, runners=runners, pids=pids,
                                profile=profile_down, trace=trace)  # fmt: skip
    finally:
        manager.request_stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 30)
        await ctx.github.pool.aclose()
        await controller_kube.close()
        await cleanup(kube, namespace)
    return ControllersRun(
        ers_seconds=ers_seconds,
        pods_seconds=pods_seconds,
        cpu=cpu,
        writes_per_runner=sum(writes.values()) / runners,
        writes_by_kind={kind: n / runners for kind, n in sorted(writes.items()) if n},
        reads_per_runner=reads / runners,
        server_writes=_per_runner(server_after, server_before, runners, minus="PATCH ephemeralrunnersets"),
        down=down,
    )


async def scale_down(manager: Manager, kube: KubeClient, controller_kube: KubeClient, namespace: str, *,
                     runners: int, pids: dict[str, int], profile: cProfile.Profile | None,
                     trace: bool) -> DownRun:  # fmt: skip
    """The set from ``runners`` idle runners to 0 (patch ID 0: the listener's "no jobs")."""
    writes_before = _writes(controller_kube)
    if profile is not None:
        profile.enable()
    cpu_before = cpu_seconds(pids)
    start = time.perf_counter()
    await kube.patch(EPHEMERAL_RUNNER_SETS, "bench", {"spec": {"replicas": 0, "patchID": 0}}, namespace=namespace)
    ers_seconds, pods_seconds = await wait_empty(manager, start, trace=trace)
    cpu = cpu_used(cpu_seconds(pids), cpu_before)
    if profile is not None:
        profile.disable()
    writes = _writes(controller_kube)
    writes.subtract(writes_before)
    return DownRun(
        ers_seconds=ers_seconds,
        pods_seconds=pods_seconds,
        cpu=cpu,
        writes_per_runner=sum(writes.values()) / runners,
        writes_by_kind={kind: n / runners for kind, n in sorted(writes.items()) if n > 0},
    )


async def limit_run(kube: KubeClient, *, runners: int, concurrency: int, pids: dict[str, int]) -> LimitRun:
    """Seconds for a plain client to create an ER, a Secret and a Pod per runner, ``concurrency`` at once."""
    namespace = await new_namespace(kube, "bench-limit")
    limit = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        name = f"r-{i:04d}"
        async with limit:
            await kube.create(EPHEMERAL_RUNNERS, {
                "apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunner",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"githubConfigUrl": "https://github.com/org", "githubConfigSecret": "gh",
                         "runnerScaleSetId": 1, **TEMPLATE}})  # fmt: skip
            await kube.create(SECRETS, {"metadata": {"name": name, "namespace": namespace},
                                        "data": {"jitToken": "eA=="}})  # fmt: skip
            await kube.create(PODS, {"metadata": {"name": name, "namespace": namespace}, **TEMPLATE})

    pods = Informer(kube, PODS, namespace=namespace)
    watching = pods.start()
    await pods.wait_synced()
    server_before = await server_writes(kube)
    cpu_before = cpu_seconds(pids)
    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(runners)))
    elapsed = time.perf_counter() - start
    while len(pods.store) < runners:  # noqa: ASYNC110 - the same polling as wait_counts
        await asyncio.sleep(POLL)
    watched = time.perf_counter() - start
    cpu = cpu_used(cpu_seconds(pids), cpu_before)
    await pods.stop()
    watching.cancel()
    await asyncio.sleep(2.0)  # the same settle time as the controllers run (kwok's status writes land)
    server_after = await server_writes(kube)
    await cleanup(kube, namespace)
    return LimitRun(seconds=elapsed, watched_seconds=watched, cpu=cpu,
                    server_writes=_per_runner(server_after, server_before, runners))  # fmt: skip


async def cleanup(kube: KubeClient, namespace: str) -> None:
    for item in (await kube.list(EPHEMERAL_RUNNERS, namespace=namespace, limit=None)).items:
        with contextlib.suppress(Exception):
            await kube.patch(EPHEMERAL_RUNNERS, item["metadata"]["name"], {"metadata": {"finalizers": None}},
                             namespace=namespace)  # fmt: skip
    for item in (await kube.list(EPHEMERAL_RUNNER_SETS, namespace=namespace, limit=None)).items:
        with contextlib.suppress(Exception):
            await kube.patch(EPHEMERAL_RUNNER_SETS, item["metadata"]["name"], {"metadata": {"finalizers": None}},
                             namespace=namespace)  # fmt: skip
    with contextlib.suppress(Exception):
        await kube.delete(NAMESPACES, namespace)
    # The namespace controller deletes the contents in the background, hundreds of API writes: wait for it,
    # or it would run during (and slow down) whichever phase comes next.
    deadline = time.monotonic() + NAMESPACE_GONE_TIMEOUT
    while time.monotonic() < deadline:
        try:
            await kube.get(NAMESPACES, namespace)
        except NotFound:
            return
        await asyncio.sleep(0.2)
    print(f"warning: namespace {namespace} still exists after {NAMESPACE_GONE_TIMEOUT:g}s", file=sys.stderr)


async def main(args: argparse.Namespace) -> None:
    with start_test_cluster(reuse=Path(args.reuse) if args.reuse else None) as cluster:
        kube = KubeClient.from_kubeconfig(cluster.kubeconfig)
        await install_crds(kube)
        sim = await SimulatedGitHub.start(config=SimConfig(long_poll_seconds=0.2))
        sim.credentials.add_token(PAT)
        client = ActionsClient(parse_config_url(sim.config_url("org"), environ={}), PersonalAccessToken(PAT),
                               system_info=SystemInfo(subsystem="bench"))  # fmt: skip
        profile = cProfile.Profile() if args.profile else None
        profile_down = cProfile.Profile() if args.profile_down else None
        try:
            ctl: list[ControllersRun] = []
            lim: list[LimitRun] = []
            for round_ in range(-args.warmup, args.rounds):
                scale_set = await client.create_runner_scale_set(name=f"bench-{round_}", runner_group_id=1)
                order: tuple[str, ...] = ("ctl", "limit") if round_ % 2 == 0 else ("limit", "ctl")
                if args.no_limit:
                    order = ("ctl",)
                for which in order:
                    if which == "ctl":
                        ctl.append(await controllers_run(
                            cluster.kubeconfig, kube, sim, scale_set.id, runners=args.runners,
                            concurrency=args.concurrency, pids=cluster.pids, credentials=args.credentials,
                            profile=profile if round_ == 0 else None,
                            profile_down=profile_down if round_ == 0 else None,
                            trace=args.trace,
                        ))  # fmt: skip
                    else:
                        lim.append(await limit_run(kube, runners=args.runners, concurrency=args.concurrency,
                                                   pids=cluster.pids))  # fmt: skip
                label = f"round {round_ + 1}" if round_ >= 0 else "warm-up (not counted)"
                limit_text = f"; limit {lim[-1].watched_seconds:.2f}s" if lim else ""
                print(f"{label}: controllers: all ERs {ctl[-1].ers_seconds:.2f}s, all pods {ctl[-1].pods_seconds:.2f}s;"
                      f" down: no ER {ctl[-1].down.ers_seconds:.2f}s, no pod {ctl[-1].down.pods_seconds:.2f}s,"
                      f" bench CPU {ctl[-1].down.cpu.get('bench', 0.0):.2f}s{limit_text}", file=sys.stderr)  # fmt: skip
                if round_ < 0:
                    ctl.clear()
                    lim.clear()
            if profile is not None:
                profile.dump_stats(args.profile)
            if profile_down is not None:
                profile_down.dump_stats(args.profile_down)
            report(args, ctl, lim)
        finally:
            await client.aclose()
            await sim.stop()
            await kube.close()


def report(args: argparse.Namespace, ctl: list[ControllersRun], lim: list[LimitRun]) -> None:
    median = statistics.median
    ers = median(r.ers_seconds for r in ctl)
    pods = median(r.pods_seconds for r in ctl)
    kinds = sorted({kind for r in ctl for kind in r.writes_by_kind})
    by_kind = ", ".join(f"{kind} {median(r.writes_by_kind.get(kind, 0.0) for r in ctl):.2f}" for kind in kinds)
    print(f"runners: {args.runners}, concurrency: {args.concurrency}, rounds: {args.rounds} (medians),"
          f" credentials: {args.credentials}")  # fmt: skip
    print(
        f"controllers: all EphemeralRunners after {ers:.2f} s, all runner pods after {pods:.2f} s"
        f" ({args.runners / pods:.1f} runners/s; rounds: {', '.join(f'{r.pods_seconds:.2f}' for r in ctl)})"
    )
    report_down(ctl)
    if not lim:
        return
    limit = median(r.watched_seconds for r in lim)
    best_pods, best_limit = min(r.pods_seconds for r in ctl), min(r.watched_seconds for r in lim)
    print(f"API limit:   {limit:.2f} s until a watch saw every pod of ER + Secret + Pod creates"
          f" ({args.runners / limit:.1f} runners/s; rounds: {', '.join(f'{r.watched_seconds:.2f}' for r in lim)});"
          f" the creates themselves returned after {median(r.seconds for r in lim):.2f} s")  # fmt: skip
    print(f"API writes per runner, controller client (until Running): {median(r.writes_per_runner for r in ctl):.2f}"
          f" [{by_kind}]; reads (GET) per runner: {median(r.reads_per_runner for r in ctl):.2f}")  # fmt: skip
    print(f"API server mutating requests per runner (all clients): controllers"
          f" {median(r.server_writes_per_runner for r in ctl):.2f}, limit"
          f" {median(r.server_writes_per_runner for r in lim):.2f}")  # fmt: skip
    for label, runs in (("controllers", ctl), ("limit", lim)):
        kinds = sorted({kind for r in runs for kind in r.server_writes})
        print(f"  {label}: " + ", ".join(
            f"{kind} {median(r.server_writes.get(kind, 0.0) for r in runs):.2f}" for kind in kinds))  # fmt: skip
    for label, cpu_runs in (("controllers", [r.cpu for r in ctl]), ("limit", [r.cpu for r in lim])):
        names = sorted({name for cpu in cpu_runs for name in cpu})
        print(f"  CPU seconds, {label} window: " + ", ".join(
            f"{name} {median(cpu.get(name, 0.0) for cpu in cpu_runs):.2f}" for name in names))  # fmt: skip
    print(f"ratio: {limit / pods:.2f} of the API server's create throughput (median;"
          f" best-of {best_limit / best_pods:.2f}; target >= 0.70)")  # fmt: skip


def report_down(ctl: list[ControllersRun]) -> None:
    median = statistics.median
    down = [r.down for r in ctl]
    kinds = sorted({kind for r in down for kind in r.writes_by_kind})
    by_kind = ", ".join(f"{kind} {median(r.writes_by_kind.get(kind, 0.0) for r in down):.2f}" for kind in kinds)
    rounds = ", ".join(f"{r.pods_seconds:.2f}" for r in down)
    print(f"scale-down to 0: no EphemeralRunner after {median(r.ers_seconds for r in down):.2f} s, no runner pod"
          f" after {median(r.pods_seconds for r in down):.2f} s (rounds: {rounds});"
          f" API writes per runner {median(r.writes_per_runner for r in down):.2f} [{by_kind}]")  # fmt: skip
    names = sorted({name for r in down for name in r.cpu})
    bench_rounds = ", ".join(f"{r.cpu.get('bench', 0.0):.2f}" for r in down)
    print("  CPU seconds, scale-down window: " + ", ".join(
        f"{name} {median(r.cpu.get(name, 0.0) for r in down):.2f}" for name in names)
        + f" (bench rounds: {bench_rounds})")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runners", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1, help="rounds run first and not counted (default 1)")
    parser.add_argument("--reuse", help="work directory of a running cluster (arc-scaleset cluster up --dir)")
    parser.add_argument("--credentials", choices=("pat", "app"), default="pat",
                        help="the controllers' GitHub credentials: a PAT (default) or a GitHub App")  # fmt: skip
    parser.add_argument("--no-limit", action="store_true", help="skip the limit runs (controllers' figures only)")
    parser.add_argument("--profile", help="write a cProfile of the first controllers run to this file")
    parser.add_argument("--profile-down", help="write a cProfile of the first counted scale-down to this file")
    parser.add_argument("--trace", action="store_true", help="print object counts and queue lengths while waiting")
    arguments = parser.parse_args()
    freeze_startup_objects()  # as `arc-scaleset controller` does before it starts
    asyncio.run(main(arguments))
