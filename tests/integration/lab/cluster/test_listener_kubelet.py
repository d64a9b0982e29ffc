"""The listener kubelet: a listener pod on a kwok node becomes a real ``arc-scaleset listener`` process.

Each test writes by hand what the AutoscalingListener controller would create -- the config Secret, the
ServiceAccount with its Role and RoleBinding, the pod -- and talks to a simulated GitHub over loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from arc_scaleset.api.constants import EPHEMERAL_RUNNER_SETS
from arc_scaleset.github import ActionsClient, PersonalAccessToken, SystemInfo, TransportOptions, parse_config_url
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import NotFound
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.node.listener_kubelet import ListenerKubelet, ListenerProcess
from arc_scaleset_lab.sim.server import SimulatedGitHub
from arc_scaleset_lab.sim.state import SimConfig

pytestmark = pytest.mark.cluster

PAT = "ghp_listener_kubelet_token_0123456789abcdef"
ORG = "octo-org"
SCALE_SET = "kubelet-runners"
POD = "kubelet-runners-abc12345-listener"
MIN_RUNNERS = 2
UNKNOWN_SCALE_SET_ID = 987654


@dataclass
class Scene:
    sim: SimulatedGitHub
    scale_set_id: int
    namespace: str
    kubelet: ListenerKubelet
    log_dir: Path


@pytest.fixture
async def sim() -> AsyncIterator[tuple[SimulatedGitHub, int]]:
    async with await SimulatedGitHub.start(config=SimConfig(long_poll_seconds=0.5)) as github:
        github.credentials.add_token(PAT)
        client = ActionsClient(
            parse_config_url(github.config_url(ORG)),
            PersonalAccessToken(PAT),
            system_info=SystemInfo(subsystem="listener-kubelet-test"),
            transport=TransportOptions(request_timeout=5.0),
        )
        async with client:
            scale_set = await client.create_runner_scale_set(name=SCALE_SET, runner_group_id=1)
        yield github, scale_set.id


@pytest.fixture
async def scene(
    cluster: TestCluster,
    kube: KubeClient,
    namespace: str,
    crds_installed: list[str],
    sim: tuple[SimulatedGitHub, int],
    tmp_path: Path,
) -> Scene:
    github, scale_set_id = sim
    await kube.create(
        EPHEMERAL_RUNNER_SETS,
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "EphemeralRunnerSet",
            "metadata": {"name": SCALE_SET, "namespace": namespace},
            "spec": {
                "patchID": 0,
                "ephemeralRunnerSpec": {
                    "githubConfigUrl": github.config_url(ORG),
                    "githubConfigSecret": "github-config",
                    "runnerScaleSetId": scale_set_id,
                    "spec": {"containers": [{"name": "runner", "image": "ghcr.io/actions/actions-runner:latest"}]},
                },
            },
        },
    )
    await create_listener_rbac(kube, namespace)
    log_dir = tmp_path / "listeners"
    kubelet = ListenerKubelet(kubeconfig=cluster.kubeconfig, namespace=namespace, log_dir=log_dir)
    return Scene(sim=github, scale_set_id=scale_set_id, namespace=namespace, kubelet=kubelet, log_dir=log_dir)


@contextlib.asynccontextmanager
async def running(kubelet: ListenerKubelet) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(kubelet.run())
    try:
        yield task
    finally:
        kubelet.request_stop()
        await asyncio.wait_for(task, timeout=90)


async def create_listener_rbac(kube: KubeClient, namespace: str) -> None:
    """The listener's ServiceAccount, Role and RoleBinding as the AutoscalingListener controller makes them."""
    await kube.create(resources.SERVICE_ACCOUNTS, {"metadata": {"name": POD, "namespace": namespace}})
    await kube.create(
        resources.ROLES,
        {
            "metadata": {"name": POD, "namespace": namespace},
            "rules": [
                {
                    "apiGroups": ["actions.github.com"],
                    "resources": ["ephemeralrunnersets"],
                    "resourceNames": [SCALE_SET],
                    "verbs": ["patch"],
                },
                {
                    "apiGroups": ["actions.github.com"],
                    "resources": ["ephemeralrunners", "ephemeralrunners/status"],
                    "verbs": ["patch"],
                },
            ],
        },
    )
    await kube.create(
        resources.ROLE_BINDINGS,
        {
            "metadata": {"name": POD, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": POD},
            "subjects": [{"kind": "ServiceAccount", "name": POD, "namespace": namespace}],
        },
    )


async def create_listener_pod(kube: KubeClient, scene: Scene, *, scale_set_id: int | None = None) -> str:
    """The config Secret and the listener pod (ARC's shape); returns the pod's UID."""
    config = {
        "configure_url": scene.sim.config_url(ORG),
        "vault_type": "",
        "vault_lookup_key": "",
        "github_app_id": "",
        "github_app_installation_id": 0,
        "github_app_private_key": "",
        "github_token": PAT,
        "ephemeral_runner_set_namespace": scene.namespace,
        "ephemeral_runner_set_name": SCALE_SET,
        "max_runners": 10,
        "min_runners": MIN_RUNNERS,
        "runner_scale_set_id": scale_set_id or scene.scale_set_id,
        "runner_scale_set_name": SCALE_SET,
        "server_root_ca": "",
        "log_level": "debug",
        "log_format": "json",
        "metrics_addr": ":8080",
        "metrics_endpoint": "/metrics",
        "metrics": None,
    }
    await kube.create(
        resources.SECRETS,
        {
            "metadata": {"name": f"{POD}-config", "namespace": scene.namespace},
            "stringData": {"config.json": orjson.dumps(config).decode()},
        },
    )
    pod = await kube.create(
        resources.PODS,
        {
            "metadata": {
                "name": POD,
                "namespace": scene.namespace,
                "labels": {
                    "app.kubernetes.io/component": "runner-scale-set-listener",
                    "app.kubernetes.io/part-of": "gha-runner-scale-set-controller",
                },
            },
            "spec": {
                "serviceAccountName": POD,
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 60,
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "containers": [
                    {
                        "name": "listener",
                        "image": "ghcr.io/actions/gha-runner-scale-set-controller:0.14.2",
                        "command": ["/ghalistener"],
                        "env": [{"name": "LISTENER_CONFIG_PATH", "value": "/etc/gha-listener/config.json"}],
                        "ports": [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}],
                        "volumeMounts": [
                            {"name": "listener-config", "mountPath": "/etc/gha-listener", "readOnly": True}
                        ],
                    }
                ],
                "volumes": [{"name": "listener-config", "secret": {"secretName": f"{POD}-config"}}],
            },
        },
    )
    return str(pod["metadata"]["uid"])


async def wait_for_process(kubelet: ListenerKubelet, *, within: float = 30.0) -> ListenerProcess:
    async def started() -> ListenerProcess | None:
        return kubelet.processes.get(POD)

    process: ListenerProcess = await eventually(started, timeout=within, what=f"a listener process for {POD}")
    return process


async def wait_for_session(sim: SimulatedGitHub, *, within: float = 30.0) -> None:
    await sim.changes.wait_until(
        lambda: any(session.owner == POD for session in sim.state.sessions.values()), within=within
    )


async def ers_replicas(kube: KubeClient, namespace: str) -> int:
    obj = await kube.get(EPHEMERAL_RUNNER_SETS, SCALE_SET, namespace=namespace)
    return int((obj.get("spec") or {}).get("replicas") or 0)


async def pod_or_none(kube: KubeClient, namespace: str) -> dict[str, Any] | None:
    try:
        return await kube.get(resources.PODS, POD, namespace=namespace)
    except NotFound:
        return None


async def test_a_listener_pod_runs_as_a_process_with_its_service_account_and_scales_the_runner_set(
    kube: KubeClient, scene: Scene
) -> None:
    async with running(scene.kubelet):
        await create_listener_pod(kube, scene)
        process = await wait_for_process(scene.kubelet)
        assert process.credentials == f"service account {scene.namespace}/{POD}"
        await wait_for_session(scene.sim)

        async def scaled() -> bool:
            return await ers_replicas(kube, scene.namespace) == MIN_RUNNERS

        # Only the listener's own token could have done this patch: the kubelet never touches the ERS.
        await eventually(scaled, timeout=30, what=f"ERS replicas == {MIN_RUNNERS} patched by the listener")
        assert process.metrics_port is not None
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{process.metrics_port}/metrics") as response,
        ):
            assert response.status == 200
            assert "gha_min_runners" in await response.text()
    log_text = (scene.log_dir / f"{POD}.log").read_text()
    assert f"pod {scene.namespace}/{POD}" in log_text
    assert PAT not in log_text


async def test_deleting_the_pod_stops_the_process_and_its_session_is_deleted_before_the_pod_is_gone(
    kube: KubeClient, scene: Scene
) -> None:
    async with running(scene.kubelet):
        await create_listener_pod(kube, scene)
        process = await wait_for_process(scene.kubelet)
        await wait_for_session(scene.sim)
        await kube.delete(resources.PODS, POD, namespace=scene.namespace)

        async def pod_gone() -> bool:
            return await pod_or_none(kube, scene.namespace) is None

        # As on a real node, the pod stays Terminating until its process has stopped within the grace period (kwok
        # leaves the removal of a pod the lab kubelet runs to that kubelet): the session is gone before the pod.
        await eventually(pod_gone, timeout=60, what="the deleted listener pod to be removed")
        assert not scene.sim.state.sessions, "the pod was removed before its listener had deleted its session"
        assert any(r.route == "delete_session" and r.status == 204 for r in scene.sim.requests)

        # The kubelet removes the pod and then marks its worker stopped, once the answer to that DELETE is in: this
        # test's GET, answered 404 meanwhile, may come back first. The process itself is reaped before the removal.
        def forgotten() -> bool:
            return POD not in scene.kubelet.processes

        await eventually(forgotten, timeout=10, what="the kubelet to forget the stopped listener process")
        assert process.pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(process.pid, 0)


async def test_a_listener_that_exits_non_zero_leaves_the_pod_failed_with_its_exit_code(
    kube: KubeClient, scene: Scene
) -> None:
    async with running(scene.kubelet):
        uid = await create_listener_pod(kube, scene, scale_set_id=UNKNOWN_SCALE_SET_ID)

        async def failed() -> dict[str, Any] | None:
            pod = await pod_or_none(kube, scene.namespace)
            return pod if pod and (pod.get("status") or {}).get("phase") == "Failed" else None

        pod = await eventually(failed, timeout=60, what="the listener pod to be Failed")
        (status,) = pod["status"]["containerStatuses"]
        assert status["name"] == "listener"
        assert status["state"]["terminated"]["exitCode"] == 1
        assert status["state"]["terminated"]["reason"] == "Error"
        assert pod["metadata"]["uid"] == uid
        # restartPolicy Never: the kubelet does not start it again; the controller replaces the pod.
        assert POD not in scene.kubelet.processes
    assert not scene.sim.state.sessions


async def test_when_token_request_fails_the_listener_falls_back_to_the_admin_kubeconfig(
    kube: KubeClient, scene: Scene, caplog: pytest.LogCaptureFixture
) -> None:
    await create_listener_pod(kube, scene)
    await kube.delete(resources.SERVICE_ACCOUNTS, POD, namespace=scene.namespace)
    async with running(scene.kubelet):
        process = await wait_for_process(scene.kubelet)
        assert process.credentials == "admin kubeconfig"
        await wait_for_session(scene.sim)
    assert "TokenRequest for service account" in caplog.text


async def test_stopping_the_kubelet_stops_every_listener_and_their_sessions_are_deleted(
    kube: KubeClient, scene: Scene
) -> None:
    async with running(scene.kubelet):
        await create_listener_pod(kube, scene)
        await wait_for_process(scene.kubelet)
        await wait_for_session(scene.sim)
    assert scene.kubelet.processes == {}
    assert not scene.sim.state.sessions
    pod = await pod_or_none(kube, scene.namespace)
    # A kubelet going away is not the listener exiting: the pod's status is left alone.
    assert pod is not None
    assert pod["status"]["phase"] == "Running"
