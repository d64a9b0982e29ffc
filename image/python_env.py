"""The image's virtualenv: the locked dependencies and the project's wheel, installed by the image's own
interpreter in the build stage, as the Dockerfile's build stage does.

The wheels are downloaded on the host (its pip configuration, proxy and cache apply), for the image's
platform rather than the host's, each checked against the lock's hashes. Inside the build stage, Debian's
pip wheel (``/usr/share/python-wheels``, from python3.11-venv) installs them with no index: nothing is
resolved there, and no pip is left in the image.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from image import spec

# Debian architecture -> the machine name in wheel platform tags.
WHEEL_MACHINE = {"amd64": "x86_64", "arm64": "aarch64"}
# bookworm's glibc is 2.36: wheels built for it or any older manylinux run.
GLIBC_MINOR = 36
PYTHON_VERSION = "3.11"
ABI = "cp311"

# The same paths as in the Dockerfile: pip records the wheel's path in direct_url.json.
_STAGING = "tmp/install"


def platform_tags(architecture: str) -> list[str]:
    """pip's ``--platform`` values for a Debian ``architecture`` of bookworm (pip does not expand a
    ``manylinux_2_X`` tag to older glibc versions by itself)."""
    machine = WHEEL_MACHINE[architecture]
    tags = [f"manylinux_2_{minor}_{machine}" for minor in range(GLIBC_MINOR, 4, -1)]
    return [*tags, f"manylinux2014_{machine}", f"manylinux2010_{machine}", f"manylinux1_{machine}"]


def download(lock: Path, dest: Path, *, architecture: str) -> list[Path]:
    """Download every locked distribution as a wheel for the image's platform into ``dest``."""
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check"]
    command += ["--no-deps", "--require-hashes", "--only-binary=:all:", "--dest", str(dest)]
    command += ["--python-version", PYTHON_VERSION, "--implementation", "cp"]
    for abi in (ABI, "abi3", "none"):
        command += ["--abi", abi]
    for tag in platform_tags(architecture):
        command += ["--platform", tag]
    subprocess.run([*command, "--requirement", str(lock)], check=True)
    return sorted(dest.glob("*.whl"))


def build_wheel(project: Path, dest: Path, *, epoch: int) -> Path:
    """Build the project's wheel into ``dest`` (hatchling writes SOURCE_DATE_EPOCH into every entry, so
    the same sources give the same bytes)."""
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.whl"):
        old.unlink()
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps"]
    subprocess.run([*command, "--wheel-dir", str(dest), str(project)], check=True, env=_env_with_epoch(epoch))
    (wheel,) = dest.glob("*.whl")
    return wheel


def install(build_root: Path, *, wheels: list[Path], lock: Path, project_wheel: Path, epoch: int) -> None:
    """Create the virtualenv at :data:`image.spec.PREFIX` in ``build_root`` and install into it: the lock
    (hash-checked), then the project without dependencies; slim it and compile it."""
    staging = build_root / _STAGING
    (staging / "wheels").mkdir(parents=True)
    for wheel in wheels:
        shutil.copy2(wheel, staging / "wheels" / wheel.name)
    shutil.copy2(lock, staging / "requirements.lock")
    (staging / "dist").mkdir()
    shutil.copy2(project_wheel, staging / "dist" / project_wheel.name)
    shutil.copy2(Path(__file__).with_name("slim.py"), staging / "slim.py")
    (pip_wheel,) = (build_root / "usr/share/python-wheels").glob("pip-*.whl")
    python = f"{spec.PREFIX}/bin/python"
    pip = [python, f"/usr/share/python-wheels/{pip_wheel.name}/pip", "install", "--quiet", "--no-index"]
    pip += ["--no-cache-dir", "--no-compile", "--disable-pip-version-check", "--no-deps"]
    inside = f"/{_STAGING}"

    _chroot(build_root, [spec.PYTHON, "-m", "venv", "--without-pip", spec.PREFIX], epoch=epoch)
    _chroot(
        build_root,
        [*pip, "--require-hashes", "--find-links", f"{inside}/wheels", "--requirement", f"{inside}/requirements.lock"],
        epoch=epoch,
    )
    _chroot(build_root, [*pip, f"{inside}/dist/{project_wheel.name}"], epoch=epoch)
    _chroot(build_root, [python, f"{inside}/slim.py", spec.PREFIX], epoch=epoch)
    shutil.rmtree(staging)
    compile_tree(build_root, python, spec.PREFIX, epoch=epoch)


def compile_tree(root: Path, python: str, directory: str, *, epoch: int) -> None:
    """Compile every module under ``directory`` of ``root`` with ``root``'s interpreter.

    ``unchecked-hash`` pycs carry no timestamp (the same bytes on every build) and are never checked
    against their source: the image's files do not change. ``-f`` rewrites any pyc an import left.
    """
    command = [python, "-m", "compileall", "-q", "-f", "--invalidation-mode", "unchecked-hash", directory]
    _chroot(root, command, epoch=epoch)


def _chroot(root: Path, command: list[str], *, epoch: int) -> None:
    # A clean environment: the host's PIP_*, PYTHON* and proxy settings have no business in the image.
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
        "PIP_CONFIG_FILE": "/dev/null",
        "PYTHONDONTWRITEBYTECODE": "1",
        "SOURCE_DATE_EPOCH": str(epoch),
    }
    subprocess.run(["chroot", str(root), *command], check=True, env=env)


def _env_with_epoch(epoch: int) -> dict[str, str]:
    return {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}
