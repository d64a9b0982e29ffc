"""The listener pod runs with a read-only root filesystem (docs/controllers.md): the listener must write nothing
but its log to stdout. Proved on the process itself, as a pod runs it (a token kubeconfig with the listener
Role's permissions, compiled code, no ``/tmp`` of its own), through a Python audit hook that reports every file
the process opens for writing, creates, renames or removes, while it holds a session, scales for a job and stops."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import orjson
import pytest

from arc_scaleset.api.constants import EPHEMERAL_RUNNER_SETS
from arc_scaleset.kube.client import KubeClient
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.listener.conftest import GRACE_PERIOD, PAT, SCALE_SET_NAME, ListenerSim, listener_kubeconfig

pytestmark = pytest.mark.cluster

MARK = "AUDIT-WRITE"
# Runs the listener exactly as `arc-scaleset listener` does, with an audit hook installed first.
AUDITED_LISTENER = f"""
import os, sys
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_CHANGES = ("os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink", "os.link", "os.truncate",
            "os.chmod", "os.chown", "tempfile.mkstemp", "tempfile.mkdtemp")
def _hook(event, args):
    if event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITES)
        if writing:
            os.write(2, ("{MARK} open %r\\n" % (path,)).encode())
    elif event in _CHANGES:
        os.write(2, ("{MARK} %s %r\\n" % (event, args[0] if args else None)).encode())
sys.addaudithook(_hook)
from arc_scaleset.cli import main
sys.exit(main(["listener"]))
"""


async def test_the_listener_writes_no_file_while_it_holds_a_session_scales_for_a_job_and_stops(
    tmp_path: Path, cluster: TestCluster, kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim
) -> None:
    sim = listener_sim.sim
    config = tmp_path / "config.json"
    config.write_bytes(
        orjson.dumps(
            {
                "configure_url": listener_sim.config_url,
                "github_token": PAT,
                "ephemeral_runner_set_namespace": namespace,
                "ephemeral_runner_set_name": SCALE_SET_NAME,
                "max_runners": 5,
                "min_runners": 1,
                "runner_scale_set_id": listener_sim.scale_set_id,
                "runner_scale_set_name": SCALE_SET_NAME,
                "log_level": "debug",
                "log_format": "json",
                "metrics_addr": "127.0.0.1:0",
                "metrics_endpoint": "/metrics",
            }
        )
    )
    kubeconfig = await listener_kubeconfig(kube, cluster, namespace, tmp_path)
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("KUBECONFIG", "PYTHON"))}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        AUDITED_LISTENER,
        env={
            **environ,
            "LISTENER_CONFIG_PATH": str(config),
            "KUBECONFIG": str(kubeconfig),
            "HOSTNAME": "arc-runners-listener",
            # As in the image: code compiled at build time, nothing written when importing.
            "PYTHONDONTWRITEBYTECODE": "1",
        },
        cwd="/",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        assert process.stderr is not None
        stdout = asyncio.create_task(process.stdout.read())
        stderr = asyncio.create_task(process.stderr.read())

        async def replicas(wanted: int) -> bool:
            obj = await kube.get(EPHEMERAL_RUNNER_SETS, SCALE_SET_NAME, namespace=namespace)
            return bool((obj.get("spec") or {}).get("replicas") == wanted)

        await eventually(lambda: replicas(1), "the listener to publish its minimum")
        sim.state.enqueue_job(SCALE_SET_NAME, repository="octo-org/hello")
        await eventually(lambda: replicas(2), "the listener to scale for the job")
        process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), timeout=GRACE_PERIOD)
        out, err = await stdout, await stderr
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    writes = [line for line in err.decode(errors="replace").splitlines() if line.startswith(MARK)]
    assert code == 0, err.decode(errors="replace")[-2000:]
    assert writes == []
    assert b'"message session created"' in out, "the log goes to stdout"
