"""Where the control-plane binaries come from: pinned versions, the build, and the cache outside git.

The binaries are built from the Go wrapper modules in ``gomodules/`` beside this file (go.mod + go.sum only) into
a cache directory keyed by the pinned versions and a digest of those module files, so a rebuild happens
only when a pin changes. Builds are serialised by a file lock, written to a temporary directory and
moved into place whole: a half-built cache is never mistaken for a complete one.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

K8S_VERSION = "v1.37.2"
ETCD_VERSION = "v3.7.3"
KWOK_VERSION = "v0.8.0"
HELM_VERSION = "v4.3.2"
"""Not part of the control plane: the tests install the charts in ``charts/`` with it."""

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "helm")


@dataclass(frozen=True)
class BuildStep:
    """One ``go build`` invocation: a wrapper module and the main packages it produces."""

    module_dir: str
    packages: tuple[str, ...]
    outputs: tuple[str, ...]
    ldflags: str = "-s -w"
    tags: tuple[str, ...] = ()
    """Go build tags (``-tags``), for both the package count and the build."""


def _version_ldflags() -> str:
    # Without these the binaries report v0.0.0-master, and kubectl/clients warn about skew.
    minor = K8S_VERSION.split(".")[1]
    flags = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={K8S_VERSION}",
            f"-X {pkg}.gitMajor=1",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return "-s -w " + " ".join(flags)


BUILD_STEPS = (
    BuildStep("etcd", ("go.etcd.io/etcd/server/v3",), ("etcd",)),
    BuildStep(
        "k8s",
        (
            "k8s.io/kubernetes/cmd/kube-apiserver",
            "k8s.io/kubernetes/cmd/kube-controller-manager",
            "k8s.io/kubernetes/cmd/kube-scheduler",
        ),
        ("kube-apiserver", "kube-controller-manager", "kube-scheduler"),
        _version_ldflags(),
    ),
    BuildStep("kwok", ("sigs.k8s.io/kwok/cmd/kwok",), ("kwok",)),
    BuildStep("helm", ("helm.sh/helm/v4/cmd/helm",), ("helm",)),
)


class BuildError(RuntimeError):
    """The control plane could not be built; the message names the step and shows go's last lines."""


def modules_dir() -> Path:
    """The Go wrapper modules (package data of the lab: go.mod + go.sum per step, no source)."""
    return Path(__file__).resolve().parent / "gomodules"


def cache_root() -> Path:
    """``$ARC_SCALESET_CACHE``, else ``$XDG_CACHE_HOME/arc-scaleset``, else ``~/.cache/arc-scaleset``."""
    if explicit := os.environ.get("ARC_SCALESET_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "arc-scaleset"


def cache_key() -> str:
    """Versions plus a digest of the wrapper modules' go.mod/go.sum: a changed pin means a new directory."""
    digest = hashlib.sha256()
    for step in BUILD_STEPS:
        for name in ("go.mod", "go.sum"):
            digest.update((modules_dir() / step.module_dir / name).read_bytes())
    versions = f"k8s-{K8S_VERSION}_etcd-{ETCD_VERSION}_kwok-{KWOK_VERSION}_helm-{HELM_VERSION}"
    return f"{versions}_{digest.hexdigest()[:12]}"


def bin_dir() -> Path:
    """The directory holding the built binaries for the pinned versions (it may not exist yet)."""
    if explicit := os.environ.get("ARC_SCALESET_BIN_DIR"):
        return Path(explicit)
    return cache_root() / "controlplane" / cache_key()


def is_built(directory: Path | None = None) -> bool:
    directory = directory or bin_dir()
    return (directory / ".complete").exists() and all((directory / b).is_file() for b in BINARIES)


ProgressCallback = Callable[[str, int, int], None]
"""Called as ``(step, packages_done, packages_total)`` while a step compiles."""


@contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def go_command() -> str:
    """The ``go`` command on PATH; :class:`BuildError` saying what to install when there is none."""
    go = shutil.which("go")
    if go is None:
        raise BuildError("the 'go' command is not on PATH: install Go >= 1.26 to build the local control plane")
    return go


def _tag_args(step: BuildStep) -> list[str]:
    return ["-tags", ",".join(step.tags)] if step.tags else []


def _count_packages(go: str, step: BuildStep, cwd: Path, env: dict[str, str]) -> int:
    listed = subprocess.run(
        [go, "list", "-deps", *_tag_args(step), *step.packages],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return max(1, len(listed.stdout.split()))


def run_step(go: str, step: BuildStep, out_dir: Path, progress: ProgressCallback | None) -> None:
    cwd = modules_dir() / step.module_dir
    env = {**os.environ, "CGO_ENABLED": "0"}
    total = _count_packages(go, step, cwd, env)
    out = str(out_dir / step.outputs[0]) if len(step.outputs) == 1 else str(out_dir) + "/"
    cmd = [go, "build", "-v", "-trimpath", *_tag_args(step), "-ldflags", step.ldflags, "-o", out, *step.packages]
    done = 0
    tail: list[str] = []
    # `go build -v` names each package as it compiles it: counting them gives a real progress figure.
    with subprocess.Popen(cmd, cwd=cwd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True) as p:
        assert p.stderr is not None
        for line in p.stderr:
            tail = [*tail[-29:], line.rstrip()]
            done += 1
            if progress:
                progress(step.module_dir, min(done, total), total)
        code = p.wait()
    if code != 0:
        raise BuildError(f"building {', '.join(step.outputs)} failed (go exit {code}):\n" + "\n".join(tail))
    if progress:
        progress(step.module_dir, total, total)


def build(*, progress: ProgressCallback | None = None, force: bool = False) -> Path:
    """Build every binary into :func:`bin_dir` unless it is already complete; return that directory."""

    def fill(go: str, staging: Path) -> None:
        for step in BUILD_STEPS:
            run_step(go, step, staging, progress)

    return build_cached(bin_dir(), key=cache_key(), is_complete=is_built, fill=fill, force=force)


def build_cached(
    target: Path,
    *,
    key: str,
    is_complete: Callable[[Path], bool],
    fill: Callable[[str, Path], None],
    force: bool = False,
) -> Path:
    """``target``, filled by ``fill(go, staging)`` unless ``is_complete(target)`` (and not ``force``).

    One build at a time per cache directory (a file lock: parallel test runs share the cache); the build goes
    into a staging directory renamed onto ``target`` only once complete and marked with ``key``, so a build
    that fails or is killed leaves nothing a later run would take for complete.
    """
    if is_complete(target) and not force:
        return target
    go = go_command()
    with _build_lock(target.parent):
        if is_complete(target) and not force:  # another process finished the build while we waited
            return target
        staging = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
        try:
            fill(go, staging)
            (staging / ".complete").write_text(key + "\n")
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target
