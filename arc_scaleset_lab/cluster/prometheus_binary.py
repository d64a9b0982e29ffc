"""Prometheus for the lab: built from its Go module like the control plane, only when something asks for it.

The wrapper module ``gomodules/prometheus/`` (go.mod + go.sum only) requires ``github.com/prometheus/prometheus``
at :data:`PROMETHEUS_MODULE_VERSION` (Prometheus 3.x is published as ``v0.3xx.y``: v0.316.0 is 3.16.0).
``go build`` compiles ``cmd/prometheus`` with the ``remove_all_sd`` tag -- the lab's targets are static files, so
the cloud service discoveries (and most of the compile) are left out -- and without the web UI's assets: the
lab uses the HTTP API only. The binary goes into a cache directory of its own beside the control plane's,
keyed by the version and a digest of the wrapper's files, staged and moved into place whole under the same
build lock (:func:`arc_scaleset_lab.cluster.binaries.build_cached`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Final

from arc_scaleset_lab.cluster import binaries

PROMETHEUS_MODULE: Final = "github.com/prometheus/prometheus"
PROMETHEUS_MODULE_VERSION: Final = "v0.316.0"
PROMETHEUS_VERSION: Final = "3.16.0"
"""The release :data:`PROMETHEUS_MODULE_VERSION` is; linked in, so ``/api/v1/status/buildinfo`` reports it."""

BINARY: Final = "prometheus"

_STEP = binaries.BuildStep(
    "prometheus",
    (f"{PROMETHEUS_MODULE}/cmd/prometheus",),
    (BINARY,),
    f"-s -w -X github.com/prometheus/common/version.Version={PROMETHEUS_VERSION}",
    tags=("remove_all_sd",),
)


def cache_key() -> str:
    """Version plus a digest of the wrapper module and the build flags: a changed pin means a new directory."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((binaries.modules_dir() / _STEP.module_dir / name).read_bytes())
    digest.update(_STEP.ldflags.encode())
    digest.update(",".join(_STEP.tags).encode())
    return f"prometheus-{PROMETHEUS_VERSION}_{digest.hexdigest()[:12]}"


def bin_dir() -> Path:
    """Where the Prometheus binary for the pinned version lives (it may not exist yet)."""
    return binaries.cache_root() / "prometheus" / cache_key()


def binary() -> Path:
    return bin_dir() / BINARY


def is_built(directory: Path | None = None) -> bool:
    directory = directory or bin_dir()
    return (directory / ".complete").exists() and (directory / BINARY).is_file()


def build(*, progress: binaries.ProgressCallback | None = None, force: bool = False) -> Path:
    """Build Prometheus into :func:`bin_dir` unless it is already there; the binary's path."""

    def fill(go: str, staging: Path) -> None:
        binaries.run_step(go, _STEP, staging, progress)

    return binaries.build_cached(bin_dir(), key=cache_key(), is_complete=is_built, fill=fill, force=force) / BINARY
