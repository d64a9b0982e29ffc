"""What ``arc-scaleset status`` and ``arc-scaleset explain`` share: arguments, reading the snapshots, output.

Both take ``[NAME] [-n NAMESPACE] [-A] [-o text|json|yaml] [--controller-namespace NAMESPACE] [--kubeconfig FILE]
[--context NAME]``, like ``kubectl get``: without ``-n`` the kubeconfig context's namespace; ``-A`` every
namespace. One NAME prints one object (JSON/YAML); otherwise ``{"items": [...]}``. ``--controller-namespace``:
only a listener there is shown (diagnose/listener_of.py). Exit codes: 0 shown; 1 the scale set does not exist,
or the API could not be read; 2 bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any

import yaml

from arc_scaleset.diagnose.printable import printable
from arc_scaleset.diagnose.snapshot import Snapshot, gather
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import KubeconfigError, KubeError

Document = Callable[[Snapshot], dict[str, Any]]
Text = Callable[[Snapshot], str]
Terminal = Callable[[list[str]], bool]
"""Shows the plain-text screens on a terminal its own way; False when stdout is no terminal (print them)."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="one AutoscalingRunnerSet (default: every one in the namespace)")
    parser.add_argument("--namespace", "-n", help="the scale sets' namespace (default: the kubeconfig context's)")
    parser.add_argument("--all-namespaces", "-A", action="store_true", help="every namespace")
    parser.add_argument("--output", "-o", choices=("text", "json", "yaml"), default="text", help="output format")
    parser.add_argument(
        "--controller-namespace",
        help="the controller's namespace: only a listener there is shown (default: the one namespace holding a"
        " listener made for the scale set, read in every namespace)",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")


def run(args: argparse.Namespace, *, document: Document, text: Text, terminal: Terminal | None = None) -> int:
    if args.all_namespaces and args.name:
        print("a NAME and --all-namespaces exclude each other", file=sys.stderr)
        return 2
    return asyncio.run(_main(args, document=document, text=text, terminal=terminal))


def _client(args: argparse.Namespace) -> KubeClient:
    if args.context:
        return KubeClient.from_kubeconfig(args.kubeconfig, context=args.context)
    return KubeClient.from_environment(args.kubeconfig)


async def _main(args: argparse.Namespace, *, document: Document, text: Text, terminal: Terminal | None) -> int:
    try:
        kube = _client(args)
    except (KubeconfigError, OSError) as exc:
        print(f"cannot use the Kubernetes credentials: {exc}", file=sys.stderr)
        return 1
    async with kube:
        namespace = None if args.all_namespaces else (args.namespace or kube.namespace or "default")
        try:
            snapshots = await gather(
                kube, namespace=namespace, name=args.name, controller_namespace=args.controller_namespace
            )
        except LookupError as exc:
            print(printable(exc.args[0]), file=sys.stderr)
            return 1
        except KubeError as exc:
            print(printable(f"cannot read the scale sets: {exc}"), file=sys.stderr)
            return 1
    if args.output == "text":
        if not snapshots:
            print(f"no AutoscalingRunnerSet {'in any namespace' if namespace is None else f'in namespace {namespace}'}")
            return 0
        screens = [text(s) for s in snapshots]
        if terminal is None or not terminal(screens):
            print("\n\n".join(screens))
        return 0
    docs = [document(s) for s in snapshots]
    out: Any = docs[0] if args.name else {"items": docs}
    if args.output == "json":
        print(json.dumps(out, indent=2))
    else:
        print(yaml.safe_dump(out, sort_keys=False, allow_unicode=True), end="")
    return 0
