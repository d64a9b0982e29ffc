"""The standby listener's watches of its Lease and its peer's pod, against an API server over real HTTP that ends
every watch at once without an event (a misbehaving proxy or server): the standby reads and watches again after
a retry period, never in a tight loop."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from arc_scaleset.clock import FakeClock
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.credentials import ConnectionConfig
from arc_scaleset.listener.errors import Stopping
from arc_scaleset.listener.standby import Standby, StandbySettings
from arc_scaleset.listener.stop import StopSignal
from arc_scaleset_lab.harness.waiting import eventually
from tests.http_serving import serving

SETTINGS = StandbySettings(lease="arc-runners-listener", identity="listener-standby", peer="listener-active")


def _lease() -> dict[str, object]:
    return {
        "kind": "Lease",
        "metadata": {"name": SETTINGS.lease, "namespace": "default", "resourceVersion": "5"},
        "spec": {
            "holderIdentity": SETTINGS.peer,
            "leaseDurationSeconds": 15,
            "renewTime": "2026-01-01T00:00:00.000000Z",
            "acquireTime": "2026-01-01T00:00:00.000000Z",
            "leaseTransitions": 0,
        },
    }


def _peer_pod() -> dict[str, object]:
    return {
        "kind": "Pod",
        "metadata": {"name": SETTINGS.peer, "namespace": "default", "resourceVersion": "6"},
        "status": {
            "phase": "Running",
            "containerStatuses": [{"name": "listener", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}],
        },
    }


@pytest.fixture
async def watches_end_at_once() -> AsyncIterator[tuple[str, Counter[str]]]:
    """An API server whose every watch is answered 200 with an empty stream; the requests it got, by kind."""
    requests: Counter[str] = Counter()

    async def handler(request: web.Request) -> web.Response:
        kind = "lease" if "leases" in request.path else "pod"
        watching = request.query.get("watch") == "true"
        requests[f"{kind} {'watch' if watching else 'read'}"] += 1
        if watching:
            return web.Response(status=200, body=b"", content_type="application/json")
        if kind == "lease":
            return web.json_response(_lease())
        return web.json_response({"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": [_peer_pod()]})

    async with serving(handler) as (server, _):
        yield server, requests


async def test_watches_that_end_at_once_without_an_event_are_opened_again_only_after_a_retry_period(
    watches_end_at_once: tuple[str, Counter[str]],
) -> None:
    server, requests = watches_end_at_once
    clock = FakeClock()
    stop = StopSignal(clock=clock)
    async with KubeClient(ConnectionConfig(server=server), clock=clock) as kube:
        standby = Standby(kube, SETTINGS, clock=clock)
        taking = asyncio.ensure_future(standby.take_lease(stop))
        # Both followers read, watch once, and wait on the clock (as does the decision, for the peer's Lease).
        await eventually(lambda: clock.sleepers >= 3 and requests["lease watch"] and requests["pod watch"], timeout=10)
        assert requests == {"lease read": 1, "lease watch": 1, "pod read": 1, "pod watch": 1}
        await clock.advance(standby.elector.config.retry_period)
        await eventually(lambda: requests["lease watch"] == 2 and requests["pod watch"] == 2, timeout=10)
        stop.set()
        with pytest.raises(Stopping):
            await taking
