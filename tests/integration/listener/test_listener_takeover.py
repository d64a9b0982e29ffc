"""A listener replaced after SIGKILL ends the session its predecessor left behind, instead of waiting for it.

Issue: a listener killed with SIGKILL was replaced in 5 s, but the new one waited about 120 s for the old
session to expire (the service allows one session per scale set), although it had the same owner name. The
listener records its session on the EphemeralRunnerSet (docs/listener.md, "The listener's state"); its
successor, answered 409, deletes that session and creates its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arc_scaleset.api.constants import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import ANNOTATION_LISTENER_CURSOR, ANNOTATION_LISTENER_STATE
from arc_scaleset.api.listener_cursor import ListenerCursor
from arc_scaleset.api.listener_state import ListenerPhase, ListenerState
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim.faults import FaultRule
from arc_scaleset_lab.sim.state import JobState
from tests.integration.listener.conftest import (
    SCALE_SET_NAME,
    ListenerSim,
    listener_process,
    wait_for_replicas,
)

pytestmark = pytest.mark.cluster

TAKEOVER_BOUND = 15.0  # the bound; the service's own expiry is about 120 s (the sim's: 120 s)


async def recorded_state(kube: KubeClient, namespace: str) -> ListenerState | None:
    ers = await kube.get(EPHEMERAL_RUNNER_SETS, SCALE_SET_NAME, namespace=namespace)
    return ListenerState.from_annotation(ObjectView(ers).annotation(ANNOTATION_LISTENER_STATE))


async def test_a_listener_replaced_after_sigkill_holds_a_session_within_15_s_and_takes_jobs(
    tmp_path: Path, cluster: TestCluster, kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim
) -> None:
    sim = listener_sim.sim
    async with listener_process(tmp_path, cluster, listener_sim, namespace) as killed:
        old_session = (await killed.read_until("message session created"))["session_id"]

        async def old_session_recorded() -> ListenerState | None:
            state = await recorded_state(kube, namespace)
            return state if state is not None and state.session_id == old_session else None

        await eventually(old_session_recorded, timeout=20, what="the session recorded on the EphemeralRunnerSet")
        killed.process.kill()
        await killed.process.wait()
    assert [session.id for session in sim.state.sessions.values()] == [old_session]  # left behind
    # A predecessor that recorded no message cursor (an earlier version): its session is taken over, not resumed
    # (the resumption: the test below).
    forget_cursor = {"metadata": {"annotations": {ANNOTATION_LISTENER_CURSOR: None}}}
    await kube.patch(EPHEMERAL_RUNNER_SETS, SCALE_SET_NAME, forget_cursor, namespace=namespace)

    async with listener_process(tmp_path, cluster, listener_sim, namespace) as replacement:
        new_session = (await replacement.read_until("message session created", within=TAKEOVER_BOUND))["session_id"]
        assert new_session != old_session
        assert [session.id for session in sim.state.sessions.values()] == [new_session]
        # Taken over, not waited out: the service said 409, then the old session was deleted.
        assert any(r.route == "create_session" and r.status == 409 for r in sim.requests)
        assert any(r.route == "delete_session" and r.status == 204 and old_session in r.path for r in sim.requests)

        async def new_session_recorded() -> ListenerState | None:
            state = await recorded_state(kube, namespace)
            return state if state is not None and state.session_id == new_session else None

        state = await eventually(new_session_recorded, timeout=20, what="the new session recorded")
        assert (state.state, state.scale_set_id) == (ListenerPhase.POLLING, listener_sim.scale_set_id)

        request_id = sim.state.enqueue_job(SCALE_SET_NAME, repository="octo-org/hello").request_id
        await sim.changes.wait_until(lambda: sim.state.jobs[request_id].state is JobState.ACQUIRED, within=20)
        await wait_for_replicas(kube, namespace, 1)


async def recorded_cursor(kube: KubeClient, namespace: str) -> ListenerCursor | None:
    ers = await kube.get(EPHEMERAL_RUNNER_SETS, SCALE_SET_NAME, namespace=namespace)
    return ListenerCursor.from_annotation(ObjectView(ers).annotation(ANNOTATION_LISTENER_CURSOR))


async def test_a_listener_killed_before_its_acquisitions_landed_is_resumed_and_every_job_is_acquired_once(
    tmp_path: Path, cluster: TestCluster, kube: KubeClient, namespace: str, ers: str, listener_sim: ListenerSim
) -> None:
    """docs/listener.md, "Leaving no gap": the service offers a job once per session, so a successor that resumed
    the session would never be offered jobs whose acquisition died with its predecessor; the cursor names them."""
    sim = listener_sim.sim
    # Acquisitions hang: the listener publishes the message's decision, with the jobs unconfirmed, and dies.
    sim.faults.add(FaultRule(route="acquire_jobs", latency=120.0, count=None))
    async with listener_process(tmp_path, cluster, listener_sim, namespace) as killed:
        session_id = (await killed.read_until("message session created"))["session_id"]
        ids = [sim.state.enqueue_job(SCALE_SET_NAME, repository="octo-org/hello").request_id for _ in range(3)]

        async def unconfirmed_recorded() -> ListenerCursor | None:
            cursor = await recorded_cursor(kube, namespace)
            return cursor if cursor is not None and set(cursor.acquiring) == set(ids) else None

        cursor = await eventually(unconfirmed_recorded, timeout=20, what="the unconfirmed acquisitions recorded")
        assert (cursor.session_id, cursor.scale_set_id) == (session_id, listener_sim.scale_set_id)
        assert cursor.last_message_id > 0
        killed.process.kill()
        await killed.process.wait()
    sim.faults.clear()
    assert all(sim.state.jobs[i].state is JobState.AVAILABLE for i in ids)  # died with its predecessor
    creates_before = sum(1 for r in sim.requests if r.route == "create_session")

    async with listener_process(tmp_path, cluster, listener_sim, namespace) as replacement:
        resumed = await replacement.read_until("message session resumed", within=TAKEOVER_BOUND)
        assert (resumed["session_id"], resumed["last_message_id"]) == (session_id, cursor.last_message_id)
        await sim.changes.wait_until(lambda: all(sim.state.jobs[i].state is JobState.ACQUIRED for i in ids), within=20)
        # The same session, no new one: the service did not offer the jobs again; the cursor named them.
        assert [session.id for session in sim.state.sessions.values()] == [session_id]
        assert sum(1 for r in sim.requests if r.route == "create_session") == creates_before
        # The desired count after the replacement is what the service's statistics say (min 0 + assigned).
        assigned = sim.state.statistics(listener_sim.scale_set_id).total_assigned_jobs
        assert assigned == len(ids)
        await wait_for_replicas(kube, namespace, assigned)
