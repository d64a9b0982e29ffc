"""The node agent: the kubelet's part for the local cluster's kwok nodes, as one process.

kwok marks pods Running but runs no containers. This process plays what a kubelet would run:

- listener pods (in the controller namespace): a real ``arc-scaleset listener`` process per pod, through
  :mod:`arc_scaleset_lab.node.listener_kubelet`;
- runner pods (every namespace): the simulated runners, through :class:`arc_scaleset_lab.node.runner_pods.PodPlayer`
  (online when the pod runs; the pod ends with the runner's exit code when its job ends).

Run as ``python -m arc_scaleset_lab.node.agent --kubeconfig K --sim-url URL --listener-namespace NS
--log-dir D --work-dir W [--ready-file F]``; SIGTERM/SIGINT stops it (and the listener processes it
started). Listener logs go to ``D/listeners/<pod>.log``; W holds the listeners' materialised volumes (their
config, with secrets, in 0600 files). The ready file is written once both players run.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arc_scaleset.kube.client import KubeClient
from arc_scaleset_lab.node.listener_kubelet import ListenerKubelet
from arc_scaleset_lab.node.runner_pods import PodPlayer
from arc_scaleset_lab.sim.admin_client import SimAdminClient

log = logging.getLogger("arc_scaleset.node_agent")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="node_agent", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True, type=Path, help="admin kubeconfig of the cluster")
    parser.add_argument("--sim-url", required=True, help="base URL of the simulated GitHub")
    parser.add_argument("--sim-ca-file", default=None, help="PEM of the CA of a sim served over TLS")
    parser.add_argument("--listener-namespace", required=True, help="where listener pods live")
    parser.add_argument("--log-dir", required=True, type=Path, help="listener process logs go here")
    parser.add_argument("--work-dir", required=True, type=Path, help="private directories of listener pods")
    parser.add_argument("--ready-file", type=Path, default=None, help="touched once the players run")
    parser.add_argument(
        "--arc-listener-binary",
        type=Path,
        default=None,
        help="ARC's listener binary: run it for ARC's own listener pods (bench/bench_vs_arc.py; needs root)",
    )
    return parser.parse_args(argv)


async def _serve(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    kubelet = ListenerKubelet(
        kubeconfig=args.kubeconfig,
        namespace=args.listener_namespace,
        log_dir=args.log_dir / "listeners",
        work_dir=args.work_dir,
        arc_listener_binary=args.arc_listener_binary,
    )
    async with (
        KubeClient.from_kubeconfig(args.kubeconfig) as kube,
        SimAdminClient(args.sim_url, timeout=30.0, ca_file=args.sim_ca_file) as sim,
    ):
        player = PodPlayer(kube, sim, namespace=None, poll_timeout=10.0)
        tasks: list[asyncio.Task[Any]] = [
            asyncio.create_task(player.run(), name="runner-pod-player"),
            asyncio.create_task(kubelet.run(), name="listener-kubelet"),
        ]
        if args.ready_file is not None:
            args.ready_file.write_text("ready\n")
        log.info("node agent running")
        stopped = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait([stopped, *tasks], return_when=asyncio.FIRST_COMPLETED)
        # The kubelet stops its listeners gracefully (SIGTERM: they delete their sessions) before returning.
        kubelet.request_stop()
        tasks[0].cancel()
        stopped.cancel()
        code = 0
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:
                if task in done:
                    log.exception("node agent: %s failed", task.get_name())
                    code = 1
        return code


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stdout)
    return asyncio.run(_serve(args))


if __name__ == "__main__":
    sys.exit(main())
