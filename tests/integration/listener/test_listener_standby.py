"""The standby listener (docs/listener.md, "Standby listener"; issue 30): two ``arc-scaleset listener`` processes,
as the pair of pods runs them, against the real control plane and the simulated GitHub, each with only the
listener Role and the standby's grants (get/watch/update on the Lease, get/list/watch on the two pods, by name).

The pods are plain Pod objects nothing schedules (a scheduling gate); the test writes their status as a kubelet
would: running, then, after a SIGKILL, the listener container terminated.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from arc_scaleset.api.constants import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import ANNOTATION_LISTENER_STATE, LISTENER_CONTAINER_NAME
from arc_scaleset.api.listener_standby import (
    PEER_POD_ENV,
    STANDBY_LEASE_ENV,
    peer_of,
    standby_lease_name,
    standby_pod_names,
)
from arc_scaleset.api.listener_state import ListenerPhase, ListenerState
from arc_scaleset.kube.client import KubeClient, PatchType
from arc_scaleset.kube.resources import LEASES, PODS
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.node.listener_kubelet import terminated_status_patch
from arc_scaleset_lab.sim.state import JobState, SimConfig
from tests.integration.listener.conftest import (
    GRACE_PERIOD,
    LONG_POLL,
    SCALE_SET_NAME,
    ListenerProcess,
    ListenerSim,
    listener_kubeconfig,
    listener_process,
    wait_for_replicas,
)

pytestmark = pytest.mark.cluster

TOKEN_TTL = 85.0
"""Admin tokens of this life in the token test: the standby replaces its own 75 s before expiry (every 10 s)."""

LISTENER_POD = "arc-runners-listener"
PAIR = standby_pod_names(LISTENER_POD)
LEASE = standby_lease_name(LISTENER_POD)
IMAGE = "ghcr.io/actions/gha-runner-scale-set-controller:0.9.3"


def standby_rules() -> list[dict[str, Any]]:
    """The grants the AutoscalingListener controller adds to the listener Role for a pair (api/listener_standby.py)."""
    return [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE],
         "verbs": ["get", "watch", "update"]},
        {"apiGroups": [""], "resources": ["pods"], "resourceNames": list(PAIR), "verbs": ["get", "list", "watch"]},
    ]  # fmt: skip


def rfc3339_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def create_pod(kube: KubeClient, namespace: str, name: str) -> None:
    """A listener pod nothing schedules, reported running as its kubelet would."""
    body = {
        "metadata": {"name": name},
        "spec": {
            "schedulingGates": [{"name": "arc-scaleset.dev/test"}],
            "containers": [{"name": LISTENER_CONTAINER_NAME, "image": IMAGE}],
        },
    }
    await kube.create(PODS, body, namespace=namespace)
    running = {"running": {"startedAt": rfc3339_now()}}
    status = {
        "phase": "Running",
        "containerStatuses": [{"name": LISTENER_CONTAINER_NAME, "image": IMAGE, "imageID": "", "ready": True,
                               "started": True, "restartCount": 0, "state": running}],
    }  # fmt: skip
    await kube.patch(PODS, name, {"status": status}, namespace=namespace, subresource="status")


async def mark_killed(kube: KubeClient, namespace: str, name: str) -> None:
    """What the kubelet writes within about a second of the container's SIGKILL."""
    pod = await kube.get(PODS, name, namespace=namespace)
    patch = terminated_status_patch(pod, -signal.SIGKILL, finished_at=rfc3339_now())
    await kube.patch(PODS, name, patch, namespace=namespace, subresource="status", patch_type=PatchType.STRATEGIC)


async def create_lease(kube: KubeClient, namespace: str, spec: dict[str, Any]) -> None:
    await kube.create(LEASES, {"metadata": {"name": LEASE}, "spec": spec}, namespace=namespace)


async def lease_holder(kube: KubeClient, namespace: str) -> str:
    lease = await kube.get(LEASES, LEASE, namespace=namespace)
    return str(lease["spec"].get("holderIdentity") or "")


class Pumped:
    """A listener process whose JSON log is read as it comes (so that its pipe never fills)."""

    def __init__(self, handle: ListenerProcess) -> None:
        self.handle = handle
        self.process = handle.process
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while raw := await self.process.stdout.readline():
            with contextlib.suppress(orjson.JSONDecodeError):
                self.handle.lines.append(orjson.loads(raw))

    def logged(self, message: str) -> dict[str, Any] | None:
        return next((line for line in self.handle.lines if line.get("msg") == message), None)

    async def wait_logged(self, message: str, *, timeout: float = 30.0) -> dict[str, Any]:
        async def found() -> dict[str, Any] | None:
            return self.logged(message)

        result: dict[str, Any] = await eventually(found, timeout=timeout, what=f"the log line {message!r}")
        return result

    async def probe(self, path: str) -> tuple[int, str]:
        port = (await self.wait_logged("listener starting"))["ports"][0]
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}{path}") as response:
            return response.status, await response.text()

    async def close(self) -> None:
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)


Start = Callable[[str], contextlib.AbstractAsyncContextManager[Pumped]]


@pytest.fixture
async def pair(
    tmp_path: Path, cluster: TestCluster, kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim
) -> Start:
    """Starts the listener of one pod of the pair, as that pod runs it (its name, its peer, the restricted Role)."""
    kubeconfig = await listener_kubeconfig(kube, cluster, namespace, tmp_path, extra_rules=standby_rules())
    for name in PAIR:
        await create_pod(kube, namespace, name)

    @contextlib.asynccontextmanager
    async def start(name: str) -> AsyncIterator[Pumped]:
        environ = {STANDBY_LEASE_ENV: LEASE, PEER_POD_ENV: peer_of(name, LISTENER_POD)}
        async with listener_process(
            tmp_path, cluster, listener_sim, namespace, owner=name, kubeconfig=kubeconfig, environ=environ
        ) as handle:
            pumped = Pumped(handle)
            try:
                yield pumped
            finally:
                if pumped.process.returncode is None:
                    pumped.process.kill()
                    await pumped.process.wait()
                await pumped.close()

    return start


def owner_of(process: Pumped) -> str:
    """The pod a listener runs as (its session owner and Lease identity)."""
    return str(process.logged("listener starting")["owner"])  # type: ignore[index]


def rss_mib(process: Pumped) -> float:
    """The process's resident memory (the kernel's VmRSS), for the printed figures."""
    status = Path(f"/proc/{process.process.pid}/status").read_text()
    kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(kib) / 1024


def routes(sim: Any, route: str, *, after: float = 0.0) -> list[Any]:
    return [r for r in sim.requests if r.route == route and r.at > after]


async def active_of(kube: KubeClient, namespace: str, one: Pumped, other: Pumped) -> tuple[Pumped, Pumped]:
    """(the active listener, the standby), once one of them holds a session: the Lease's holder says which."""

    async def a_session() -> dict[str, Any] | None:
        return one.logged("message session created") or other.logged("message session created")

    await eventually(a_session, timeout=30, what="one of the pair to hold the session")
    holder = await lease_holder(kube, namespace)
    return (one, other) if holder == PAIR[0] else (other, one)


async def test_one_of_the_pair_polls_and_the_standby_resumes_its_session_at_once_after_a_sigkill(
    pair: Start, kube: KubeClient, namespace: str, listener_sim: ListenerSim
) -> None:
    sim = listener_sim.sim
    await create_lease(kube, namespace, {"holderIdentity": "", "leaseDurationSeconds": 15})
    async with pair(PAIR[0]) as first, pair(PAIR[1]) as second:
        active, standby = await active_of(kube, namespace, first, second)
        session_id = active.logged("message session created")["session_id"]  # type: ignore[index]
        before = [sim.state.enqueue_job(SCALE_SET_NAME, repository="octo-org/hello").request_id for _ in range(2)]
        await wait_for_replicas(kube, namespace, len(before))

        # (1) Only the active one polls: polling needs a session, and one session was ever asked for.
        await standby.wait_logged("standing by")
        assert [r.status for r in routes(sim, "create_session")] == [200]
        assert standby.logged("took over the scale set") is None
        ready, why = await standby.probe("/readyz")
        assert (ready, "standing by" in why) == (500, True)
        assert (await standby.probe("/healthz"))[0] == 200
        assert "\ngha_listener_active 0.0\n" in (await standby.probe("/metrics"))[1]
        assert "\ngha_listener_active 1.0\n" in (await active.probe("/metrics"))[1]

        print(f"\nRSS: the active listener {rss_mib(active):.1f} MiB, the standby {rss_mib(standby):.1f} MiB")

        # (2) SIGKILL, and the kubelet's word: the standby takes over, resumes the session and polls.
        killed_at = time.monotonic()
        active.process.kill()
        await active.process.wait()
        await mark_killed(kube, namespace, owner_of(active))
        after = [sim.state.enqueue_job(SCALE_SET_NAME, repository="octo-org/hello").request_id for _ in range(2)]
        took = await standby.wait_logged("took over the scale set")
        assert took["reason"] == "peer's listener is dead"
        resumed = await standby.wait_logged("message session resumed")
        assert resumed["session_id"] == session_id
        await sim.changes.wait_until(lambda: bool(routes(sim, "get_message", after=killed_at)), within=20)
        gap = routes(sim, "get_message", after=killed_at)[0].at - killed_at
        print(f"\nstandby takeover: SIGKILL to the standby's first poll (as the sim saw it): {gap * 1000:.0f} ms")

        # Every job once: each acquired, one runner each, the one session the whole time.
        jobs = [*before, *after]
        await sim.changes.wait_until(lambda: all(sim.state.jobs[i].state is JobState.ACQUIRED for i in jobs), within=20)
        await wait_for_replicas(kube, namespace, len(jobs))
        assert [session.id for session in sim.state.sessions.values()] == [session_id]
        assert len(routes(sim, "create_session")) == 1
        assert await lease_holder(kube, namespace) == owner_of(standby)


async def test_a_sigtermed_active_listener_releases_the_lease_and_its_standby_takes_over(
    pair: Start, kube: KubeClient, namespace: str, listener_sim: ListenerSim
) -> None:
    sim = listener_sim.sim
    await create_lease(kube, namespace, {"holderIdentity": "", "leaseDurationSeconds": 15})
    async with pair(PAIR[0]) as first, pair(PAIR[1]) as second:
        active, standby = await active_of(kube, namespace, first, second)
        await standby.wait_logged("standing by")
        active.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(active.process.wait(), timeout=GRACE_PERIOD) == 0
        # Its pod still looks running (the kubelet has not written yet): only the release tells the standby.
        took = await standby.wait_logged("took over the scale set")
        assert took["reason"] == "released"
        await standby.wait_logged("message session created")
        assert await lease_holder(kube, namespace) == owner_of(standby)
        request_id = sim.state.enqueue_job(SCALE_SET_NAME, repository="octo-org/hello").request_id
        await sim.changes.wait_until(lambda: sim.state.jobs[request_id].state is JobState.ACQUIRED, within=20)
        await wait_for_replicas(kube, namespace, 1)


async def test_a_lease_nobody_renews_is_taken_only_after_its_duration_while_the_peer_pod_runs(
    pair: Start, kube: KubeClient, namespace: str, listener_sim: ListenerSim
) -> None:
    sim = listener_sim.sim
    duration = 5
    # The peer holds the Lease and its pod runs, but it hangs (or is cut off): it never renews.
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    spec = {"holderIdentity": PAIR[0], "leaseDurationSeconds": duration, "acquireTime": now, "renewTime": now}
    await create_lease(kube, namespace, spec)
    started = time.monotonic()
    async with pair(PAIR[1]) as standby:
        took = await standby.wait_logged("took over the scale set", timeout=30 + duration)
        waited = time.monotonic() - started
        assert took["reason"] == "lease expired"
        assert waited >= duration  # measured on the standby's clock from its first look, so at least this
        print(f"\nstandby takeover of an unrenewed {duration} s lease: {waited:.1f} s after the standby started")
        await standby.wait_logged("message session created")
        assert await lease_holder(kube, namespace) == PAIR[1]
        assert not any(r.at < started + duration for r in routes(sim, "create_session"))


async def test_an_active_listener_that_sees_another_holder_stops_leaving_the_session_and_state_to_it(
    pair: Start, kube: KubeClient, namespace: str, listener_sim: ListenerSim
) -> None:
    sim = listener_sim.sim
    await create_lease(kube, namespace, {"holderIdentity": "", "leaseDurationSeconds": 15})
    async with pair(PAIR[0]) as active:
        session_id = (await active.wait_logged("message session created"))["session_id"]

        async def recorded() -> ListenerState | None:
            ers = await kube.get(EPHEMERAL_RUNNER_SETS, SCALE_SET_NAME, namespace=namespace)
            state = ListenerState.from_annotation(ObjectView(ers).annotation(ANNOTATION_LISTENER_STATE))
            return state if state is not None and state.session_id == session_id else None

        await eventually(recorded, timeout=20, what="the session recorded on the EphemeralRunnerSet")
        # Another listener took the Lease (it judged this one dead): this one must stop acting at once.
        lease = await kube.get(LEASES, LEASE, namespace=namespace)
        lease["spec"]["holderIdentity"] = "a-successor"
        await kube.replace(LEASES, lease)
        assert await asyncio.wait_for(active.process.wait(), timeout=GRACE_PERIOD) == 1
        assert active.logged("listener stopped: lost the standby lease; another listener holds the scale set")
        # The session and the recorded state are the successor's now: neither deleted nor marked stopped.
        assert [session.id for session in sim.state.sessions.values()] == [session_id]
        assert routes(sim, "delete_session") == []
        state = await recorded()
        assert state is not None
        assert state.state is ListenerPhase.POLLING


@pytest.mark.parametrize("sim_config", [SimConfig(long_poll_seconds=LONG_POLL, admin_token_ttl=TOKEN_TTL)])
async def test_a_standby_that_waited_past_its_admin_tokens_life_takes_over_and_polls_without_fetching_one(
    pair: Start, kube: KubeClient, namespace: str, listener_sim: ListenerSim
) -> None:
    sim = listener_sim.sim
    await create_lease(kube, namespace, {"holderIdentity": "", "leaseDurationSeconds": 15})
    async with pair(PAIR[0]) as first, pair(PAIR[1]) as second:
        active, standby = await active_of(kube, namespace, first, second)
        session_id = active.logged("message session created")["session_id"]  # type: ignore[index]
        fetched = await standby.wait_logged("standby listener: admin token fetched ahead")
        first_expiry = dt.datetime.fromisoformat(fetched["expires_at"])

        # The token the standby fetched while warming up has expired; the standby has just replaced its latest.
        async def expired() -> bool:
            return dt.datetime.now(dt.UTC) > first_expiry

        await eventually(expired, timeout=TOKEN_TTL + 10, what="the standby's first admin token to expire")

        def refreshes() -> list[dict[str, Any]]:
            return [
                line
                for line in standby.handle.lines
                if line.get("msg") == "standby listener: admin token refreshed ahead"
            ]

        seen = len(refreshes())

        async def refreshed() -> bool:
            return len(refreshes()) > seen

        await eventually(refreshed, timeout=30, what="the standby to replace its admin token ahead")

        killed_at = time.monotonic()
        active.process.kill()
        await active.process.wait()
        await mark_killed(kube, namespace, owner_of(active))
        await standby.wait_logged("took over the scale set")
        assert (await standby.wait_logged("message session resumed"))["session_id"] == session_id
        request_id = sim.state.enqueue_job(SCALE_SET_NAME, repository="octo-org/hello").request_id
        await sim.changes.wait_until(lambda: sim.state.jobs[request_id].state is JobState.ACQUIRED, within=20)
        # The takeover used the token kept fresh: none fetched on its way to polling and acquiring (the keeper
        # had just replaced it, and stops at the takeover), none refused.
        assert routes(sim, "runner_registration", after=killed_at) == []
        assert [r.route for r in sim.requests if r.at > killed_at and r.status == 401] == []
