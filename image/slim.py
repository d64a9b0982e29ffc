"""Remove from an installed virtualenv what the image never uses; run with that virtualenv's interpreter.

``python slim.py PREFIX``, by both ``make image`` and the Dockerfile, after the dependencies and the project
are installed into the virtualenv at PREFIX:

- kubernetes-validate ships the JSON schemas of every Kubernetes release it knows, strict and not, about
  100 MB; the operator reads one (``arc_scaleset.api.crd.k8s_schema.KUBERNETES_SCHEMA_RELEASE``, non-strict).
  The others go, and leave the package's RECORD, so that the installation still describes itself.
- The activate scripts: there is no shell in the image to source them.

Standard library only: it runs inside the image's build stage.
"""

from __future__ import annotations

import shutil
import sys
import sysconfig
from pathlib import Path

SCHEMA_DIRECTORY = "kubernetes_validate/kubernetes-json-schema"


def kept_schema_release() -> str:
    """The schema directory the operator reads (imported from the installed project)."""
    from arc_scaleset.api.crd.k8s_schema import KUBERNETES_SCHEMA_RELEASE

    return f"{KUBERNETES_SCHEMA_RELEASE}-local"


def prune_schemas(site_packages: Path, keep: str) -> int:
    """Delete every schema release directory but ``keep``, and their RECORD lines; bytes freed."""
    schemas = site_packages / SCHEMA_DIRECTORY
    if not (schemas / keep).is_dir():
        raise SystemExit(f"slim: {schemas / keep} is missing: the operator could not generate its CRDs")
    freed = 0
    for release in sorted(schemas.iterdir()):
        if release.name != keep and release.is_dir():
            freed += sum(path.stat().st_size for path in release.rglob("*") if path.is_file())
            shutil.rmtree(release)
    for record in site_packages.glob("kubernetes_validate-*.dist-info/RECORD"):
        lines = record.read_text().splitlines(keepends=True)
        record.write_text(
            "".join(
                line
                for line in lines
                if not line.startswith(f"{SCHEMA_DIRECTORY}/") or line.startswith(f"{SCHEMA_DIRECTORY}/{keep}/")
            )
        )
    return freed


def remove_activate_scripts(prefix: Path) -> None:
    for script in sorted((prefix / "bin").glob("activate*")) + sorted((prefix / "bin").glob("Activate*")):
        script.unlink()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python slim.py PREFIX", file=sys.stderr)
        return 2
    prefix = Path(argv[0])
    if Path(sys.prefix).resolve() != prefix.resolve():
        print(f"slim: run with {prefix}/bin/python, not {sys.executable}", file=sys.stderr)
        return 2
    site_packages = Path(sysconfig.get_paths()["purelib"])
    freed = prune_schemas(site_packages, kept_schema_release())
    remove_activate_scripts(prefix)
    print(f"slim: removed {freed / 1e6:.0f} MB of unused Kubernetes schemas")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
