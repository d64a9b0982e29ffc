"""Two managers campaign for one Lease in one process against the real API server (short timings)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Controller, Request, Result
from arc_scaleset.kube.leader_election import LeaderElectionConfig, LeadershipLostError, LeaseRecord
from arc_scaleset.kube.manager import Manager
from arc_scaleset.kube.resources import CONFIG_MAPS, LEASES
from arc_scaleset_lab.harness import cluster as testing_cluster
from arc_scaleset_lab.harness.waiting import eventually

pytestmark = pytest.mark.cluster

LEASE = "arc-scaleset-le-test"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 3.0, 2.0, 0.5


@dataclass
class Candidate:
    """One manager with a controller that records what it reconciles, and its own API client."""

    name: str
    client: KubeClient
    manager: Manager
    reconciled: list[Request] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    @property
    def leading(self) -> bool:
        return self.manager.elector is not None and self.manager.elector.is_leader

    @property
    def controller_running(self) -> bool:
        return self.manager.controllers[0].running

    @property
    def identity(self) -> str:
        assert self.manager.elector is not None
        return self.manager.elector.identity


@pytest.fixture
async def candidates(cluster: testing_cluster.TestCluster, namespace: str) -> AsyncIterator[Callable[..., Candidate]]:
    made: list[Candidate] = []

    def make(name: str, *, reconcile_gate: asyncio.Event | None = None) -> Candidate:
        """``reconcile_gate``: each reconcile, once recorded, waits for it (a slow reconcile to drain)."""
        client = KubeClient.from_kubeconfig(cluster.kubeconfig)
        manager = Manager(
            client,
            namespaces={namespace},
            metrics_address=None,
            leader_election=LeaderElectionConfig(
                LEASE,
                namespace=namespace,
                identity=f"{name}-candidate",
                lease_duration=LEASE_DURATION,
                renew_deadline=RENEW_DEADLINE,
                retry_period=RETRY_PERIOD,
            ),
        )
        candidate = Candidate(name, client, manager)

        async def reconcile(request: Request) -> Result:
            candidate.reconciled.append(request)
            if reconcile_gate is not None:
                await reconcile_gate.wait()
            return Result()

        manager.add(Controller(f"{name}-configmaps", CONFIG_MAPS, reconcile))
        candidate.task = asyncio.create_task(manager.run(), name=f"manager-{name}")
        made.append(candidate)
        return candidate

    yield make
    for candidate in made:
        candidate.manager.request_stop()
        assert candidate.task is not None
        with contextlib.suppress(LeadershipLostError, asyncio.CancelledError):
            await asyncio.wait_for(candidate.task, 30)
        with contextlib.suppress(Exception):
            await candidate.client.close()


class TwoLeadersWatch:
    """Samples the candidates every 5 ms and records any moment at which more than one leads."""

    def __init__(self, candidates: list[Candidate]) -> None:
        self.candidates = candidates
        self.violations: list[list[str]] = []
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            leaders = [c.name for c in self.candidates if c.leading or c.controller_running]
            if len(leaders) > 1:
                self.violations.append(leaders)
            await asyncio.sleep(0.005)

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def lease_record(kube: KubeClient, namespace: str) -> LeaseRecord:
    return LeaseRecord.from_lease(await kube.get(LEASES, LEASE, namespace=namespace))


async def test_one_leads_and_a_dead_leaders_lease_is_taken_over_after_it_expires(
    kube: KubeClient, namespace: str, candidates: Callable[..., Candidate]
) -> None:
    await kube.create(CONFIG_MAPS, {"metadata": {"name": "work"}}, namespace=namespace)
    first, second = candidates("first"), candidates("second")
    watch = TwoLeadersWatch([first, second])
    await eventually(lambda: first.leading or second.leading, "a leader")
    leader, follower = (first, second) if first.leading else (second, first)
    await eventually(lambda: Request(namespace, "work") in leader.reconciled, "the leader's controller to reconcile")
    assert not follower.controller_running
    assert follower.reconciled == []
    record = await lease_record(kube, namespace)
    assert record.holder_identity == leader.identity
    transitions_before = record.lease_transitions

    # "Kill" the leader: its API connection is gone, so it can neither renew nor release.
    await leader.client.close()
    # Bound: the follower must see the record unchanged for a lease duration, polling every retry period
    # (with up to 120 % jitter); generous slack for a loaded machine.
    await eventually(
        lambda: follower.leading, "the follower to take over", timeout=LEASE_DURATION + 10 * RETRY_PERIOD + 5
    )
    assert leader.task is not None
    with pytest.raises(LeadershipLostError):
        await asyncio.wait_for(leader.task, 10)
    assert not leader.controller_running, "the deposed leader's controller must be stopped"
    await eventually(lambda: Request(namespace, "work") in follower.reconciled, "the new leader to reconcile")

    record = await lease_record(kube, namespace)
    assert record.holder_identity == follower.identity
    assert record.lease_transitions == transitions_before + 1
    await watch.stop()
    assert watch.violations == [], "two candidates led at the same time"


async def test_a_leader_that_stops_releases_the_lease_for_the_next_candidate(
    kube: KubeClient, namespace: str, candidates: Callable[..., Candidate]
) -> None:
    first = candidates("first")
    await eventually(lambda: first.leading and first.controller_running, "the first candidate to lead")
    second = candidates("second")
    # Let the second candidate observe the held lease at least once before the leader leaves.
    await eventually(
        lambda: second.manager.elector is not None and second.manager.elector.observed_holder == first.identity,
        "the second candidate to see the lease held",
    )
    watch = TwoLeadersWatch([first, second])
    first.manager.request_stop()
    assert first.task is not None
    await asyncio.wait_for(first.task, 30)
    assert not first.controller_running
    record = await lease_record(kube, namespace)
    assert record.holder_identity in ("", second.identity), "a graceful stop clears holderIdentity"

    await eventually(lambda: second.leading, "the second candidate to take over")
    # A released lease is free at once: no need to wait for it to expire. Proven without timing: the
    # second candidate saw the cleared record and took it with a single transition.
    record = await lease_record(kube, namespace)
    assert record.holder_identity == second.identity
    assert record.lease_transitions == 1
    await watch.stop()
    assert watch.violations == []


async def test_a_leader_draining_a_slow_reconcile_keeps_renewing_so_no_one_takes_over_before_it_released(
    kube: KubeClient, namespace: str, candidates: Callable[..., Candidate]
) -> None:
    gate = asyncio.Event()
    first = candidates("first", reconcile_gate=gate)
    # Any ConfigMap will do (every namespace has kube-root-ca.crt): the first reconcile blocks the drain.
    await eventually(lambda: bool(first.reconciled), "the leader's reconcile to start")
    second = candidates("second")
    await eventually(
        lambda: second.manager.elector is not None and second.manager.elector.observed_holder == first.identity,
        "the second candidate to see the lease held",
    )
    watch = TwoLeadersWatch([first, second])
    first.manager.request_stop()  # the drain waits for the reconcile, which waits for the gate
    renewals: set[object] = set()

    async def renewed_past_a_lease_duration() -> bool:
        renewals.add((await lease_record(kube, namespace)).renew_time)
        return len(renewals) > 2 * LEASE_DURATION / RETRY_PERIOD

    await eventually(renewed_past_a_lease_duration, "the draining leader to keep renewing", timeout=60)
    assert first.task is not None
    assert not first.task.done(), "still draining"
    assert first.leading
    assert not second.leading
    gate.set()
    await asyncio.wait_for(first.task, 30)
    await eventually(lambda: second.leading, "the second candidate to take over after the release")
    await watch.stop()
    assert watch.violations == [], "the next candidate led while the old leader still drained"
