"""ARC itself, for side-by-side benchmarks: its controller manager and listener built from its Go module.

Built like the control plane (:mod:`.binaries`): the wrapper module ``gomodules/arc/`` (go.mod + go.sum only)
requires ``github.com/actions/actions-runner-controller`` at :data:`ARC_VERSION`; ``go build`` compiles the
module's root package (the manager) and ``cmd/githubrunnerscalesetlistener`` into a cache directory keyed by
the versions and a digest of the wrapper's files, under the same build lock, staged and moved into place
whole. ARC's own CRDs (the ``actions.github.com`` ones of ``config/crd/bases``) are copied beside the
binaries, so a run needs nothing but the cache.

ARC deletes an AutoscalingRunnerSet whose ``app.kubernetes.io/version`` label differs from the version it
was built with, so the manager is linked with ``build.Version`` = :data:`ARC_CHART_VERSION` (the chart
version of that module release) and the scale sets given to it must carry that label.

Nothing here is used by the operator or by ``make test``'s default path except the benchmark test; binaries
never go into git.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import yaml

from arc_scaleset_lab.cluster import binaries

ARC_MODULE: Final = "github.com/actions/actions-runner-controller"
ARC_VERSION: Final = "v0.27.6"
"""The newest version of ARC's module the Go module proxy serves (its master is refused: bench/README.md)."""
ARC_CHART_VERSION: Final = "0.6.1"
"""``charts/gha-runner-scale-set*/Chart.yaml`` version of ARC v0.27.6: the label its manager accepts."""

MANAGER: Final = "actions-runner-controller"
LISTENER: Final = "githubrunnerscalesetlistener"
CRD_DIR: Final = "crds"
LISTENER_COMMAND: Final = "/github-runnerscaleset-listener"
"""The command ARC v0.27.6 gives its listener pods' container (a node agent recognises ARC's pods by it)."""

_STEP = binaries.BuildStep(
    "arc",
    (ARC_MODULE, f"{ARC_MODULE}/cmd/githubrunnerscalesetlistener"),
    (MANAGER, LISTENER),
    f"-s -w -X {ARC_MODULE}/build.Version={ARC_CHART_VERSION}",
)


def cache_key() -> str:
    """Versions plus a digest of the wrapper module: a changed pin or version label means a new directory."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((binaries.modules_dir() / _STEP.module_dir / name).read_bytes())
    digest.update(_STEP.ldflags.encode())
    return f"arc-{ARC_VERSION}_chart-{ARC_CHART_VERSION}_{digest.hexdigest()[:12]}"


def bin_dir() -> Path:
    """Where the ARC binaries for the pinned versions live (it may not exist yet)."""
    return binaries.cache_root() / "arc" / cache_key()


def is_built(directory: Path | None = None) -> bool:
    directory = directory or bin_dir()
    return (
        (directory / ".complete").exists()
        and all((directory / b).is_file() for b in (MANAGER, LISTENER))
        and any((directory / CRD_DIR).glob("*.yaml"))
    )


def _module_source(go: str) -> Path:
    """The directory of ARC's module in the module cache (downloaded when missing)."""
    cwd = binaries.modules_dir() / _STEP.module_dir
    done = subprocess.run(
        [go, "mod", "download", "-json", f"{ARC_MODULE}@{ARC_VERSION}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise binaries.BuildError(f"go mod download {ARC_MODULE}@{ARC_VERSION} failed:\n{done.stderr[-2000:]}")
    return Path(json.loads(done.stdout)["Dir"])


def controller_chart() -> Path:
    """ARC's own controller chart (``gha-runner-scale-set-controller`` at :data:`ARC_CHART_VERSION`) in the
    module's source, downloaded into Go's module cache when missing (read-only there: helm only reads it)."""
    return _module_source(binaries.go_command()) / "charts" / "gha-runner-scale-set-controller"


def build(*, progress: binaries.ProgressCallback | None = None, force: bool = False) -> Path:
    """Build ARC's manager and listener and copy its CRDs into :func:`bin_dir` unless complete; that directory."""

    def fill(go: str, staging: Path) -> None:
        binaries.run_step(go, _STEP, staging, progress)
        crds = staging / CRD_DIR
        crds.mkdir()
        for source in sorted((_module_source(go) / "config" / "crd" / "bases").glob("actions.github.com_*.yaml")):
            shutil.copyfile(source, crds / source.name)

    return binaries.build_cached(bin_dir(), key=cache_key(), is_complete=is_built, fill=fill, force=force)


def crd_documents(directory: Path | None = None) -> list[dict[str, Any]]:
    """ARC's ``actions.github.com`` CustomResourceDefinitions, as built into ``directory``."""
    documents: list[dict[str, Any]] = []
    for path in sorted(((directory or bin_dir()) / CRD_DIR).glob("*.yaml")):
        documents += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return documents
