"""``arc-scaleset cluster up|status|down --dir DIR`` as a user types it, with a directory relative to where
they stand: the cluster comes up, its kubeconfig works from anywhere, and ``down`` leaves no process.

A relative ``--dir`` used to put relative certificate paths into the kubeconfig, which kwok (and any
client not started in that directory) could not read, so ``up`` failed waiting for the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest
import yaml

from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset_lab.cluster import binaries
from arc_scaleset_lab.cluster.localcluster import NODE_NAME, read_state, stop_recorded
from arc_scaleset_lab.cluster.processes import pid_alive
from arc_scaleset_lab.harness.waiting import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

ARC_SCALESET = Path(sys.executable).with_name("arc-scaleset")
COMPONENTS = {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}


async def _arc_scaleset(*args: str, cwd: Path, timeout: float = 180) -> str:
    """Run ``arc-scaleset *args`` in ``cwd``; its output, asserting it exited 0."""
    process = await asyncio.create_subprocess_exec(
        str(ARC_SCALESET), *args, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    text = output.decode()
    assert process.returncode == 0, f"arc-scaleset {' '.join(args)} exited {process.returncode}:\n{text}"
    return text


def _files_named_in(kubeconfig: Path) -> list[Path]:
    """The CA, client certificate and client key files a kubeconfig names."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    return [Path(cluster["certificate-authority"]), Path(user["client-certificate"]), Path(user["client-key"])]


def _kill_leftovers(pids: dict[str, int]) -> None:
    """SIGKILL recorded PIDs that still run one of our binaries (a PID reused by another program is spared)."""
    bin_dir = str(binaries.bin_dir())
    for pid in pids.values():
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(bin_dir.encode()):
                os.kill(pid, signal.SIGKILL)


async def test_cluster_up_with_a_relative_dir_works_from_anywhere_and_down_leaves_no_process(tmp_path: Path) -> None:
    if not binaries.is_built():
        pytest.fail(f"control-plane binaries not built in {binaries.bin_dir()}: run `make cluster-binaries`")
    workdir = tmp_path / "rel" / "dir"
    pids: dict[str, int] = {}
    try:
        await _arc_scaleset("cluster", "up", "--dir", "rel/dir", cwd=tmp_path)
        state = read_state(workdir)
        assert state is not None, f"no state.json in {workdir}"
        pids = dict(state["pids"])
        assert set(pids) == COMPONENTS

        status = await _arc_scaleset("cluster", "status", "--dir", "rel/dir", cwd=tmp_path)
        assert f"KUBECONFIG={workdir / 'kubeconfig'}" in status, status
        for component in COMPONENTS:
            assert any(line.split()[:1] == [component] and "running" in line for line in status.splitlines()), status

        kubeconfig = Path(state["kubeconfig"])
        assert kubeconfig == workdir / "kubeconfig"
        files = _files_named_in(kubeconfig)
        assert len(files) == 3
        assert all(f.is_absolute() for f in files), files
        assert all(f.is_file() for f in files), files

        # This test runs in another directory than `cluster up` did: the kubeconfig must work from here.
        assert Path.cwd() != tmp_path
        kube = KubeClient.from_kubeconfig(kubeconfig)
        try:
            await kube.get(resources.NAMESPACES, "default")
            node = await kube.get(resources.NODES, NODE_NAME)
        finally:
            await kube.close()
        # kwok read the same kubeconfig: the node it manages is Ready.
        assert [c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"] == ["True"], node["status"]

        down = await _arc_scaleset("cluster", "down", "--dir", "rel/dir", cwd=tmp_path)
        assert all(component in down for component in COMPONENTS), down

        def none_running() -> bool:
            return not any(pid_alive(pid) for pid in pids.values())

        await eventually(none_running, timeout=30, what=f"the cluster's processes {pids} to end")
        assert read_state(workdir) is None
    finally:
        if read_state(workdir) is not None:
            stop_recorded(workdir)
        _kill_leftovers(pids)
