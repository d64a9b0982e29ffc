"""Root filesystems from Debian packages, made by ``mmdebstrap --variant=extract``.

The ``extract`` variant unpacks the named packages and their dependencies and runs no maintainer script,
so no shell has to be in the tree, nor is one put there: the runtime stage holds the interpreter and the
libraries it links, nothing that could run a script. What a maintainer script would have made (the CA
bundle, dpkg's database) is made here instead, from the packages' own data.

mmdebstrap honours ``SOURCE_DATE_EPOCH`` (it clamps the times of what it writes); what it cannot pin is the
archive's state: packages come from ``deb.debian.org`` as they are on the day of the build, security
updates included. For a bit-for-bit rebuild of an older image, point ``DEBIAN_MIRROR`` and
``DEBIAN_SECURITY_MIRROR`` at snapshot.debian.org at a fixed time: the packages it used are recorded in
the image (/var/lib/dpkg/status) and next to the archive.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"

_ARCHIVES = "var/cache/apt/archives"

# What the runtime image does not need: apt's state (it has no apt), files the host lent to the build
# (a container runtime provides its own), documentation other than the licences.
_REMOVED = (
    "etc/apt",
    "etc/hostname",
    "etc/resolv.conf",
    "var/cache/apt",
    "var/lib/apt",
    "var/log/apt",
    "var/lib/dpkg",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "usr/share/lintian",
    "usr/share/bug",
)


@dataclass(frozen=True)
class Package:
    """One Debian package unpacked into a tree: its control stanza as dpkg-deb printed it."""

    name: str
    version: str
    architecture: str
    control: str
    deb: Path

    @property
    def line(self) -> str:
        return f"{self.name} {self.version} {self.architecture}"


def sources(suite: str) -> list[str]:
    """The apt source lines of ``suite``: main, its updates and its security updates."""
    mirror = os.environ.get("DEBIAN_MIRROR", DEFAULT_MIRROR)
    security = os.environ.get("DEBIAN_SECURITY_MIRROR", DEFAULT_SECURITY_MIRROR)
    return [
        f"deb {mirror} {suite} main",
        f"deb {mirror} {suite}-updates main",
        f"deb {security} {suite}-security main",
    ]


def extract(target: Path, packages: tuple[str, ...], *, suite: str, architecture: str, epoch: int) -> list[Package]:
    """Unpack ``packages`` and their dependencies into the new directory ``target``; the packages used.

    Runs as root (mmdebstrap's ``root`` mode keeps file owners as the packages state them).
    """
    lines = sources(suite)
    command = [
        "mmdebstrap",
        "--quiet",
        "--mode=root",
        "--variant=extract",
        f"--architectures={architecture}",
        f"--include={','.join(packages)}",
        # The downloaded .deb files are the only record of what was unpacked (extract writes no dpkg
        # database); they are read, then removed, by the caller's cleanup.
        "--skip=cleanup/apt/cache",
    ]
    if any("snapshot.debian.org" in line for line in lines):
        # A snapshot's Release files expired long ago, by design.
        command.append("--aptopt=Acquire::Check-Valid-Until false")
    command += [suite, str(target), *lines]
    subprocess.run(command, check=True, env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch)})
    return unpacked_packages(target)


def unpacked_packages(root: Path) -> list[Package]:
    """The packages whose .deb files mmdebstrap left in ``root``'s apt cache, sorted by name."""
    found: list[Package] = []
    for deb in sorted((root / _ARCHIVES).glob("*.deb")):
        control = subprocess.run(["dpkg-deb", "--field", str(deb)], check=True, capture_output=True, text=True).stdout
        fields = dict(line.split(": ", 1) for line in control.splitlines() if ": " in line and not line.startswith(" "))
        found.append(Package(fields["Package"], fields["Version"], fields["Architecture"], control.strip(), deb))
    return sorted(found, key=lambda package: package.name)


def remove_packages(root: Path, packages: list[Package], names: tuple[str, ...]) -> list[Package]:
    """Delete from ``root`` the files (directories stay) of the packages ``names``; the packages left.

    For the dependencies that only maintainer scripts need (dpkg, tar, awk): the image runs none.
    """
    for package in packages:
        if package.name not in names:
            continue
        listing = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(package.deb)], check=True, capture_output=True)
        with tarfile.open(fileobj=io.BytesIO(listing.stdout)) as tar:
            for member in tar.getmembers():
                path = root / os.path.normpath(member.name)
                if not member.isdir() and (path.is_symlink() or path.exists()):
                    path.unlink()
    return [package for package in packages if package.name not in names]


def ca_bundle(build_root: Path) -> bytes:
    """The CA bundle update-ca-certificates would write from the ca-certificates package in ``build_root``
    (every certificate it ships, as its default configuration enables them all)."""
    certificates = sorted((build_root / "usr/share/ca-certificates").rglob("*.crt"))
    if not certificates:
        raise RuntimeError(f"no CA certificates under {build_root}/usr/share/ca-certificates")
    return b"".join(path.read_bytes().rstrip(b"\n") + b"\n" for path in certificates)


def finish_runtime(root: Path, packages: list[Package]) -> None:
    """Turn an extracted tree into the runtime stage's root: drop apt's state and documentation (keeping
    each package's copyright), and record the packages where scanners look for them."""
    for relative in _REMOVED:
        path = root / relative
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    _keep_only_copyrights(root / "usr/share/doc")
    status = root / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True)
    # dpkg's status format, which Trivy, Grype and Syft read to list an image's packages; the Status line
    # is what dpkg would have written once the package was configured.
    status.write_text("".join(f"{_with_status(package.control)}\n\n" for package in packages))


def _with_status(control: str) -> str:
    lines = control.splitlines()
    return "\n".join([lines[0], "Status: install ok installed", *lines[1:]])


def _keep_only_copyrights(doc: Path) -> None:
    if not doc.is_dir():
        return
    for package_dir in doc.iterdir():
        if package_dir.is_symlink() or not package_dir.is_dir():
            continue
        for entry in package_dir.iterdir():
            if entry.name == "copyright":
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
