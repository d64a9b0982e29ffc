"""The Debian tools the image build and its tests use, installed with apt-get when missing (CI starts on a
fresh machine; Debian bookworm, as root)."""

from __future__ import annotations

import os
import shutil
import subprocess

# command -> the Debian package that provides it
BUILD_TOOLS = {"mmdebstrap": "mmdebstrap", "dpkg-deb": "dpkg", "chroot": "coreutils"}
# runc runs the image as a container in the tests; skopeo reads the archive as users will push it.
TEST_TOOLS = {"runc": "runc", "skopeo": "skopeo"}


class ToolError(RuntimeError):
    """A tool is missing and cannot be installed here."""


def require_root(what: str, *, because: str = "mmdebstrap's root mode, chroot, runc") -> None:
    """Raise :class:`ToolError` naming ``what`` and why it needs root, unless this process is root."""
    if os.geteuid() != 0:
        raise ToolError(f"{what} needs root ({because}): run it with sudo")


def ensure(tools: dict[str, str]) -> None:
    """Install the packages of the ``tools`` not on PATH; raise :class:`ToolError` when that fails."""
    missing = sorted({package for command, package in tools.items() if shutil.which(command) is None})
    if not missing:
        return
    if shutil.which("apt-get") is None:
        raise ToolError(f"missing {', '.join(missing)} and no apt-get to install them (a Debian host is expected)")
    require_root(f"installing {', '.join(missing)}", because="apt-get installs packages")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"image: installing {' '.join(missing)} with apt-get", flush=True)
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], check=True, env=env)
    still = sorted(command for command in tools if shutil.which(command) is None)
    if still:
        raise ToolError(f"apt-get installed {', '.join(missing)} but {', '.join(still)} is still not on PATH")
