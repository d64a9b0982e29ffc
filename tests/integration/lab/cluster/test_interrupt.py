"""An interrupted test run (Ctrl-C, or the runner killed) leaves no control-plane process behind, and nothing in
memory: a Ctrl-C'd run removes its work directory (in /dev/shm) itself, a killed one's is removed by the next run."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from arc_scaleset_lab.cluster.localcluster import read_state
from arc_scaleset_lab.cluster.processes import pid_alive
from arc_scaleset_lab.harness.cluster import reap_abandoned_clusters
from arc_scaleset_lab.harness.waiting import eventually

TARGET = Path(__file__).with_name("interrupted_run.py")


def _sigint_as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def _start_run(tmp_path: Path) -> tuple[asyncio.subprocess.Process, dict[str, Any]]:
    pids_file = tmp_path / "pids.json"
    env = {k: v for k, v in os.environ.items() if k != "ARC_SCALESET_TEST_CLUSTER_DIR"}
    env["ARC_SCALESET_PIDS_FILE"] = str(pids_file)
    run = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=300", str(TARGET)),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        # A run started in the background by a shell without job control inherits SIGINT ignored, and Python
        # then never turns it into KeyboardInterrupt: the inner run gets the disposition a terminal gives.
        preexec_fn=_sigint_as_in_a_terminal,
    )

    async def started() -> bool:
        return pids_file.exists() and bool(pids_file.read_text())

    try:
        await eventually(started, timeout=120, what="the inner test run to start its control plane")
    except TimeoutError:
        run.kill()
        raise
    started_run: dict[str, Any] = json.loads(pids_file.read_text())
    return run, started_run


async def _assert_all_stopped(pids: dict[str, int]) -> None:
    async def none_alive() -> bool:
        return not any(pid_alive(pid) for pid in pids.values())

    await eventually(none_alive, timeout=30, what=f"control-plane processes {pids} to stop")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
async def test_interrupted_test_run_leaves_no_control_plane_process(tmp_path: Path, sig: signal.Signals) -> None:
    run, started = await _start_run(tmp_path)
    pids, workdir = started["pids"], Path(started["workdir"])
    etcd_data = Path(read_state(workdir)["etcd_data"])  # type: ignore[index]
    assert len(pids) == 5
    assert all(pid_alive(p) for p in pids.values())

    run.send_signal(sig)
    await asyncio.wait_for(run.wait(), timeout=120)

    await _assert_all_stopped(pids)
    if sig == signal.SIGKILL:
        # Killed, it could not clean up: the next run's start does (what the cluster fixture calls first). Another
        # test run starting on this machine meanwhile may have been that next run.
        reaped = reap_abandoned_clusters(workdir.parent)
        assert workdir in reaped or not _existing(workdir)
    assert _existing(workdir, etcd_data) == []


def _existing(*paths: Path) -> list[Path]:
    return [path for path in paths if path.exists()]
