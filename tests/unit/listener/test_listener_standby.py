"""The standby listener's decisions (pure): when its peer is dead, when it takes the Lease, what it reports while it
waits (docs/listener.md, "Standby listener")."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import generate_latest

from arc_scaleset.api.listener_standby import PEER_POD_ENV, STANDBY_LEASE_ENV
from arc_scaleset.clock import FakeClock
from arc_scaleset.kube.leader_election import LeaseRecord, Observation
from arc_scaleset.listener.errors import FatalListenerError
from arc_scaleset.listener.health import Health
from arc_scaleset.listener.metrics import ListenerMetrics, ScaleSetIdentity
from arc_scaleset.listener.standby import StandbySettings
from arc_scaleset.listener.standby_decision import PeerSight, Step, TakeReason, next_step, peer_death

ME, PEER = "arc-runners-listener-standby", "arc-runners-listener"


def pod(*, phase: str = "Running", listener: dict[str, Any] | None = None, **metadata: Any) -> dict[str, Any]:
    state = listener if listener is not None else {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    return {
        "metadata": {"name": PEER, **metadata},
        "status": {
            "phase": phase,
            "containerStatuses": [
                {"name": "sidecar", "state": {"terminated": {"exitCode": 0}}},
                {"name": "listener", "state": state},
            ],
        },
    }


def test_a_peer_is_dead_when_its_pod_is_gone_ended_or_its_listener_container_terminated() -> None:
    assert peer_death(None) == "pod gone"
    assert peer_death(pod(phase="Failed")) == "pod Failed"
    assert peer_death(pod(phase="Succeeded")) == "pod Succeeded"
    assert peer_death(pod(listener={"terminated": {"exitCode": 137}})) == "listener container terminated"


def test_a_peer_that_runs_starts_or_is_only_being_deleted_is_not_dead() -> None:
    assert peer_death(pod()) == ""  # another container's end says nothing about the listener
    assert peer_death(pod(phase="Pending", listener={"waiting": {"reason": "ContainerCreating"}})) == ""
    assert peer_death({"metadata": {"name": PEER}, "status": {"phase": "Pending"}}) == ""
    # Being deleted, its listener is still stopping: it releases the Lease when it has.
    assert peer_death(pod(deletionTimestamp="2026-01-01T00:00:00Z")) == ""


def test_a_peers_death_stays_known_when_its_pod_is_replaced_until_the_lease_changes() -> None:
    sight = PeerSight()
    assert sight.death == ""  # not seen yet: not known dead
    dead = sight.saw_pod(pod(listener={"terminated": {"exitCode": 137}}))
    assert dead.death == "listener container terminated"
    # Deleted and recreated under its name, all in one read of the watch: the dead one still holds the Lease.
    replaced = dead.saw_pod(None).saw_pod(pod())
    assert replaced.death == "listener container terminated"
    # The Lease changed: maybe the new process took it; only the pod as seen now counts.
    assert replaced.lease_changed().death == ""
    assert dead.lease_changed().death == "listener container terminated"  # still dead as seen now
    assert PeerSight().lease_changed().death == ""


def seen(holder: str, *, at: float = 100.0, duration: int | None = 15) -> Observation:
    return Observation(LeaseRecord(holder, duration, None, None, 1), observed_at=at)


def step(observation: Observation | None, *, peer_dead: str = "", now: float = 100.0) -> Step:
    return next_step(observation, identity=ME, peer=PEER, peer_dead=peer_dead, now=now)


def test_nothing_is_taken_before_the_lease_was_seen() -> None:
    assert step(None, peer_dead="pod gone") == Step()


def test_a_released_lease_or_one_this_pod_holds_is_taken_at_once() -> None:
    assert step(seen("")) == Step(take=TakeReason.RELEASED)
    # This pod's previous container held it, and is dead: this one is its replacement.
    assert step(seen(ME)) == Step(take=TakeReason.OWN)


def test_a_dead_peers_lease_is_taken_at_once_naming_the_peer_as_the_holder_to_replace() -> None:
    assert step(seen(PEER), peer_dead="listener container terminated") == Step(
        take=TakeReason.PEER_DEAD, dead_holder=PEER
    )


def test_a_live_peers_lease_is_waited_out_for_its_duration_on_the_standbys_clock() -> None:
    assert step(seen(PEER, at=100.0), now=100.0) == Step(recheck_in=15.0)
    assert step(seen(PEER, at=100.0), now=110.0) == Step(recheck_in=5.0)
    assert step(seen(PEER, at=100.0), now=115.0) == Step(take=TakeReason.EXPIRED)
    assert step(seen(PEER, at=100.0, duration=4), now=102.0) == Step(recheck_in=2.0)  # the holder's own duration


def test_a_stranger_holding_the_lease_is_waited_out_even_when_the_peer_is_dead() -> None:
    # Only the peer's pod is watched: the death of some other pod is not known, so its Lease must expire.
    assert step(seen("someone-else"), peer_dead="pod gone") == Step(recheck_in=15.0)
    assert step(seen("someone-else", at=100.0), peer_dead="pod gone", now=115.0) == Step(take=TakeReason.EXPIRED)


async def test_a_standby_is_live_not_ready_saying_it_stands_by_and_taking_over_restarts_liveness() -> None:
    clock = FakeClock()
    health = Health(clock=clock, liveness_window=20.0)
    health.stand_by()
    await clock.advance(3600.0)  # an hour standing by
    assert health.live() == (True, "standing by")
    assert health.ready() == (False, "standing by")
    health.became_active()
    assert health.live() == (True, "starting")
    assert health.ready() == (False, "no message session held")
    await clock.advance(21.0)
    assert not health.live()[0]


def test_the_active_gauge_is_1_for_a_listener_without_a_standby_and_follows_the_role() -> None:
    metrics = ListenerMetrics(scale_set=ScaleSetIdentity("", "org", "", "set", "ns"))
    assert b"\ngha_listener_active 1.0\n" in generate_latest(metrics.registry)
    metrics.record_active(False)
    assert b"\ngha_listener_active 0.0\n" in generate_latest(metrics.registry)


def test_the_settings_come_from_the_pods_environment_and_a_missing_peer_is_fatal() -> None:
    environ = {STANDBY_LEASE_ENV: PEER, PEER_POD_ENV: PEER, "HOSTNAME": ME}
    assert StandbySettings.from_environment(environ) == StandbySettings(lease=PEER, identity=ME, peer=PEER)
    with pytest.raises(FatalListenerError, match=PEER_POD_ENV):
        StandbySettings.from_environment({STANDBY_LEASE_ENV: PEER, "HOSTNAME": ME})
