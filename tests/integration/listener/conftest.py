"""Fixtures for the listener against the simulated GitHub (real loopback HTTP) and the real control plane.

- ``listener_sim``: a simulated GitHub with a PAT and one runner scale set (``SCALE_SET_NAME``), fast long
  polls (the sim answers an idle poll with 202 after ``LONG_POLL`` seconds).
- ``ers``: an EphemeralRunnerSet named ``SCALE_SET_NAME`` in the test's namespace (the CRDs installed).
- ``start_listener``: builds and runs the listener in-process (as ``arc-scaleset listener`` would), with
  short timeouts; every listener started is stopped, and its session deleted, at the end of the test.
- ``listener_process``: ``arc-scaleset listener`` as a pod runs it, a subprocess configured only by
  ``LISTENER_CONFIG_PATH``, killed at the end if still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from arc_scaleset.api.constants import EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS
from arc_scaleset.api.listener_config import ListenerConfig
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.controllers.autoscalinglistener.children import role_rules
from arc_scaleset.github import ActionsClient, PersonalAccessToken, SystemInfo, TransportOptions, parse_config_url
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.listener.app import ListenerApp, Timing, build_listener
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.helm import service_account_kubeconfig
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim.server import SimulatedGitHub
from arc_scaleset_lab.sim.state import SimConfig
from tests.paths import REPO_ROOT

GRACE_PERIOD = 60.0  # terminationGracePeriodSeconds of ARC's listener pod
PAT = "ghp_listener_integration_token_0123456789"
ORG = "octo-org"
SCALE_SET_NAME = "arc-runners"
LONG_POLL = 0.5

# Short bounds so that faults resolve in seconds; the ratios are those of production.
FAST = Timing(
    request_timeout=5.0,
    long_poll_timeout=3.0,
    client_retries=1,
    call_timeout=12.0,
    poll_timeout=6.0,
    session_delete_timeout=5.0,
    liveness_window=20.0,
)


@dataclass
class ListenerSim:
    sim: SimulatedGitHub
    scale_set_id: int
    config_url: str


@pytest.fixture
def sim_config() -> SimConfig:
    """The simulated service's knobs; a test overrides them by parametrizing ``sim_config``."""
    return SimConfig(long_poll_seconds=LONG_POLL)


@pytest.fixture
async def listener_sim(sim_config: SimConfig) -> AsyncIterator[ListenerSim]:
    async with await SimulatedGitHub.start(config=sim_config) as sim:
        sim.credentials.add_token(PAT)
        config_url = sim.config_url(ORG)
        async with admin_client(sim) as client:
            scale_set = await client.create_runner_scale_set(name=SCALE_SET_NAME, runner_group_id=1)
        yield ListenerSim(sim=sim, scale_set_id=scale_set.id, config_url=config_url)


def admin_client(sim: SimulatedGitHub) -> ActionsClient:
    """A client of the sim for the test itself (creating sessions, runners), separate from the listener's."""
    return ActionsClient(
        parse_config_url(sim.config_url(ORG)),
        PersonalAccessToken(PAT),
        system_info=SystemInfo(subsystem="listener-test"),
        transport=TransportOptions(request_timeout=5.0),
        long_poll_timeout=3.0,
    )


def listener_config(env: ListenerSim, namespace: str, **overrides: Any) -> ListenerConfig:
    document: dict[str, Any] = {
        "configure_url": env.config_url,
        "vault_type": "",
        "vault_lookup_key": "",
        "github_app_id": "",
        "github_app_installation_id": 0,
        "github_app_private_key": "",
        "github_token": PAT,
        "ephemeral_runner_set_namespace": namespace,
        "ephemeral_runner_set_name": SCALE_SET_NAME,
        "max_runners": 10,
        "min_runners": 0,
        "runner_scale_set_id": env.scale_set_id,
        "runner_scale_set_name": SCALE_SET_NAME,
        "server_root_ca": "",
        "log_level": "debug",
        "log_format": "text",
        "metrics_addr": "",
        "metrics_endpoint": "",
        "metrics": None,
    }
    document.update(overrides)
    return ListenerConfig.from_document(document)


@pytest.fixture
async def ers(kube: KubeClient, namespace: str, crds_installed: list[str], listener_sim: ListenerSim) -> str:
    await kube.create(
        EPHEMERAL_RUNNER_SETS,
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "EphemeralRunnerSet",
            "metadata": {"name": SCALE_SET_NAME, "namespace": namespace},
            "spec": {
                "patchID": 0,
                "ephemeralRunnerSpec": runner_spec(listener_sim),
            },
        },
    )
    return SCALE_SET_NAME


def runner_spec(env: ListenerSim) -> dict[str, Any]:
    return {
        "githubConfigUrl": env.config_url,
        "githubConfigSecret": "github-config",
        "runnerScaleSetId": env.scale_set_id,
        "spec": {"containers": [{"name": "runner", "image": "ghcr.io/actions/actions-runner:latest"}]},
    }


async def create_runner(kube: KubeClient, namespace: str, env: ListenerSim, name: str) -> None:
    await kube.create(
        EPHEMERAL_RUNNERS,
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "EphemeralRunner",
            "metadata": {"name": name, "namespace": namespace},
            "spec": runner_spec(env),
        },
    )


@dataclass
class RunningListener:
    app: ListenerApp
    task: asyncio.Task[int]
    acquired: list[int] = field(default_factory=list)

    async def stop(self) -> int:
        self.app.stop.set()
        return await asyncio.wait_for(self.task, timeout=30)


StartListener = Callable[..., Awaitable[RunningListener]]


@pytest.fixture
async def start_listener(kube: KubeClient) -> AsyncIterator[StartListener]:
    running: list[RunningListener] = []

    async def start(
        config: ListenerConfig, *, owner: str = "listener-pod-0", timing: Timing = FAST, clock: Clock = REAL_CLOCK
    ) -> RunningListener:
        app = build_listener(config, kube=kube, owner=owner, timing=timing, clock=clock)
        handle = RunningListener(app=app, task=asyncio.create_task(app.run()))
        # Record what each acquisition returned, to prove no runner request is ever acquired twice.
        acquire = app.actions.acquire_jobs

        async def recording_acquire(*args: Any, **kwargs: Any) -> list[int]:
            result = await acquire(*args, **kwargs)
            handle.acquired.extend(result)
            return result

        app.actions.acquire_jobs = recording_acquire  # type: ignore[method-assign]
        running.append(handle)
        return handle

    yield start
    for handle in running:
        if not handle.task.done():
            await handle.stop()
        await handle.app.aclose()


async def ers_spec(kube: KubeClient, namespace: str) -> dict[str, Any]:
    obj = await kube.get(EPHEMERAL_RUNNER_SETS, SCALE_SET_NAME, namespace=namespace)
    spec: dict[str, Any] = obj["spec"]
    return spec


async def wait_for_replicas(kube: KubeClient, namespace: str, replicas: int, *, within: float = 20.0) -> dict[str, Any]:
    """Wait until the ERS's ``spec.replicas`` (absent = 0) equals ``replicas``; return the spec."""

    async def matching() -> dict[str, Any] | None:
        spec = await ers_spec(kube, namespace)
        return spec if spec.get("replicas", 0) == replicas else None

    result: dict[str, Any] = await eventually(matching, timeout=within, what=f"ERS replicas == {replicas}")
    return result


class ListenerProcess:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[dict[str, Any]] = []

    async def read_until(self, message: str, *, within: float = 30.0) -> dict[str, Any]:
        """Read JSON log lines until one with ``msg == message``; return it."""
        assert self.process.stdout is not None
        async with asyncio.timeout(within):
            while True:
                raw = await self.process.stdout.readline()
                if not raw:
                    raise AssertionError(f"listener exited before logging {message!r}: {self.lines[-5:]}")
                try:
                    line = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                self.lines.append(line)
                if line.get("msg") == message:
                    return dict(line)


async def listener_kubeconfig(
    kube: KubeClient,
    cluster: TestCluster,
    namespace: str,
    directory: Path,
    *,
    extra_rules: Sequence[Mapping[str, Any]] = (),
) -> Path:
    """A kubeconfig authenticating as a ServiceAccount with exactly the listener Role (and ``extra_rules``), as in
    its pod: RBAC is the tenant boundary, so a listener that needs more fails here."""
    name = "listener"
    await kube.create(resources.SERVICE_ACCOUNTS, {"metadata": {"name": name}}, namespace=namespace)
    rules = [*role_rules(SCALE_SET_NAME), *extra_rules]
    await kube.create(resources.ROLES, {"metadata": {"name": name}, "rules": rules}, namespace=namespace)
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    await kube.create(resources.ROLE_BINDINGS, binding, namespace=namespace)
    return await service_account_kubeconfig(kube, cluster.kubeconfig, namespace, name, directory)


@contextlib.asynccontextmanager
async def listener_process(
    tmp_path: Path,
    cluster: TestCluster,
    env: ListenerSim,
    namespace: str,
    *,
    owner: str = "arc-runners-listener",
    kubeconfig: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> AsyncIterator[ListenerProcess]:
    """``owner`` is the pod's hostname: the session owner name (the same for a pod and its replacement).
    ``kubeconfig``: the cluster admin's unless given; ``environ``: more of the pod's environment."""
    config = {
        "configure_url": env.config_url,
        "vault_type": "",
        "github_token": PAT,
        "ephemeral_runner_set_namespace": namespace,
        "ephemeral_runner_set_name": SCALE_SET_NAME,
        "max_runners": 5,
        "min_runners": 0,
        "runner_scale_set_id": env.scale_set_id,
        "runner_scale_set_name": SCALE_SET_NAME,
        "server_root_ca": "",
        "log_level": "info",
        "log_format": "json",
        "metrics_addr": "127.0.0.1:0",
        "metrics_endpoint": "/metrics",
        "metrics": None,
    }
    path = tmp_path / "config.json"
    path.write_bytes(orjson.dumps(config))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "arc_scaleset.cli",
        "listener",
        env={
            **os.environ,
            "LISTENER_CONFIG_PATH": str(path),
            "KUBECONFIG": str(kubeconfig or cluster.kubeconfig),
            "HOSTNAME": owner,
            **(environ or {}),
        },
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    handle = ListenerProcess(process)
    try:
        yield handle
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
