"""``arc-scaleset jobs`` (``kubectl arc jobs``): a scale set's recent jobs with where their wait went ("41 s
waiting for a node") and the phase the jobs waited in most at p95, from :mod:`arc_scaleset.diagnose.jobs`
(docs/observability.md)."""

from __future__ import annotations

import argparse

from arc_scaleset.cmd import diagnose_command
from arc_scaleset.diagnose.jobs import jobs_document, render_jobs


def configure(parser: argparse.ArgumentParser) -> None:
    diagnose_command.configure(parser)


def run(args: argparse.Namespace) -> int:
    return diagnose_command.run(args, document=jobs_document, text=render_jobs)
