"""``arc-scaleset explain`` (``kubectl arc explain``): why a scale set is not doing what one expects, one line
per finding with its evidence, from the rules of :mod:`arc_scaleset.diagnose.rules` (docs/observability.md)."""

from __future__ import annotations

import argparse
from typing import Any

from arc_scaleset.cmd import diagnose_command
from arc_scaleset.diagnose.render import render_findings
from arc_scaleset.diagnose.rules import explain
from arc_scaleset.diagnose.snapshot import Snapshot


def configure(parser: argparse.ArgumentParser) -> None:
    diagnose_command.configure(parser)


def document(snapshot: Snapshot) -> dict[str, Any]:
    return {
        "namespace": snapshot.namespace,
        "name": snapshot.name,
        "findings": [finding.to_json() for finding in explain(snapshot)],
    }


def _text(snapshot: Snapshot) -> str:
    return render_findings(snapshot.namespace, snapshot.name, explain(snapshot))


def run(args: argparse.Namespace) -> int:
    return diagnose_command.run(args, document=document, text=_text)
