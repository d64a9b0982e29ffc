"""minRunnersSchedule in the listener, against the simulated GitHub over real HTTP and the real API server: inside
a window the EphemeralRunnerSet is held at the window's runners, and when the window closes it drops back to
minRunners under the "force state" patch that lets the set remove its idle surplus (docs/listener.md)."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from arc_scaleset.clock import RealClock
from arc_scaleset.kube.client import KubeClient
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.listener.conftest import (
    ListenerSim,
    StartListener,
    ers_spec,
    listener_config,
    wait_for_replicas,
)

pytestmark = pytest.mark.cluster

KOLKATA = ZoneInfo("Asia/Kolkata")  # the window's zone, chosen so the test does not depend on the machine's


class WallClock(RealClock):
    """The real clock for intervals and sleeps, with a wall time the test sets."""

    def __init__(self, wall: dt.datetime) -> None:
        self.wall = wall

    def now(self) -> dt.datetime:
        return self.wall


async def test_inside_a_window_the_set_holds_the_windows_runners_and_drops_to_min_runners_after(
    kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim, start_listener: StartListener
) -> None:
    window = {"days": "*", "start": "10:00", "end": "11:00", "time_zone": "Asia/Kolkata", "runners": 3}
    clock = WallClock(dt.datetime(2026, 1, 7, 10, 30, tzinfo=KOLKATA))
    config = listener_config(listener_sim, namespace, min_runners=1, max_runners=5, min_runners_schedule=[window])
    handle = await start_listener(config, clock=clock)
    await wait_for_replicas(kube, namespace, 3)

    clock.wall = dt.datetime(2026, 1, 7, 11, 0, tzinfo=KOLKATA)
    await wait_for_replicas(kube, namespace, 1)

    async def forced() -> bool:
        return (await ers_spec(kube, namespace)).get("patchID") == 0

    await eventually(forced, timeout=20, what="the ERS at rest at minRunners (patchID 0)")
    assert (await ers_spec(kube, namespace)).get("replicas") == 1
    assert not handle.task.done()
