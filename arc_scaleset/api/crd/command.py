"""``arc-scaleset crds``: print the four CustomResourceDefinitions, or write them one file per kind."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from arc_scaleset.api.crd.generate import crd_file_name, custom_resource_definitions, render_all, render_yaml


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output-dir",
        metavar="DIR",
        type=Path,
        help="write one file per CRD into DIR (e.g. config/crd) instead of printing a multi-document stream",
    )


def write_crd_files(directory: Path) -> list[Path]:
    """Write every CRD to ``directory/<group>_<plural>.yaml`` (creating the directory); returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for crd in custom_resource_definitions():
        path = directory / crd_file_name(crd)
        path.write_text(render_yaml(crd), encoding="utf-8")
        written.append(path)
    return written


def run(args: argparse.Namespace) -> int:
    if args.output_dir is not None:
        for path in write_crd_files(args.output_dir):
            print(path, file=sys.stderr)
        return 0
    sys.stdout.write(render_all(custom_resource_definitions()))
    return 0
