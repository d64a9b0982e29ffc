"""``arc-scaleset status`` (``kubectl arc status``): one screen per scale set -- GitHub scale set and runner
group, bounds, desired and actual runners by phase and revision, the runner set's revisions and patch ID, the
listener's session, conditions and the newest Events (docs/observability.md)."""

from __future__ import annotations

import argparse

from arc_scaleset.cmd import diagnose_command, terminal
from arc_scaleset.diagnose.render import render_status
from arc_scaleset.diagnose.snapshot import Snapshot
from arc_scaleset.diagnose.summary import summarize


def configure(parser: argparse.ArgumentParser) -> None:
    diagnose_command.configure(parser)


def _text(snapshot: Snapshot) -> str:
    return render_status(summarize(snapshot))


def _terminal(screens: list[str]) -> bool:
    """On a TTY with rich importable, the screens framed and coloured (same words); else False: plain text."""
    console = terminal.rich_console()
    if console is None:
        return False
    terminal.print_status(console, screens)
    return True


def run(args: argparse.Namespace) -> int:
    return diagnose_command.run(args, document=summarize, text=_text, terminal=_terminal)
