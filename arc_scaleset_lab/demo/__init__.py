"""``arc-scaleset demo``: the whole system on this machine, against a simulated GitHub, with a workload.

It builds (once) or reuses the local control plane, starts it, the simulated GitHub, the controller
manager (leader election on) and the node agent that plays the kubelet for listener and runner pods,
applies an AutoscalingRunnerSet, runs a workload with a runner-template change halfway, shows the system
live, prints a summary, and stops everything (``--keep`` leaves it running; ``--stop DIR`` stops a kept
one). Exit code 0 when every job ran exactly once and the set settled back at its minimum.
``--cold-nodes`` puts the runners on nodes that appear only when a runner pod needs one (``cold_nodes.py``).
``--observe`` runs the lab's Prometheus over the controller and the listener while the demo runs (``observe.py``).
At the end it writes a self-contained HTML report of the run (``--report``; ``report_html.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from arc_scaleset.tasks import cancel_and_wait
from arc_scaleset_lab.demo.cold_nodes import ColdNodes
from arc_scaleset_lab.demo.scenario import DemoError, DemoOptions, Scenario
from arc_scaleset_lab.demo.summary import Summary
from arc_scaleset_lab.demo.view import DemoState, plain_line, render

if TYPE_CHECKING:
    from arc_scaleset_lab.demo.network import DemoNetwork
    from arc_scaleset_lab.harness.system import System

DEFAULTS = DemoOptions()
COLD_DEFAULTS = ColdNodes()
REPORT = Path("build/demo-report.html")


# The workload and scale-set options: (DemoOptions field, type, help); the flag is the field with dashes.
_NUMBERS: tuple[tuple[str, type[int] | type[float], str], ...] = (
    ("runners_min", int, "minRunners of the scale set"),
    ("runners_max", int, "maxRunners of the scale set"),
    ("jobs", int, "jobs in the workload"),
    ("job_rate", float, "mean job arrivals per second"),
    ("duration_min", float, "shortest job, seconds"),
    ("duration_max", float, "longest job, seconds"),
    ("seed", int, "workload seed: the same seed gives the same jobs"),
    ("burst", int, "jobs of the workload that arrive at one instant, early on"),
)

# The cold-nodes options (arc_scaleset_lab/demo/cold_nodes.py): (flag, type, default, help).
_COLD: tuple[tuple[str, type[int] | type[float], float, str], ...] = (
    ("--node-delay", float, COLD_DEFAULTS.delay, "with --cold-nodes: seconds a new node takes to appear"),
    ("--node-idle", float, COLD_DEFAULTS.idle, "with --cold-nodes: seconds a node stays empty before it goes"),
    ("--max-nodes", int, COLD_DEFAULTS.max_nodes, "with --cold-nodes: the most nodes the pool may have"),
    ("--node-size", int, COLD_DEFAULTS.node_size, "with --cold-nodes: CPUs of a node; a runner requests one"),
)


def configure(parser: argparse.ArgumentParser) -> None:
    for name, kind, text in _NUMBERS:
        default = getattr(DEFAULTS, name)
        shown = "a third of --jobs" if default is None else f"{default:g}"
        parser.add_argument(
            "--" + name.replace("_", "-"), dest=name, type=kind, default=default, help=f"{text} (default: {shown})"
        )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="serve the simulated GitHub over HTTPS with a private CA, given to the scale set in a ConfigMap",
    )
    parser.add_argument(
        "--proxy",
        action="store_true",
        help="send all GitHub traffic of the controller, listener and runners through a forward proxy that "
        "requires credentials (tinyproxy; implies --tls); the summary says whether anything bypassed it",
    )
    parser.add_argument(
        "--cold-nodes",
        action="store_true",
        help="run the runners on a node pool that starts empty: a node appears --node-delay seconds after a "
        "runner pod finds no room (the lab's cluster autoscaler), as on a real cluster; the summary says how "
        "many nodes were added",
    )
    for flag, kind, default, text in _COLD:
        parser.add_argument(flag, type=kind, default=default, help=f"{text} (default: {default:g})")
    parser.add_argument(
        "--observe",
        action="store_true",
        help="run a real Prometheus (built from its Go module on first use) scraping the controller and the "
        "listener while the demo runs, and print where to query it (it stops with the demo, also with --keep)",
    )
    parser.add_argument(
        "--report",
        type=Path,
        default=REPORT,
        metavar="PATH",
        help="where to write the run's HTML report: charts of jobs, waits by phase, runners and the listener, in "
        f"one file that opens without a network (default: {REPORT})",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="leave the cluster, simulated GitHub, controller and node agent running at the end",
    )
    parser.add_argument(
        "--no-live",
        dest="live",
        action="store_false",
        help="print a line per second instead of the live view (automatic without a terminal)",
    )
    parser.add_argument(
        "--stop",
        type=Path,
        default=None,
        metavar="DIR",
        help="stop a demo left running by --keep (DIR is printed at its end) and exit",
    )


def _cold(args: argparse.Namespace) -> ColdNodes | None:
    if not args.cold_nodes:
        return None
    return ColdNodes(delay=args.node_delay, idle=args.node_idle, max_nodes=args.max_nodes, node_size=args.node_size)


def _options(args: argparse.Namespace) -> DemoOptions:
    if not 0 <= args.runners_min <= args.runners_max or args.runners_max < 1:
        raise ValueError("need 0 <= --runners-min <= --runners-max and --runners-max >= 1")
    if args.jobs < 1 or args.job_rate <= 0 or not 0 <= args.duration_min <= args.duration_max:
        raise ValueError("need --jobs >= 1, --job-rate > 0 and 0 <= --duration-min <= --duration-max")
    if args.burst is not None and not 0 <= args.burst <= args.jobs:
        raise ValueError("need 0 <= --burst <= --jobs")
    # --proxy implies --tls: an https request crosses a proxy as a CONNECT tunnel (docs in demo/network.py).
    return DemoOptions(
        **{name: getattr(args, name) for name, _, _ in _NUMBERS},
        tls=args.tls or args.proxy,
        proxy=args.proxy,
        cold=_cold(args),
    )


def run(args: argparse.Namespace) -> int:
    # soft_wrap: long status lines stay one line in logs and pipes (the terminal wraps them if it must).
    console = Console(soft_wrap=True)
    if args.stop is not None:
        return _stop(args.stop)
    try:
        options = _options(args)
    except ValueError as exc:
        console.print(f"error: {exc}")
        return 2
    from arc_scaleset_lab.cli.cluster import build_with_progress
    from arc_scaleset_lab.cluster.binaries import BuildError
    from arc_scaleset_lab.cluster.localcluster import ClusterError, LocalCluster

    try:
        bin_dir = build_with_progress()
    except BuildError as exc:
        console.print(f"error: could not build the local control plane: {exc}")
        return 1
    workdir = Path(tempfile.mkdtemp(prefix="arc-scaleset-demo-"))
    cluster = LocalCluster(workdir / "cluster", bin_dir=bin_dir)
    console.print(f"Starting the local Kubernetes control plane (work directory {workdir}) ...")
    started = time.monotonic()
    try:
        info = cluster.start(tie_to_parent=not args.keep)
    except ClusterError as exc:
        console.print(f"error: {exc}")
        return 1
    console.print(f"  API server at {info.server} (up in {time.monotonic() - started:.0f}s)")
    live = args.live and console.is_terminal
    code = 1
    try:
        code = asyncio.run(
            _demo(
                options,
                workdir=workdir,
                kubeconfig=info.kubeconfig,
                keep=args.keep,
                live=live,
                console=console,
                observe=args.observe,
                report=args.report,
            )
        )
    except KeyboardInterrupt:
        console.print("interrupted: stopping everything")
        code = 130
    finally:
        if not args.keep:
            cluster.stop()
    if not args.keep:
        if code == 0:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            console.print(f"logs kept in {workdir / 'logs'} and {workdir / 'cluster' / 'logs'}")
    return code


async def _demo(
    options: DemoOptions,
    *,
    workdir: Path,
    kubeconfig: Path,
    keep: bool,
    live: bool,
    console: Console,
    observe: bool = False,
    report: Path | None = None,
) -> int:
    from arc_scaleset_lab.demo.network import DemoNetwork, NetworkError

    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if main is not None:
        # SIGTERM stops the demo as Ctrl-C does: through the finally clauses that stop every process.
        loop.add_signal_handler(signal.SIGTERM, main.cancel)
    network = DemoNetwork(workdir, tls=options.tls, proxy=options.proxy, tie_to_parent=not keep)
    try:
        if network.proxy is not None:
            console.print("Starting the proxy (tinyproxy, credentials required) ...")
        network.start()
    except NetworkError as exc:
        console.print(f"error: {exc}")
        return 1
    try:
        return await _with_network(
            options,
            network,
            workdir=workdir,
            kubeconfig=kubeconfig,
            keep=keep,
            live=live,
            console=console,
            observe=observe,
            report=report,
        )
    finally:
        if not keep:
            await network.stop()


async def _with_network(
    options: DemoOptions,
    network: DemoNetwork,
    *,
    workdir: Path,
    kubeconfig: Path,
    keep: bool,
    live: bool,
    console: Console,
    observe: bool = False,
    report: Path | None = None,
) -> int:
    """The demo once its network is up: the system, the scenario, the summary and the report (at ``report``,
    also after a failure); exit code 0 when it is ok."""
    from rich.live import Live

    from arc_scaleset_lab.demo import observe as observing
    from arc_scaleset_lab.demo.network import NetworkError
    from arc_scaleset_lab.harness.system import System, SystemOptions, SystemStartError

    extra_args = observing.LISTENER_METRICS_ARGS if observe else ()
    system = System(
        workdir,
        kubeconfig=kubeconfig,
        options=network.system_options(SystemOptions(tie_to_parent=not keep, controller_args=extra_args)),
        extra_log_dirs=[workdir / "cluster" / "logs"],
    )
    console.print("Starting the simulated GitHub, the controller manager and the node agent ...")
    try:
        await system.start()
    except SystemStartError as exc:
        console.print(f"error: {exc}")
        return 1
    state = DemoState()
    summary: Summary | None = None
    failure: str | None = None
    stack = contextlib.AsyncExitStack()
    try:
        console.print(
            f"  simulated GitHub at {system.sim_url}, controller pid {system.controller_pid}, "
            f"node agent pid {system.agent_pid}"
        )
        prometheus = None
        if observe:
            console.print("Starting Prometheus (built from its Go module first when missing: minutes, once) ...")
            prometheus = await stack.enter_async_context(observing.observed(system, workdir))
            for line in observing.where(prometheus):
                console.print(line, highlight=False)
        if network.proxy is not None:
            console.print(f"  proxy at {network.proxy.url}, its log {network.proxy.log_path}")
        scenario = Scenario(system, options, state, network=network)
        display = asyncio.create_task(_plain(state)) if not live else None
        try:
            if live:
                with Live(get_renderable=lambda: render(state), console=console, refresh_per_second=4):
                    summary = await scenario.run()
            else:
                summary = await scenario.run()
        except (DemoError, NetworkError) as exc:
            failure = str(exc)
        finally:
            await cancel_and_wait(display)
        written = await _write_report(scenario, summary, report) if report is not None else None
        if failure is not None:
            console.print(f"error: {failure}")
            console.print(plain_line(state))
            for at, message in state.events[-10:]:
                console.print(f"  {at:6.0f}s  {message}")
            if written is not None:
                console.print(written, highlight=False)
            return 1
        assert summary is not None
        console.print("\n[bold]Summary[/bold]")
        for line in summary.lines():
            console.print("  " + line, highlight=False)
        if prometheus is not None:
            console.print(await observing.scraped(prometheus), highlight=False)
        if written is not None:
            console.print(written, highlight=False)
        return 0 if summary.ok else 1
    finally:
        await stack.aclose()
        if keep:
            await system.detach()
            _print_keep(system=system, network=network, workdir=workdir, kubeconfig=kubeconfig, options=options)
        else:
            console.print("Stopping the node agent, the controller, the simulated GitHub and the cluster ...")
            await system.stop()


async def _write_report(scenario: Scenario, summary: Summary | None, path: Path) -> str:
    """Write the run's report to ``path``; the line that says where (or why not)."""
    import aiohttp

    from arc_scaleset_lab.demo import report_html
    from arc_scaleset_lab.sim.admin_client import SimAdminError

    try:
        written = await asyncio.to_thread(report_html.write, await scenario.report(summary), path)
    except (OSError, SimAdminError, aiohttp.ClientError, TimeoutError) as exc:
        return f"could not write the report to {path}: {exc}"
    return f"Report: {written} (one HTML file; open it in a browser, it needs no network)"


async def _plain(state: DemoState) -> None:
    """A status line per second, and each event on its own line as it happens."""
    shown = 0
    while True:
        for at, message in state.events[shown:]:
            print(f"t={at:5.0f}s event: {message}", flush=True)
        shown = len(state.events)
        print(plain_line(state), flush=True)
        await asyncio.sleep(1.0)


def _print_keep(*, system: System, network: DemoNetwork, workdir: Path, kubeconfig: Path, options: DemoOptions) -> None:
    # The command as the user ran it (e.g. .venv/bin/arc-scaleset), so the stop line works as printed.
    me = sys.argv[0] if sys.argv and sys.argv[0].endswith("arc-scaleset") else "arc-scaleset"
    lines = [
        "",
        "Everything is still running (--keep). Point kubectl at the cluster:",
        f"  export KUBECONFIG={kubeconfig}",
        f"  kubectl get autoscalingrunnersets,ephemeralrunnersets,ephemeralrunners -n {options.namespace}",
        f"  kubectl get autoscalinglisteners,pods -n {system.controller_namespace}",
        "See what it does (kubectl runs kubectl-arc, installed beside arc-scaleset, as its `arc` plugin):",
        f"  export PATH={Path(sys.executable).parent}:$PATH",
        f"  kubectl arc status -n {options.namespace}",
        f"  kubectl arc explain -n {options.namespace}",
        f"The simulated GitHub: {system.sim_url}/_sim/stats   Logs: {system.log_dir}",
        *([f"  (served over TLS: curl --cacert {system.sim_ca_file} ...)"] if system.sim_ca_file else []),
        *([f"The proxy: {network.proxy.url}   Its log: {network.proxy.log_path}"] if network.proxy else []),
        "Stop everything with:",
        f"  {me} demo --stop {workdir}",
    ]
    print("\n".join(lines), flush=True)


def _stop(workdir: Path) -> int:
    from arc_scaleset_lab.cluster.localcluster import stop_recorded as stop_cluster
    from arc_scaleset_lab.demo.network import stop_recorded as stop_proxy
    from arc_scaleset_lab.harness.system import stop_recorded as stop_system

    if not (workdir / "system.json").is_file() and not (workdir / "cluster" / "state.json").is_file():
        print(f"no demo recorded in {workdir}", file=sys.stderr)
        return 1
    stopped = stop_system(workdir) + stop_proxy(workdir) + stop_cluster(workdir / "cluster")
    print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0
