"""The one entry point: ``arc-scaleset <command>``.

Each command lives in its own module and exposes two functions, imported lazily so that a command pays
only for what it uses: ``configure(parser)`` adds its arguments and ``run(args) -> int`` runs it.

The operator's commands are listed here. Other installed packages add commands through the entry-point
group :data:`PLUGIN_GROUP`: each entry point names a mapping ``command -> (module, one-line help)``. The
lab (local control plane, simulated GitHub, demo) comes in that way when ``arc-scaleset[lab]`` is
installed, so the operator never imports it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Mapping, Sequence

from arc_scaleset import __version__

PLUGIN_GROUP = "arc_scaleset.commands"

# command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "controller": ("arc_scaleset.cmd.controller", "run the controller manager (the four reconcilers)"),
    "listener": ("arc_scaleset.listener.command", "run one scale set's listener (config: LISTENER_CONFIG_PATH)"),
    "crds": ("arc_scaleset.api.crd.command", "print the CustomResourceDefinitions as YAML"),
    "force-cleanup": (
        "arc_scaleset.cmd.force_cleanup",
        "release a scale set's objects stuck on finalizers when no controller will (ARC #3282)",
    ),
    "status": ("arc_scaleset.cmd.status", "show a scale set: GitHub, runners, revisions, listener, conditions, events"),
    "explain": ("arc_scaleset.cmd.explain", "say why a scale set is not doing what you expect, with the evidence"),
    "jobs": ("arc_scaleset.cmd.jobs", "show a scale set's recent jobs and where their wait went"),
}

LAB_EXTRA = "pip install 'arc-scaleset[lab]'"
# The lab's command names, known here only so that asking for one without the lab says how to get it
# instead of argparse's "invalid choice".
LAB_COMMANDS = ("cluster", "sim", "demo")
# Two lines written out (the help keeps them as they are): wrapped by argparse at 80 columns, the install
# command broke across lines and could not be copied.
WITHOUT_LAB = (
    "The lab's commands, cluster, sim and demo (a local control plane, a simulated\n"
    f"GitHub, the demo), come with the lab: {LAB_EXTRA}"
)


def plugin_commands() -> dict[str, tuple[str, str]]:
    """Commands that installed plugins add; a plugin whose registry cannot load adds none."""
    # Imported here: the commands that never look for plugins (see main) need not load it.
    import importlib.metadata

    found: dict[str, tuple[str, str]] = {}
    for entry_point in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        try:
            registry: Mapping[str, tuple[str, str]] = entry_point.load()
        except ImportError:
            # A plugin whose own dependencies are missing (an extra not installed) is not installed.
            continue
        found.update({name: spec for name, spec in registry.items() if name not in COMMANDS})
    return found


def all_commands() -> dict[str, tuple[str, str]]:
    return {**COMMANDS, **plugin_commands()}


def build_parser(argv: Sequence[str], commands: Mapping[str, tuple[str, str]] | None = None) -> argparse.ArgumentParser:
    commands = all_commands() if commands is None else commands
    epilog = None if commands.keys() - COMMANDS.keys() else WITHOUT_LAB
    parser = argparse.ArgumentParser(
        prog="arc-scaleset",
        description=__doc__.splitlines()[0],
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.add_parser("version", help="print the version")
    # Only the chosen command's module is imported: `arc-scaleset crds` must not load aiohttp servers.
    chosen = next((a for a in argv if a in commands), None)
    for name, (module, help_text) in commands.items():
        # No abbreviations, as with Go's flag package: `--metrics x` must not quietly set `--metrics-addr`.
        command_parser = sub.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)
        if name == chosen:
            importlib.import_module(module).configure(command_parser)
    return parser


LONG_RUNNING = ("controller", "listener")
"""The commands that run as pods: they never draw on a terminal."""


def _without_terminal_rendering() -> None:
    """Make ``import rich`` fail in this process, as it does in the operator's image (which has no rich).

    structlog imports rich whenever it is installed (the lab's extra brings it), only to render tracebacks in
    colour; in a controller or listener process that is about 5 MB resident for nothing, and it would make
    the lab measure a bigger process than the image runs. ``None`` in ``sys.modules`` is Python's way of
    saying "this module cannot be imported". Only for a process started as one of :data:`LONG_RUNNING`:
    never in a caller's interpreter (a test calling :func:`main` with ``argv``).
    """
    sys.modules.setdefault("rich", None)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names and return its exit code; a lab command while the lab is not
    installed is exit 2 with one line saying how to install it."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    wanted = next((a for a in args_list if not a.startswith("-")), None)
    # An operator command needs no plugin: the controller and the listener run for months, and what plugin
    # discovery reads and imports (every installed distribution's entry points, the lab's registry) would
    # stay in their memory for nothing.
    commands = dict(COMMANDS) if wanted in COMMANDS else all_commands()
    if argv is None and wanted in LONG_RUNNING:
        _without_terminal_rendering()
    if wanted in LAB_COMMANDS and wanted not in commands:
        print(f"arc-scaleset: '{wanted}' comes with the lab, which is not installed: {LAB_EXTRA}", file=sys.stderr)
        return 2
    args = build_parser(args_list, commands).parse_args(args_list)
    if args.command == "version":
        print(__version__)
        return 0
    module = importlib.import_module(commands[args.command][0])
    code: int = module.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
