"""A leader that stops while a renewal of its Lease is unanswered still releases the Lease (docs/listener.md,
"Standby listener": a SIGTERMed active listener lets its standby take over at once, not after a lease duration).

Against the real API server. The fault is the network's: the renewal's PUT reaches the server and is applied, and
its answer never comes back (a client whose ``replace`` withholds the answer once asked to).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.leader_election import LeaderElectionConfig, LeaderElector, LeaseRecord
from arc_scaleset.kube.resources import LEASES, Resource
from arc_scaleset_lab.harness import cluster as testing_cluster

pytestmark = pytest.mark.cluster

LEASE = "arc-scaleset-release-test"


class AnswerLost(KubeClient):
    """A client whose next ``replace`` is applied by the server and never answered (once :meth:`lose_next`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lose = False
        self.landed = asyncio.Event()

    def lose_next(self) -> None:
        self.lose = True

    async def replace(self, resource: Resource, obj: Mapping[str, Any], **options: Any) -> dict[str, Any]:
        stored = await super().replace(resource, obj, **options)
        if self.lose:
            self.lose = False
            self.landed.set()
            await asyncio.Event().wait()  # the answer is lost: the caller waits until it gives up
        return stored


def config(namespace: str, identity: str) -> LeaderElectionConfig:
    return LeaderElectionConfig(
        LEASE, namespace=namespace, identity=identity, lease_duration=6.0, renew_deadline=4.0, retry_period=0.5
    )


async def test_a_leader_stepping_down_while_its_renewals_answer_is_lost_releases_the_lease_for_its_peer(
    cluster: testing_cluster.TestCluster, kube: KubeClient, namespace: str
) -> None:
    client = AnswerLost.from_kubeconfig(cluster.kubeconfig)
    assert isinstance(client, AnswerLost)
    try:
        leader = LeaderElector(client, config(namespace, "active"))
        assert await leader.try_take()
        holding = asyncio.create_task(leader.hold())
        client.lose_next()
        await asyncio.wait_for(client.landed.wait(), timeout=10)  # a renewal is on the server, unanswered
        renewed = LeaseRecord.from_lease(await kube.get(LEASES, LEASE, namespace=namespace))
        assert renewed.holder_identity == "active"

        await asyncio.wait_for(leader.step_down(holding), timeout=10)

        # Released over the renewal that landed: free at once, so the peer takes it without waiting it out.
        record = LeaseRecord.from_lease(await kube.get(LEASES, LEASE, namespace=namespace))
        assert record.holder_identity == ""
        peer = LeaderElector(kube, config(namespace, "standby"))
        assert await peer.try_take()
        assert holding.done()
    finally:
        await client.close()
