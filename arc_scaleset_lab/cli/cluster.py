"""``arc-scaleset cluster build|up|down|status|listener-kubelet``: the local control plane from the command line.

``listener-kubelet`` runs :class:`~arc_scaleset_lab.node.listener_kubelet.ListenerKubelet` in the foreground:
a real ``arc-scaleset listener`` process for every listener pod in ``--namespace`` (kwok runs no
containers), until SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from arc_scaleset_lab.cluster import binaries
from arc_scaleset_lab.cluster.localcluster import ClusterError, LocalCluster, read_state, stop_recorded
from arc_scaleset_lab.cluster.processes import pid_alive


def default_workdir() -> Path:
    return binaries.cache_root() / "clusters" / "default"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=["build", "up", "down", "status", "listener-kubelet"],
        help="build: compile the binaries once into the cache; up: start a cluster and leave it "
        "running; down: stop it; status: show what runs; listener-kubelet: run listener pods of "
        "--namespace as local processes (foreground)",
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="work directory of the cluster (default: <cache>/clusters/default)"
    )
    parser.add_argument("--force", action="store_true", help="build: rebuild even when the cache is complete")
    parser.add_argument(
        "--namespace",
        default=None,
        help="listener-kubelet: the controller namespace, where listener pods live (required)",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        help="listener-kubelet: an admin kubeconfig (default: the cluster's in --dir, else $KUBECONFIG)",
    )
    parser.add_argument(
        "--log-dir",
        type=Path,
        default=None,
        help="listener-kubelet: where each listener pod's output goes, <pod>.log (default: <dir>/logs/listeners)",
    )


def build_with_progress(*, force: bool = False) -> Path:
    """Build (or reuse) the binaries, drawing a progress bar per Go module on the terminal."""
    if binaries.is_built() and not force:
        return binaries.bin_dir()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    print(
        f"Building the local control plane (Kubernetes {binaries.K8S_VERSION}, etcd {binaries.ETCD_VERSION}, "
        f"kwok {binaries.KWOK_VERSION}) and helm {binaries.HELM_VERSION} into {binaries.bin_dir()}.\n"
        "This happens once; later runs reuse it.",
        file=sys.stderr,
    )
    with Progress(
        TextColumn("{task.description:>6}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("packages"),
        TimeElapsedColumn(),
        transient=False,
    ) as progress:
        tasks: dict[str, TaskID] = {}

        def report(step: str, done: int, total: int) -> None:
            if step not in tasks:
                tasks[step] = progress.add_task(step, total=total)
            progress.update(tasks[step], completed=done, total=total)

        return binaries.build(progress=report, force=force)


def run_listener_kubelet(args: argparse.Namespace, workdir: Path) -> int:
    import asyncio
    import logging
    import os

    from arc_scaleset.kube.errors import KubeconfigError
    from arc_scaleset_lab.node.listener_kubelet import ListenerKubelet

    if not args.namespace:
        print("error: listener-kubelet needs --namespace (the controller namespace)", file=sys.stderr)
        return 2
    kubeconfig: Path | None = args.kubeconfig
    if kubeconfig is None:
        state = read_state(workdir)
        if state:
            kubeconfig = Path(state["kubeconfig"])
        elif os.environ.get("KUBECONFIG"):
            kubeconfig = Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])
    if kubeconfig is None or not kubeconfig.is_file():
        print(f"error: no kubeconfig: no cluster recorded in {workdir}; pass --kubeconfig", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    try:
        kubelet = ListenerKubelet(
            kubeconfig=kubeconfig, namespace=args.namespace, log_dir=args.log_dir or workdir / "logs" / "listeners"
        )
    except KubeconfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"listener kubelet: pods of {args.namespace}, logs in {kubelet.log_dir} (Ctrl-C stops)", file=sys.stderr)
    asyncio.run(kubelet.run(handle_signals=True))
    return 0


def run(args: argparse.Namespace) -> int:
    workdir: Path = (args.dir or default_workdir()).resolve()
    try:
        if args.action == "listener-kubelet":
            return run_listener_kubelet(args, workdir)
        if args.action == "build":
            print(build_with_progress(force=args.force))
            return 0
        if args.action == "up":
            state = read_state(workdir)
            if state and any(pid and pid_alive(pid) for pid in state["pids"].values()):
                print(f"a cluster already runs in {workdir}; export KUBECONFIG={state['kubeconfig']}")
                return 0
            bin_dir = build_with_progress()
            info = LocalCluster(workdir, bin_dir=bin_dir).start(tie_to_parent=False)
            print(
                f"cluster up at {info.server}\n  export KUBECONFIG={info.kubeconfig}\n"
                f"stop it with: arc-scaleset cluster down" + (f" --dir {workdir}" if args.dir else "")
            )
            return 0
        if args.action == "down":
            stopped = stop_recorded(workdir)
            print(f"stopped: {', '.join(stopped)}" if stopped else f"no cluster recorded in {workdir}")
            return 0
        state = read_state(workdir)
        print(f"binaries: {binaries.bin_dir()} ({'built' if binaries.is_built() else 'not built'})")
        if not state:
            print(f"cluster: none recorded in {workdir}")
            return 0
        print(f"cluster: {state['server']}  KUBECONFIG={state['kubeconfig']}")
        for name, pid in state["pids"].items():
            print(f"  {name:<24} pid {pid:<8} {'running' if pid and pid_alive(pid) else 'stopped'}")
        return 0
    except (ClusterError, binaries.BuildError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
