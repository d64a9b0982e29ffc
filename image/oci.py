"""OCI image layout, written and read with the standard library: reproducible layers, the config, the
manifest, the index, and the archive ``skopeo copy oci-archive:FILE docker://...`` pushes.

Reproducible means: the same root filesystem and ``epoch`` give the same bytes. Entries are sorted by
path; times are clamped to ``epoch`` (SOURCE_DATE_EPOCH); owners are numeric with no names; gzip headers
carry no time or file name; JSON is written with sorted keys and no spaces. (Compressed bytes also depend
on the host's zlib; the uncompressed layer digests, the config's ``diff_ids``, do not.)

Layers, from the least to the most often changed, so that a new release pushes only the last one:
``debian`` (the runtime stage), ``dependencies`` (the virtualenv with the locked packages), ``application``
(the project's own files, as its wheel's RECORD lists them).
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import json
import os
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
REF_NAME = "org.opencontainers.image.ref.name"


@dataclass(frozen=True)
class Blob:
    """A content-addressed file: where it is, its digest and size."""

    path: Path
    digest: str
    size: int

    def descriptor(self, media_type: str, **extra: Any) -> dict[str, Any]:
        return {"mediaType": media_type, "digest": self.digest, "size": self.size, **extra}


@dataclass(frozen=True)
class Layer:
    name: str
    blob: Blob
    diff_id: str  # digest of the uncompressed tar
    entries: int
    uncompressed_size: int


@dataclass(frozen=True)
class ImageConfig:
    """The parts of an image's config a runtime uses."""

    architecture: str
    user: str
    entrypoint: list[str]
    cmd: list[str]
    env: list[str]
    working_dir: str
    labels: dict[str, str]
    diff_ids: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> ImageConfig:
        config = document.get("config") or {}
        return cls(
            architecture=document["architecture"],
            user=config.get("User", ""),
            entrypoint=list(config.get("Entrypoint") or []),
            cmd=list(config.get("Cmd") or []),
            env=list(config.get("Env") or []),
            working_dir=config.get("WorkingDir", ""),
            labels=dict(config.get("Labels") or {}),
            diff_ids=list(document["rootfs"]["diff_ids"]),
        )

    def environment(self) -> dict[str, str]:
        return dict(entry.split("=", 1) for entry in self.env)


def canonical_json(document: Any) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def rfc3339(epoch: int) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Sink(Protocol):
    def write(self, data: bytes, /) -> object: ...


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through to ``target``."""

    def __init__(self, target: _Sink) -> None:
        self.target = target
        self.sha256 = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = data if isinstance(data, bytes) else bytes(data)
        self.sha256.update(chunk)
        self.size += len(chunk)
        self.target.write(chunk)
        return len(chunk)


def _walk(root: Path) -> Iterator[str]:
    """Every path under ``root``, relative, in the order a tar stream needs (a directory before its entries)."""
    for directory, dirnames, filenames in os.walk(root):
        relative = Path(directory).relative_to(root)
        for name in [*dirnames, *filenames]:
            yield (relative / name).as_posix()


def _ancestors(path: str) -> Iterator[str]:
    parent = PurePosixPath(path).parent
    while str(parent) != ".":
        yield str(parent)
        parent = parent.parent


def plan_layers(root: Path, classify: Callable[[str], str], names: tuple[str, ...]) -> dict[str, list[str]]:
    """Group the paths under ``root`` by layer name (``classify`` names one for each path, directories
    included); each layer also gets the directories above its entries, so that it unpacks on its own."""
    planned: dict[str, set[str]] = {name: set() for name in names}
    for path in _walk(root):
        full = root / path
        if full.is_dir() and not full.is_symlink() and any(True for _ in full.iterdir()):
            continue  # a directory goes with what is in it
        layer = planned[classify(path)]
        layer.add(path)
        layer.update(_ancestors(path))
    return {name: sorted(paths) for name, paths in planned.items()}


def write_layer(root: Path, paths: list[str], dest: Path, *, name: str, epoch: int) -> Layer:
    """Write the tar.gz of ``paths`` (sorted, relative to ``root``) into ``dest``; the layer's blob."""
    with tempfile.NamedTemporaryFile(dir=dest, delete=False) as raw:
        compressed = _Hashing(raw)
        with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, mtime=0, compresslevel=6) as gz:
            uncompressed = _Hashing(gz)
            with tarfile.open(fileobj=uncompressed, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for path in paths:
                    _add(tar, root, path, epoch)
    digest = f"sha256:{compressed.sha256.hexdigest()}"
    blob_path = dest / compressed.sha256.hexdigest()
    os.replace(raw.name, blob_path)
    return Layer(
        name=name,
        blob=Blob(blob_path, digest, compressed.size),
        diff_id=f"sha256:{uncompressed.sha256.hexdigest()}",
        entries=len(paths),
        uncompressed_size=uncompressed.size,
    )


def _add(tar: tarfile.TarFile, root: Path, path: str, epoch: int) -> None:
    full = root / path
    info = tar.gettarinfo(str(full), arcname=path)
    if info.type in (tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE):
        return  # device nodes are the runtime's to make
    info.mtime = min(int(info.mtime), epoch)
    info.uname = info.gname = ""
    info.pax_headers = {}
    if info.isreg():
        with full.open("rb") as data:
            tar.addfile(info, data)
    else:
        tar.addfile(info)


def write_blob(dest: Path, data: bytes) -> Blob:
    digest = hashlib.sha256(data).hexdigest()
    path = dest / digest
    path.write_bytes(data)
    return Blob(path, f"sha256:{digest}", len(data))


def write_archive(
    archive: Path,
    *,
    layers: list[Layer],
    config: dict[str, Any],
    annotations: dict[str, str],
    ref_name: str,
    blobs: Path,
    epoch: int,
) -> Blob:
    """Write the OCI archive (a tar of an image layout) of one image; the manifest's blob."""
    config_blob = write_blob(blobs, canonical_json(config))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": config_blob.descriptor(CONFIG),
        "layers": [layer.blob.descriptor(LAYER) for layer in layers],
        "annotations": annotations,
    }
    manifest_blob = write_blob(blobs, canonical_json(manifest))
    platform = {"architecture": config["architecture"], "os": config["os"]}
    index = {
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [manifest_blob.descriptor(MANIFEST, platform=platform, annotations={REF_NAME: ref_name})],
    }
    members: list[tuple[str, Path | bytes | None]] = [
        ("blobs", None),
        ("blobs/sha256", None),
        *sorted((f"blobs/sha256/{blob.path.name}", blob.path) for blob in _all(layers, config_blob, manifest_blob)),
        ("index.json", canonical_json(index)),
        ("oci-layout", canonical_json({"imageLayoutVersion": "1.0.0"})),
    ]
    partial = archive.with_name(archive.name + ".partial")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, content in members:
            info = tarfile.TarInfo(name)
            info.mtime = epoch
            if content is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif isinstance(content, bytes):
                info.size, info.mode = len(content), 0o644
                tar.addfile(info, io.BytesIO(content))
            else:
                info.size, info.mode = content.stat().st_size, 0o644
                with content.open("rb") as data:
                    tar.addfile(info, data)
    os.replace(partial, archive)
    return manifest_blob


def _all(layers: list[Layer], *blobs: Blob) -> list[Blob]:
    return [*(layer.blob for layer in layers), *blobs]


@dataclass(frozen=True)
class ArchivedImage:
    """An image read back from an OCI archive."""

    manifest_digest: str
    manifest: dict[str, Any]
    config: ImageConfig
    ref_name: str


def read_archive(archive: Path) -> ArchivedImage:
    """The one image of an OCI archive: its manifest and config (digests checked)."""
    with tarfile.open(archive) as tar:
        index = json.loads(_member(tar, "index.json"))
        (entry,) = index["manifests"]
        manifest = json.loads(_blob(tar, entry["digest"]))
        config = json.loads(_blob(tar, manifest["config"]["digest"]))
    return ArchivedImage(
        manifest_digest=entry["digest"],
        manifest=manifest,
        config=ImageConfig.from_json(config),
        ref_name=(entry.get("annotations") or {}).get(REF_NAME, ""),
    )


def unpack(archive: Path, dest: Path) -> ArchivedImage:
    """Unpack the image's layers, in order, into the empty directory ``dest`` (as root: owners kept)."""
    image = read_archive(archive)
    with tarfile.open(archive) as tar:
        for layer in image.manifest["layers"]:
            data = _blob(tar, layer["digest"])
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as layer_tar:
                if any(PurePosixPath(m.name).name.startswith(".wh.") for m in layer_tar.getmembers()):
                    raise ValueError(f"layer {layer['digest']} has whiteouts, which unpack does not apply")
                layer_tar.extractall(dest, numeric_owner=True, filter=_contained_keeping_modes)
    return image


def _contained_keeping_modes(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo:
    # The "tar" filter refuses anything that would land outside ``dest`` (through absolute symlinks such as
    # /usr/lib/ssl/certs -> /etc/ssl/certs, a later member could otherwise write into the host); its
    # clearing of sticky and setuid bits is undone, since /tmp must stay 1777.
    checked = tarfile.tar_filter(member, path)
    return checked.replace(mode=member.mode, deep=False)


def _member(tar: tarfile.TarFile, name: str) -> bytes:
    handle = tar.extractfile(name)
    if handle is None:
        raise ValueError(f"{name} is not a file in the archive")
    return handle.read()


def _blob(tar: tarfile.TarFile, digest: str) -> bytes:
    algorithm, _, hexdigest = digest.partition(":")
    data = _member(tar, f"blobs/{algorithm}/{hexdigest}")
    if hashlib.new(algorithm, data).hexdigest() != hexdigest:
        raise ValueError(f"blob {digest} does not match its digest")
    return data
