"""The end-to-end suite's system: one control plane, simulated GitHub, controller manager and node agent,
all separate processes, shared by every test in ``tests/e2e`` (package scope: stopped before other suites
run, so its controller never meets their objects).

- ``cluster`` (tests/conftest.py): the run's one control plane, shared with the integration suite.
- ``system``: :class:`arc_scaleset_lab.harness.system.System` with the controller watching one scale-set
  namespace (``system_namespace``) -- on a shared cluster it must not reconcile other tests' scale sets --
  and a controller namespace of its own; a watch records every JIT config the controller writes into
  ``system.ledger``; at the end the logs of every process are searched for every recorded secret.
- ``scale_set``: a factory of AutoscalingRunnerSets (one per test, named after the test), deleted after it.
- ``metrics_system``: a system of the test module's own with listener metrics on (the shared one turns them off:
  its listeners share one machine's ports); its scale-set namespace is ``options.watch_namespace``.
- ``prometheus_bin``: Prometheus built from its Go module (cached beside the control plane; built on first use).
- ``chromium``: headless Chromium for the demo's HTML report (Debian's package, installed with apt-get when missing,
  as the image's tests install their tools: root, as CI is; a non-root run outside CI skips its test).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from arc_scaleset_lab.cluster import prometheus_binary
from arc_scaleset_lab.harness import browser
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.secret_scan import JitConfigCollector, find_leaks
from arc_scaleset_lab.harness.system import System, SystemOptions
from image import tools
from tests.e2e.harness import ScaleSetFactory, ScaleSetHandle, started_system

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


@pytest.fixture(scope="module")
async def metrics_system(cluster: TestCluster, request: pytest.FixtureRequest) -> AsyncIterator[System]:
    stem = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_e2e_").replace("_", "-")[:20]
    namespace = f"e2e-{stem}-{RUN_ID}"
    workdir = Path(tempfile.mkdtemp(prefix=f"arc-scaleset-e2e-{stem}-"))
    options = SystemOptions(
        controller_namespace=f"arc-{namespace}",
        watch_namespace=namespace,
        long_poll_seconds=2.0,
        controller_args=("--listener-metrics-addr=:8080",),  # after the harness's "=0": the last one wins
    )
    try:
        async with started_system(
            workdir, kubeconfig=cluster.kubeconfig, namespace=namespace, options=options
        ) as running:
            yield running
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
async def prometheus_bin() -> Path:
    return await asyncio.to_thread(prometheus_binary.build)


@pytest.fixture(scope="session")
def chromium() -> str:
    if shutil.which(browser.COMMAND) is None and os.geteuid() != 0 and not os.environ.get("CI"):
        pytest.skip(
            f"headless Chromium is missing and installing it needs root: sudo apt-get install {browser.PACKAGE}"
        )
    tools.ensure({browser.COMMAND: browser.PACKAGE})
    return browser.COMMAND


__all__ = ["ScaleSetHandle"]
