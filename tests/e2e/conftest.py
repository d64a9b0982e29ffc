"""The end-to-end suite's system: one control plane, simulated GitHub, controller manager and node agent,
all separate processes, shared by every test in ``tests/e2e`` (package scope: stopped before other suites
run, so its controller never meets their objects).

- ``cluster`` (tests/conftest.py): the run's one control plane, shared with the integration suite.
- ``system``: :class:`arc_scaleset_lab.harness.system.System` with the controller watching one scale-set
  namespace (``system_namespace``) -- on a shared cluster it must not reconcile other tests' scale sets --
  and a controller namespace of its own; a watch records every JIT config the controller writes into
  ``system.ledger``; at the end the logs of every process are searched for every recorded secret.
- ``scale_set``: a factory of AutoscalingRunnerSets (one per test, named after the test), deleted after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.secret_scan import JitConfigCollector, find_leaks
from arc_scaleset_lab.harness.system import System, SystemOptions
from tests.e2e.harness import ScaleSetFactory, ScaleSetHandle

RUN_ID = uuid.uuid4().hex[:6]
SCALE_SET_NAMESPACE = f"e2e-{RUN_ID}"


@pytest.fixture(scope="package")
async def system(cluster: TestCluster, request: pytest.FixtureRequest) -> AsyncIterator[System]:
    workdir = Path(tempfile.mkdtemp(prefix="arc-scaleset-e2e-"))
    options = SystemOptions(
        controller_namespace=f"arc-e2e-{RUN_ID}",
        watch_namespace=SCALE_SET_NAMESPACE,
        long_poll_seconds=2.0,
        session_timeout=10.0,  # a SIGKILLed listener never releases its session; the next one takes it over
        log_level="debug",  # the most a log can say: the secrets check is strongest at this level
    )
    running = System(workdir, kubeconfig=cluster.kubeconfig, options=options)
    await running.start()
    collector = JitConfigCollector(running.kube, running.ledger)
    collecting = asyncio.create_task(collector.run(), name="jit-config-collector")
    try:
        await running.ensure_namespace(SCALE_SET_NAMESPACE, labels={"arc-scaleset.dev/test": "true"})
        yield running
    finally:
        collecting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await collecting
        await running.stop()
    # After the stop: the listeners' and the controller's last words are in the logs too.
    leaks = find_leaks(running.log_files(), running.ledger)
    assert not leaks, "secrets found in logs:\n" + "\n".join(map(str, leaks[:20]))
    if request.session.testsfailed:
        print(f"\ne2e logs kept in {running.log_dir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
async def scale_set(system: System, request: pytest.FixtureRequest) -> AsyncIterator[ScaleSetFactory]:
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower()).strip("-")
    factory = ScaleSetFactory(system, namespace=SCALE_SET_NAMESPACE, stem=stem[:30].strip("-"))
    try:
        yield factory
    finally:
        await factory.delete_all()


__all__ = ["ScaleSetHandle"]
