"""A shared listener (group mode) against the simulated GitHub over real HTTP and the real API server: one process,
one member listener per key of the group's config Secret, each with its own session and its own scale set."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from arc_scaleset.api.constants import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import ANNOTATION_LISTENER_STATE
from arc_scaleset.api.listener_config import ListenerConfig
from arc_scaleset.api.listener_state import ListenerState
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.resources import SECRETS
from arc_scaleset.listener.group import SharedListener
from arc_scaleset.listener.group_member import MemberContext
from arc_scaleset.listener.stop import StopSignal
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim.server import SimulatedGitHub
from arc_scaleset_lab.sim.state import SimConfig
from tests.integration.listener.conftest import (
    FAST,
    GRACE_PERIOD,
    LONG_POLL,
    ORG,
    PAT,
    ListenerProcess,
    ListenerSim,
    admin_client,
    listener_config,
)
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.cluster

GROUP_SECRET = "arc-shared-listener-0123456789"
SETS = ("set-a", "set-b", "set-c", "set-d")


@dataclass
class Group:
    """The simulated GitHub with one scale set per name of :data:`SETS`, their EphemeralRunnerSets, and the
    shared listener (started by :meth:`start`) serving the config Secret :data:`GROUP_SECRET`."""

    sim: SimulatedGitHub
    kube: KubeClient
    namespace: str
    scale_set_ids: dict[str, int]
    listener: SharedListener | None = None
    context: MemberContext | None = None
    stop: StopSignal = field(default_factory=StopSignal)
    task: asyncio.Task[None] | None = None

    def config(self, name: str, **overrides: object) -> ListenerConfig:
        env = ListenerSim(sim=self.sim, scale_set_id=self.scale_set_ids[name], config_url=self.sim.config_url(ORG))
        return listener_config(
            env,
            self.namespace,
            ephemeral_runner_set_name=name,
            runner_scale_set_name=name,
            **overrides,
        )

    async def write_secret(self, configs: dict[str, ListenerConfig | None]) -> None:
        """Set (a config) or remove (``None``) these keys of the group's Secret, creating it if need be."""
        data = {name: None if c is None else base64.b64encode(c.to_json()).decode() for name, c in configs.items()}
        try:
            await self.kube.patch(SECRETS, GROUP_SECRET, {"data": data}, namespace=self.namespace)
        except NotFound:
            body = {"metadata": {"name": GROUP_SECRET}, "data": {k: v for k, v in data.items() if v is not None}}
            await self.kube.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", **body}, namespace=self.namespace)

    def start(self) -> SharedListener:
        context = self.context = MemberContext(kube=self.kube, owner="arc-shared-listener-pod", timing=FAST)
        self.listener = SharedListener(self.kube, secret=GROUP_SECRET, namespace=self.namespace, context=context)
        self.task = asyncio.create_task(self.listener.run(self.stop))
        return self.listener

    def session_of(self, name: str) -> str | None:
        session = self.sim.state.sessions.get(self.scale_set_ids[name])
        return session.id if session is not None else None

    def enqueue(self, name: str, count: int) -> None:
        for _ in range(count):
            self.sim.state.enqueue_job(name, repository="octo-org/hello")

    async def replicas(self, name: str) -> int:
        obj = await self.kube.get(EPHEMERAL_RUNNER_SETS, name, namespace=self.namespace)
        return int(obj["spec"].get("replicas", 0))

    async def state(self, name: str) -> ListenerState | None:
        obj = await self.kube.get(EPHEMERAL_RUNNER_SETS, name, namespace=self.namespace)
        return ListenerState.from_annotation((obj["metadata"].get("annotations") or {}).get(ANNOTATION_LISTENER_STATE))


@pytest.fixture
async def group(kube: KubeClient, namespace: str, crds_installed: list[str]) -> AsyncIterator[Group]:
    async with await SimulatedGitHub.start(config=SimConfig(long_poll_seconds=LONG_POLL)) as sim:
        sim.credentials.add_token(PAT)
        ids: dict[str, int] = {}
        async with admin_client(sim) as client:
            for name in SETS:
                ids[name] = (await client.create_runner_scale_set(name=name, runner_group_id=1)).id
        for name in SETS:
            await kube.create(
                EPHEMERAL_RUNNER_SETS,
                {
                    "apiVersion": "actions.github.com/v1alpha1",
                    "kind": "EphemeralRunnerSet",
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {
                        "patchID": 0,
                        "ephemeralRunnerSpec": {
                            "githubConfigUrl": sim.config_url(ORG),
                            "githubConfigSecret": "github-config",
                            "runnerScaleSetId": ids[name],
                            "spec": {"containers": [{"name": "runner", "image": "runner:latest"}]},
                        },
                    },
                },
            )
        handle = Group(sim=sim, kube=kube, namespace=namespace, scale_set_ids=ids)
        try:
            yield handle
        finally:
            handle.stop.set()
            if handle.task is not None:
                await asyncio.wait_for(handle.task, timeout=30)
            if handle.context is not None:
                await handle.context.http.aclose()


async def all_sessions(group: Group, names: tuple[str, ...]) -> dict[str, str]:
    async def held() -> dict[str, str] | None:
        sessions = {name: group.session_of(name) for name in names}
        return {k: v for k, v in sessions.items() if v} if all(sessions.values()) else None

    result: dict[str, str] = await eventually(held, timeout=20, what=f"sessions of {names}")
    return result


async def wait_for_replicas(group: Group, wanted: dict[str, int]) -> None:
    async def reached() -> bool:
        return all([await group.replicas(name) == count for name, count in wanted.items()])

    await eventually(reached, timeout=20, what=f"replicas {wanted}")


async def test_three_members_in_one_process_hold_their_own_sessions_and_publish_their_own_desired_counts(
    group: Group,
) -> None:
    names = ("set-a", "set-b", "set-c")
    await group.write_secret({name: group.config(name) for name in names})
    group.start()
    sessions = await all_sessions(group, names)
    assert len(set(sessions.values())) == 3
    assert {group.sim.state.sessions[group.scale_set_ids[n]].owner for n in names} == {"arc-shared-listener-pod"}
    group.enqueue("set-a", 1)
    group.enqueue("set-b", 2)
    group.enqueue("set-c", 3)
    await wait_for_replicas(group, {"set-a": 1, "set-b": 2, "set-c": 3})
    assert await group.replicas("set-d") == 0  # not a member: nobody scales it
    listener = group.listener
    assert listener is not None
    assert listener.live()[0]
    assert listener.ready() == (True, "3 of 3 members hold a message session")
    assert group.context is not None
    assert len(group.context.http) == 1  # the members' GitHub connections: one pool, as their CA is the same


async def test_a_member_removed_from_the_secret_has_its_session_deleted_while_the_others_keep_theirs(
    group: Group,
) -> None:
    names = ("set-a", "set-b", "set-c")
    await group.write_secret({name: group.config(name) for name in names})
    group.start()
    before = await all_sessions(group, names)
    await group.write_secret({"set-b": None})
    await group.sim.changes.wait_until(lambda: group.session_of("set-b") is None, within=20)
    assert any(r.route == "delete_session" and r.status == 204 for r in group.sim.requests)
    assert {name: group.session_of(name) for name in ("set-a", "set-c")} == {
        "set-a": before["set-a"],
        "set-c": before["set-c"],
    }
    # The others still serve their sets after the change.
    group.enqueue("set-c", 2)
    await wait_for_replicas(group, {"set-c": 2})
    assert group.session_of("set-b") is None


async def test_a_member_whose_token_is_refused_keeps_failing_alone_while_the_others_scale(
    group: Group, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="arc_scaleset.listener")
    await group.write_secret(
        {
            "set-a": group.config("set-a"),
            "set-b": group.config("set-b", github_token="ghp_refused_token_000000000000000000"),
            "set-c": group.config("set-c"),
        }
    )
    listener = group.start()
    await all_sessions(group, ("set-a", "set-c"))

    async def refused_and_retried() -> ListenerState | None:
        state = await group.state("set-b")
        return state if state is not None and state.last_error_class else None

    state = await eventually(refused_and_retried, timeout=20, what="set-b's state names its error")
    assert state.last_error_class == "Unauthorized"
    group.enqueue("set-a", 2)
    group.enqueue("set-c", 1)
    await wait_for_replicas(group, {"set-a": 2, "set-c": 1})
    assert group.session_of("set-b") is None
    assert listener.members["set-b"].session_held is False
    assert listener.live()[0]

    def restarted() -> bool:  # the member is started again with the listener's backoff, not given up
        return any(r.getMessage().startswith("listener member stopped; starting it again") for r in caplog.records)

    await eventually(restarted, timeout=45, what="set-b to be started again")
    assert group.session_of("set-a") is not None


async def test_a_member_added_later_starts_without_touching_the_others(group: Group) -> None:
    await group.write_secret({name: group.config(name) for name in ("set-a", "set-b")})
    group.start()
    before = await all_sessions(group, ("set-a", "set-b"))
    creates = sum(1 for r in group.sim.requests if r.route == "create_session")
    await group.write_secret({"set-d": group.config("set-d")})
    after = await all_sessions(group, ("set-a", "set-b", "set-d"))
    assert {name: after[name] for name in ("set-a", "set-b")} == before
    assert sum(1 for r in group.sim.requests if r.route == "create_session") == creates + 1
    assert not any(r.route == "delete_session" for r in group.sim.requests)
    group.enqueue("set-d", 2)
    await wait_for_replicas(group, {"set-d": 2})


async def test_a_member_whose_config_changes_is_replaced_and_the_others_keep_their_sessions(group: Group) -> None:
    await group.write_secret({name: group.config(name) for name in ("set-a", "set-b")})
    listener = group.start()
    before = await all_sessions(group, ("set-a", "set-b"))
    await group.write_secret({"set-b": group.config("set-b", min_runners=2)})
    await wait_for_replicas(group, {"set-b": 2})
    after = await all_sessions(group, ("set-a", "set-b"))
    assert after["set-a"] == before["set-a"]
    assert listener.members["set-b"].config is not None
    assert listener.members["set-b"].config.min_runners == 2


async def test_an_unreadable_member_config_waits_for_a_new_value_without_touching_the_others(group: Group) -> None:
    await group.write_secret({"set-a": group.config("set-a")})
    listener = group.start()
    before = await all_sessions(group, ("set-a",))
    broken = base64.b64encode(b'{"configure_url": 7').decode()
    await group.kube.patch(SECRETS, GROUP_SECRET, {"data": {"set-b": broken}}, namespace=group.namespace)
    await eventually(lambda: "set-b" in listener.members, timeout=20, what="set-b to be a member")
    assert listener.members["set-b"].config is None
    assert "invalid listener configuration" in listener.members["set-b"].config_error
    assert group.session_of("set-b") is None
    await group.write_secret({"set-b": group.config("set-b")})  # fixed: the member is replaced and starts
    after = await all_sessions(group, ("set-a", "set-b"))
    assert after["set-a"] == before["set-a"]


async def test_the_process_serves_every_member_on_one_metrics_endpoint_and_sigterm_deletes_every_session(
    group: Group, cluster: TestCluster
) -> None:
    names = ("set-a", "set-b", "set-c")
    metrics = {"metrics_addr": "127.0.0.1:0", "metrics_endpoint": "/metrics", "log_format": "json"}
    await group.write_secret({name: group.config(name, max_runners=4, **metrics) for name in names})
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "arc_scaleset.cli",
        "listener",
        env={
            **{k: v for k, v in os.environ.items() if k != "LISTENER_CONFIG_PATH"},
            "LISTENER_GROUP_SECRET": GROUP_SECRET,
            "LISTENER_GROUP_NAMESPACE": group.namespace,
            "KUBECONFIG": str(cluster.kubeconfig),
            "HOSTNAME": "arc-shared-listener-pod",
        },
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    listener = ListenerProcess(process)
    try:
        port = (await listener.read_until("shared listener serving metrics"))["port"]
        await all_sessions(group, names)
        group.enqueue("set-b", 2)
        await wait_for_replicas(group, {"set-b": 2})
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
                assert response.status == 200
                text = await response.text()
            async with http.get(f"http://127.0.0.1:{port}/healthz") as response:
                assert response.status == 200
            async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                assert response.status == 200
        process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), timeout=GRACE_PERIOD)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert code == 0
    assert not group.sim.state.sessions
    assert sum(1 for r in group.sim.requests if r.route == "delete_session" and r.status == 204) == 3
    families = {family.name: family for family in text_string_to_metric_families(text)}
    max_runners = {s.labels["name"]: s.value for s in families["gha_max_runners"].samples}
    assert max_runners == {"set-a": 4, "set-b": 4, "set-c": 4}
    assert {s.labels["namespace"] for s in families["gha_max_runners"].samples} == {group.namespace}
    assert text.count("# TYPE gha_max_runners gauge") == 1
    assert not any(sample.name.endswith("_created") for family in families.values() for sample in family.samples)
