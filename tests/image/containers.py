"""Running the unpacked image as a container with runc (Debian's), the way a kubelet's runtime would.

Each container gets the image's user, entrypoint, environment and working directory from its config, a
read-only root filesystem, no capabilities, its own PID, mount, IPC and UTS namespaces and a tmpfs on /tmp
(the controller chart mounts an emptyDir there). It shares the host's network namespace, so that the
simulated GitHub and the API server on 127.0.0.1 are reachable as they would be through a Service.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from image.oci import ImageConfig


@dataclass(frozen=True)
class Mount:
    """A host directory bind-mounted read-only into the container (as a Secret or a projected token is)."""

    source: Path
    destination: str


def runtime_spec(
    bundle: Path,
    *,
    rootfs: Path,
    config: ImageConfig,
    args: Sequence[str],
    command: Sequence[str] | None,
    env: Mapping[str, str],
    mounts: Sequence[Mount],
) -> dict[str, Any]:
    """The OCI runtime spec for one process of the image: runc's defaults, then the image's config.

    ``command`` replaces the entrypoint (Kubernetes' ``command``), ``args`` the image's Cmd (``args``).
    """
    subprocess.run(["runc", "spec", "--bundle", str(bundle)], check=True)
    spec: dict[str, Any] = json.loads((bundle / "config.json").read_text())
    uid, _, gid = config.user.partition(":")
    process = spec["process"]
    process["terminal"] = False
    process["user"] = {"uid": int(uid), "gid": int(gid or uid)}
    process["args"] = [*(config.entrypoint if command is None else command), *args]
    process["env"] = [f"{k}={v}" for k, v in {**config.environment(), **env}.items()]
    process["cwd"] = config.working_dir or "/"
    # What Kubernetes' "restricted" pod security standard asks of a container: every capability dropped.
    process["capabilities"] = {kind: [] for kind in ("bounding", "effective", "permitted", "ambient")}
    process["noNewPrivileges"] = True
    spec["root"] = {"path": str(rootfs), "readonly": True}
    spec["hostname"] = "arc-scaleset"
    spec["linux"]["namespaces"] = [ns for ns in spec["linux"]["namespaces"] if ns["type"] != "network"]
    spec["mounts"].append(
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]}
    )
    for mount in mounts:
        spec["mounts"].append(
            {"destination": mount.destination, "type": "bind", "source": str(mount.source), "options": ["rbind", "ro"]}
        )
    return spec


@dataclass
class Container:
    id: str
    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)

    async def host_pid(self) -> int:
        """The PID of the container's first process, as the host sees it."""
        state = await _runc("state", self.id)
        pid: int = json.loads(state)["pid"]
        return pid

    async def uids(self) -> tuple[int, int, int, int]:
        """Real, effective, saved and filesystem uid of the container's process, from the host's /proc."""
        return _uids(await self.host_pid())

    async def read_json_until(self, message: str, *, within: float = 60.0) -> dict[str, Any]:
        """Read the container's stdout, JSON log lines, until one whose ``msg`` is ``message``."""
        assert self.process.stdout is not None
        async with asyncio.timeout(within):
            while True:
                raw = await self.process.stdout.readline()
                if not raw:
                    raise AssertionError(f"the container exited before logging {message!r}: {self.lines[-10:]}")
                self.lines.append(raw.decode(errors="replace").rstrip())
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(line, dict) and line.get("msg") == message:
                    return line

    async def stop(self, *, within: float = 60.0) -> int:
        """SIGTERM the container's process (as a kubelet does) and return its exit code."""
        await _runc("kill", self.id, "TERM")
        return await asyncio.wait_for(self.process.wait(), timeout=within)


@contextlib.asynccontextmanager
async def running(
    rootfs: Path,
    config: ImageConfig,
    work: Path,
    *,
    args: Sequence[str] = (),
    command: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    mounts: Sequence[Mount] = (),
) -> AsyncIterator[Container]:
    """Run the image's process in a container; kill and delete it on the way out, whatever happened."""
    container_id = f"arc-scaleset-test-{uuid.uuid4().hex[:12]}"
    bundle = work / container_id
    bundle.mkdir()
    spec = runtime_spec(bundle, rootfs=rootfs, config=config, args=args, command=command, env=env or {}, mounts=mounts)
    (bundle / "config.json").write_text(json.dumps(spec))
    process = await asyncio.create_subprocess_exec(
        "runc", "run", "--bundle", str(bundle), container_id, stdout=asyncio.subprocess.PIPE
    )
    try:
        yield Container(container_id, process)
    finally:
        if process.returncode is None:
            with contextlib.suppress(subprocess.CalledProcessError):
                await _runc("kill", container_id, "KILL")
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGKILL)
            await process.wait()
        with contextlib.suppress(subprocess.CalledProcessError):
            await _runc("delete", "--force", container_id)


async def run_to_completion(
    rootfs: Path,
    config: ImageConfig,
    work: Path,
    *,
    args: Sequence[str] = (),
    command: Sequence[str] | None = None,
    within: float = 60.0,
) -> tuple[int, str]:
    """Run the image's process to its end; its exit code and stdout."""
    async with running(rootfs, config, work, args=args, command=command) as container:
        assert container.process.stdout is not None
        stdout = await asyncio.wait_for(container.process.stdout.read(), timeout=within)
        code = await asyncio.wait_for(container.process.wait(), timeout=within)
    return code, stdout.decode()


def _uids(pid: int) -> tuple[int, int, int, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    (line,) = (entry for entry in status.splitlines() if entry.startswith("Uid:"))
    real, effective, saved, filesystem = (int(value) for value in line.split()[1:])
    return real, effective, saved, filesystem


async def _runc(*args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        "runc", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await process.communicate()
    if process.returncode != 0:
        raise subprocess.CalledProcessError(process.returncode or 1, ["runc", *args], stdout, stderr)
    return stdout.decode()
