"""The one entry point: ``arc-scaleset <command>``.

Each command lives in its own package and exposes two functions, imported lazily so that a command
pays only for what it uses: ``configure(parser)`` adds its arguments and ``run(args) -> int`` runs it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from arc_scaleset import __version__

# command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "controller": ("arc_scaleset.controllers.command", "run the controller manager (the four reconcilers)"),
    "listener": ("arc_scaleset.listener.command", "run one scale set's listener (config: LISTENER_CONFIG_PATH)"),
    "cluster": ("arc_scaleset.cluster.command", "build, start, stop the local Kubernetes control plane"),
    "sim": ("arc_scaleset.sim.command", "run the simulated GitHub + Actions service"),
    "demo": ("arc_scaleset.demo", "run the whole system on this machine with a simulated workload"),
    "crds": ("arc_scaleset.api.command", "print the CustomResourceDefinitions as YAML"),
    "force-cleanup": (
        "arc_scaleset.controllers.force_cleanup",
        "release a scale set's objects stuck on finalizers when no controller will (ARC #3282)",
    ),
}


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="arc-scaleset", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.add_parser("version", help="print the version")
    # Only the chosen command's module is imported: `arc-scaleset crds` must not load aiohttp servers.
    chosen = next((a for a in argv if a in COMMANDS), None)
    for name, (module, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            importlib.import_module(module).configure(command_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(args_list).parse_args(args_list)
    if args.command == "version":
        print(__version__)
        return 0
    module = importlib.import_module(COMMANDS[args.command][0])
    code: int = module.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
