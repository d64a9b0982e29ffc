"""``python -m image.build`` (``make image``): build the OCI image archive of arc-scaleset without Docker.

The same two stages as the Dockerfile: a build stage (Debian's python3.11 with venv and pip) installs the
locked dependencies and the project's wheel into /opt/arc-scaleset; a runtime stage (python3.11 and what it
links, no shell) receives that virtualenv, the CA bundle and a non-root user. Both stages are Debian
bookworm trees unpacked by mmdebstrap. The result is ``build/image/arc-scaleset-VERSION-ARCH.oci.tar``:

    skopeo copy oci-archive:build/image/arc-scaleset-0.1.0-amd64.oci.tar docker://REGISTRY/arc-scaleset:0.1.0

``--reuse`` returns the archive already built from the same inputs (the wheel's bytes, the lock, this
directory's code, the Debian sources, the architecture and SOURCE_DATE_EPOCH) instead of building again;
the tests use it. Without it, the image is always rebuilt (the Debian archive moves on with security
updates even when nothing here changed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from image import debian, oci, python_env, spec, tools

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements.lock"
DEFAULT_OUTPUT = REPO / "build" / "image"
LAYERS = ("debian", "dependencies", "application")
# When there is neither SOURCE_DATE_EPOCH nor a git commit (a source tarball): a fixed, documented time.
FALLBACK_EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z


@dataclass(frozen=True)
class BuiltImage:
    archive: Path
    version: str
    architecture: str
    manifest_digest: str
    size: int
    uncompressed_size: int
    seconds: float
    reused: bool


def source_date_epoch() -> int:
    """SOURCE_DATE_EPOCH, else the time of the checkout's last commit, else :data:`FALLBACK_EPOCH`."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    result = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%ct"], capture_output=True, text=True)
    return int(result.stdout.strip()) if result.returncode == 0 and result.stdout.strip() else FALLBACK_EPOCH


def git_revision() -> str:
    result = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else ""


def host_architecture() -> str:
    return subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True, text=True).stdout.strip()


def inputs_key(*, wheel: Path, architecture: str, epoch: int, revision: str) -> str:
    """A digest of everything the image is made from, but the Debian archive's state."""
    digest = hashlib.sha256()
    for part in (wheel.read_bytes(), LOCK.read_bytes()):
        digest.update(hashlib.sha256(part).digest())
    for source in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(source.name.encode() + hashlib.sha256(source.read_bytes()).digest())
    identity = [architecture, str(epoch), revision, *debian.sources(spec.SUITE)]
    digest.update("\n".join(identity).encode())
    return digest.hexdigest()


def build(*, output: Path = DEFAULT_OUTPUT, architecture: str | None = None, reuse: bool = False) -> BuiltImage:
    """Build (or, with ``reuse``, find) the image archive; see the module's documentation."""
    started = time.monotonic()
    tools.require_root("building the image")
    tools.ensure(tools.BUILD_TOOLS)
    architecture = architecture or host_architecture()
    if architecture not in python_env.WHEEL_MACHINE:
        raise SystemExit(f"image: no wheel platform known for Debian architecture {architecture!r}")
    epoch = source_date_epoch()
    revision = git_revision()
    output.mkdir(parents=True, exist_ok=True)
    wheel = python_env.build_wheel(REPO, output / "wheel", epoch=epoch)
    version = wheel.name.split("-")[1]
    stem = f"{spec.TITLE}-{version}-{architecture}"
    archive = output / f"{stem}.oci.tar"
    key = inputs_key(wheel=wheel, architecture=architecture, epoch=epoch, revision=revision)
    info_path = output / f"{stem}.json"
    if reuse and archive.is_file() and info_path.is_file():
        info = json.loads(info_path.read_text())
        if info.get("inputs") == key:
            return BuiltImage(
                archive=archive,
                version=version,
                architecture=architecture,
                manifest_digest=info["manifest_digest"],
                size=archive.stat().st_size,
                uncompressed_size=info["uncompressed_size"],
                seconds=time.monotonic() - started,
                reused=True,
            )

    with tempfile.TemporaryDirectory(prefix="arc-scaleset-image-", dir=output) as scratch:
        work = Path(scratch)
        print(f"image: Debian {spec.SUITE} ({architecture}) runtime and build stages", flush=True)
        unpacked = debian.extract(
            work / "runtime", spec.RUNTIME_PACKAGES, suite=spec.SUITE, architecture=architecture, epoch=epoch
        )
        runtime_packages = debian.remove_packages(work / "runtime", unpacked, spec.RUNTIME_REMOVED_PACKAGES)
        build_packages = debian.extract(
            work / "build", spec.BUILD_PACKAGES, suite=spec.SUITE, architecture=architecture, epoch=epoch
        )
        print("image: dependencies from requirements.lock, then the project's wheel", flush=True)
        wheels_dir = work / "wheels"
        wheels_dir.mkdir()
        wheels = python_env.download(LOCK, wheels_dir, architecture=architecture)
        python_env.install(work / "build", wheels=wheels, lock=LOCK, project_wheel=wheel, epoch=epoch)
        python_env.compile_tree(work / "runtime", spec.PYTHON, "/usr/lib/python3.11", epoch=epoch)
        root = work / "runtime"
        _assemble(root, work / "build", build_packages)
        recorded = sorted(
            [*runtime_packages, *(p for p in build_packages if p.name == "ca-certificates")], key=lambda p: p.name
        )
        debian.finish_runtime(root, recorded)
        print("image: layers and OCI archive", flush=True)
        app_files = _application_files(root)
        plan = oci.plan_layers(root, lambda path: _classify(path, app_files), LAYERS)
        blobs = work / "blobs"
        blobs.mkdir()
        layers = [oci.write_layer(root, plan[name], blobs, name=name, epoch=epoch) for name in LAYERS]
        labels = spec.labels(version=version, revision=revision, created=oci.rfc3339(epoch))
        config = image_config(architecture=architecture, labels=labels, layers=layers, epoch=epoch, packages=recorded)
        manifest = oci.write_archive(
            archive, layers=layers, config=config, annotations=labels, ref_name=version, blobs=blobs, epoch=epoch
        )
        uncompressed = sum(layer.uncompressed_size for layer in layers)
        _write_package_list(output / f"{stem}.packages.txt", recorded, wheels, wheel)

    seconds = time.monotonic() - started
    info = {
        "inputs": key,
        "manifest_digest": manifest.digest,
        "uncompressed_size": uncompressed,
        "layers": {layer.name: {"digest": layer.blob.digest, "size": layer.blob.size} for layer in layers},
        "build_seconds": round(seconds, 1),
    }
    info_path.write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    return BuiltImage(
        archive=archive,
        version=version,
        architecture=architecture,
        manifest_digest=manifest.digest,
        size=archive.stat().st_size,
        uncompressed_size=uncompressed,
        seconds=seconds,
        reused=False,
    )


def image_config(
    *, architecture: str, labels: dict[str, str], layers: list[oci.Layer], epoch: int, packages: list[debian.Package]
) -> dict[str, object]:
    created = oci.rfc3339(epoch)
    debian_list = ", ".join(spec.RUNTIME_PACKAGES)
    history = {
        "debian": f"mmdebstrap --variant=extract {spec.SUITE}: {debian_list} ({len(packages)} packages), CA bundle",
        "dependencies": f"python3.11 -m venv {spec.PREFIX}; pip install --require-hashes -r requirements.lock",
        "application": f"pip install --no-deps arc_scaleset-{labels['org.opencontainers.image.version']}.whl",
    }
    return {
        "created": created,
        "architecture": architecture,
        "os": "linux",
        "config": {
            "User": spec.USER,
            "Env": list(spec.ENV),
            "Entrypoint": list(spec.ENTRYPOINT),
            "Cmd": list(spec.CMD),
            "WorkingDir": spec.WORKDIR,
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        "history": [{"created": created, "created_by": history[layer.name]} for layer in layers],
    }


def _assemble(root: Path, build_root: Path, build_packages: list[debian.Package]) -> None:
    """Move what the build stage made into the runtime tree, and add the user and the CA bundle."""
    shutil.copytree(build_root / spec.PREFIX.lstrip("/"), root / spec.PREFIX.lstrip("/"), symlinks=True)
    certs = root / "etc/ssl/certs"
    certs.mkdir(parents=True, exist_ok=True)
    (certs / "ca-certificates.crt").write_bytes(debian.ca_bundle(build_root))
    copyright_dir = root / "usr/share/doc/ca-certificates"
    copyright_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(build_root / "usr/share/doc/ca-certificates/copyright", copyright_dir / "copyright")
    # No shell to log into: nologin names that, though the binary is not there either.
    (root / "etc/passwd").write_text(
        f"root:x:0:0:root:/root:/usr/sbin/nologin\nnonroot:x:{spec.UID}:{spec.GID}:nonroot:{spec.HOME}:/usr/sbin/nologin\n"
    )
    (root / "etc/group").write_text(f"root:x:0:\nnonroot:x:{spec.GID}:\n")
    home = root / spec.HOME.lstrip("/")
    home.mkdir(parents=True, exist_ok=True)
    os.chown(home, spec.UID, spec.GID)
    home.chmod(0o700)
    (root / "tmp").mkdir(exist_ok=True)
    (root / "tmp").chmod(0o1777)
    # The runtime makes /dev; the nodes mmdebstrap made for its own use stay out of the image.
    for entry in (root / "dev").iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _application_files(root: Path) -> set[str]:
    """The image paths of the project's own files: its wheel's RECORD, and the pycs of its modules."""
    site_packages = root / spec.PREFIX.lstrip("/") / "lib/python3.11/site-packages"
    (record,) = site_packages.glob(f"{spec.TITLE.replace('-', '_')}-*.dist-info/RECORD")
    relative_site = PurePosixPath(spec.PREFIX.lstrip("/")) / "lib/python3.11/site-packages"
    found: set[str] = set()
    for line in record.read_text().splitlines():
        name = line.rsplit(",", 2)[0]
        path = PurePosixPath(os.path.normpath(relative_site / name))
        found.add(str(path))
        if path.suffix == ".py":
            found.add(str(path.parent / "__pycache__" / f"{path.stem}.cpython-311.pyc"))
    return found


def _classify(path: str, application: set[str]) -> str:
    if not path.startswith(spec.PREFIX.lstrip("/")):
        return "debian"
    if path in application:
        return "application"
    return "dependencies"


def _write_package_list(path: Path, packages: list[debian.Package], wheels: list[Path], project: Path) -> None:
    lines = [f"debian {package.line}" for package in packages]
    lines += [f"python {'=='.join(wheel.name.split('-')[:2])}" for wheel in wheels]
    lines.append(f"python {'=='.join(project.name.split('-')[:2])} (this project)")
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m image.build", description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="directory of the archive")
    parser.add_argument("--architecture", help="Debian architecture (default: this machine's)")
    parser.add_argument("--reuse", action="store_true", help="keep an archive built from the same inputs")
    args = parser.parse_args(argv)
    try:
        built = build(output=args.output, architecture=args.architecture, reuse=args.reuse)
    except tools.ToolError as exc:
        print(f"image: {exc}", file=sys.stderr)
        return 1
    verb = "reused" if built.reused else f"built in {built.seconds:.0f} s"
    print(
        f"image: {built.archive} {verb}\n"
        f"  {spec.REPOSITORY}:{built.version} ({built.architecture}), manifest {built.manifest_digest}\n"
        f"  {built.size / 1e6:.1f} MB compressed, {built.uncompressed_size / 1e6:.1f} MB unpacked\n"
        f"  push: skopeo copy oci-archive:{built.archive} docker://{spec.REPOSITORY}:{built.version}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
