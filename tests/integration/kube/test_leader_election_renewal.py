"""A leader renews its Lease with one write and no read, and still never writes over a Lease someone else took
(docs/revisions.md; client-go's optimistic renewal; issue 30's request budget: at 100 scale
sets the renewals' reads were 0.28 of the controller's requests per job).

Against the real API server: the renewals are counted on the leader's own client, and the usurper writes the
Lease as another process would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.leader_election import LeaderElectionConfig, LeaderElector, LeaseRecord
from arc_scaleset.kube.resources import LEASES
from arc_scaleset_lab.harness import cluster as testing_cluster
from arc_scaleset_lab.harness.waiting import eventually

pytestmark = pytest.mark.cluster

LEASE = "arc-scaleset-renewal-test"


@pytest.fixture(name="own_client")
async def leaders_own_client(cluster: testing_cluster.TestCluster) -> AsyncIterator[KubeClient]:
    """A client of the leader's own, so that its request counts are the leader's alone."""
    client = KubeClient.from_kubeconfig(cluster.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


def config(namespace: str, identity: str) -> LeaderElectionConfig:
    return LeaderElectionConfig(
        LEASE, namespace=namespace, identity=identity, lease_duration=6.0, renew_deadline=4.0, retry_period=0.3
    )


async def renew_time(kube: KubeClient, namespace: str) -> object:
    return LeaseRecord.from_lease(await kube.get(LEASES, LEASE, namespace=namespace)).renew_time


async def test_a_leader_renews_its_lease_with_one_write_and_no_read(
    own_client: KubeClient, kube: KubeClient, namespace: str
) -> None:
    leader = LeaderElector(own_client, config(namespace, "leader"))
    assert await leader.try_take()
    counts = own_client.request_counts
    reads_before, writes_before = counts[("get", "leases")], counts[("update", "leases")]
    holding = asyncio.create_task(leader.hold())
    try:
        seen = {await renew_time(kube, namespace)}

        async def renewed_three_times() -> bool:
            seen.add(await renew_time(kube, namespace))
            return len(seen) > 3

        await eventually(renewed_three_times, "three renewals of the Lease", timeout=20)
        assert leader.is_leader
    finally:
        await leader.step_down(holding)
    reads, writes = counts[("get", "leases")] - reads_before, counts[("update", "leases")] - writes_before
    assert writes >= 3
    assert reads == 0, f"{writes} renewals and the release read the Lease {reads} times"


async def test_a_leader_whose_lease_another_took_reads_it_and_stops_leading_without_writing_over_it(
    own_client: KubeClient, kube: KubeClient, namespace: str
) -> None:
    leader = LeaderElector(own_client, config(namespace, "leader"))
    assert await leader.try_take()
    holding = asyncio.create_task(leader.hold())
    try:
        # Another process takes the Lease (as after a partition the leader did not notice): the leader's next
        # renewal, written over the version it last wrote, must conflict rather than take it back.
        lease = await kube.get(LEASES, LEASE, namespace=namespace)
        lease["spec"]["holderIdentity"] = "usurper"
        await kube.replace(LEASES, lease)
        await asyncio.wait_for(asyncio.shield(holding), timeout=10)
        assert not leader.is_leader
        assert leader.observed_holder == "usurper"
        record = LeaseRecord.from_lease(await kube.get(LEASES, LEASE, namespace=namespace))
        assert record.holder_identity == "usurper"
    finally:
        await leader.step_down(holding)
