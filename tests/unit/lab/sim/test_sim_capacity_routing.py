"""The simulated service offers a job only to a scale set with capacity left, and any set whose labels match may
take it (docs/capacity.md): the capacity a session's last poll advertised, minus the set's unfinished jobs."""

from __future__ import annotations

from arc_scaleset.clock import FakeClock
from arc_scaleset_lab.sim.state import JobState, Session, SimState

LABELS = [{"type": "System", "name": "linux"}]


def two_sets() -> tuple[SimState, FakeClock, int, int, int]:
    """One tenant with two scale sets of the same labels (``first`` older than ``sibling``)."""
    clock = FakeClock()
    state = SimState(clock=clock)
    tenant = state.tenant_for_scope("org").id
    first = state.create_scale_set(tenant, name="first", runner_group_id=1, labels=LABELS, disable_update=True).id
    sibling = state.create_scale_set(tenant, name="sibling", runner_group_id=1, labels=LABELS, disable_update=True).id
    return state, clock, tenant, first, sibling


def polling(state: SimState, tenant: int, scale_set: int, capacity: int) -> Session:
    session = state.create_session(tenant, scale_set, owner=f"listener-{scale_set}")
    state.advertise_capacity(session, capacity)
    return session


def held_by(state: SimState, scale_set: int) -> int:
    return sum(1 for j in state.jobs.values() if j.scale_set_id == scale_set and j.state != JobState.COMPLETED)


def test_a_burst_beyond_a_sets_capacity_goes_to_its_sibling_with_the_same_labels() -> None:
    state, _, tenant, first, sibling = two_sets()
    polling(state, tenant, first, 5)
    polling(state, tenant, sibling, 20)

    for _ in range(20):
        state.enqueue_job("linux")

    assert held_by(state, first) == 5
    assert held_by(state, sibling) == 15
    assert all(job.state == JobState.AVAILABLE for job in state.jobs.values())


def test_a_job_no_set_has_room_for_waits_queued_until_a_finished_job_frees_a_slot() -> None:
    state, _, tenant, first, _ = two_sets()
    polling(state, tenant, first, 1)
    state.runner_online(state.generate_jit_config(tenant, first, name="r1", work_folder="", service_url="u")[0].name)
    held = state.enqueue_job("linux", duration=10)
    state.acquire_jobs(first, [held.request_id])
    waiting = state.enqueue_job("linux")
    assert held.state == JobState.RUNNING
    assert waiting.state == JobState.QUEUED
    assert waiting.scale_set_id is None

    state.runner_exit("r1")

    assert waiting.state == JobState.AVAILABLE
    assert waiting.scale_set_id == first


def test_a_poll_that_advertises_more_capacity_is_offered_the_queued_jobs() -> None:
    state, _, tenant, first, _ = two_sets()
    session = polling(state, tenant, first, 0)
    job = state.enqueue_job("linux")
    assert job.state == JobState.QUEUED

    state.advertise_capacity(session, 1)

    assert (job.state, job.scale_set_id) == (JobState.AVAILABLE, first)


def test_acquired_and_running_jobs_count_against_the_capacity_until_they_finish() -> None:
    state, _, tenant, first, sibling = two_sets()
    polling(state, tenant, first, 2)
    polling(state, tenant, sibling, 10)
    jobs = [state.enqueue_job("linux") for _ in range(2)]
    assert state.acquire_jobs(first, [j.request_id for j in jobs]) == [j.request_id for j in jobs]

    third = state.enqueue_job("linux")

    assert third.scale_set_id == sibling


def test_without_any_advertised_capacity_the_oldest_matching_set_takes_the_job_as_before() -> None:
    state, _, tenant, first, _ = two_sets()
    state.create_session(tenant, first, owner="listener")  # a client that sends no X-ScaleSetMaxCapacity

    jobs = [state.enqueue_job("linux") for _ in range(3)]

    assert {(j.state, j.scale_set_id) for j in jobs} == {(JobState.AVAILABLE, first)}


def test_a_set_without_a_session_takes_no_job_while_a_polling_sibling_has_room() -> None:
    state, _, tenant, _, sibling = two_sets()
    polling(state, tenant, sibling, 3)

    job = state.enqueue_job("linux")

    assert job.scale_set_id == sibling
