"""Random operation sequences on the sim's model never break its invariants (exactly-once, consistent stats)."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from arc_scaleset.clock import FakeClock
from arc_scaleset_lab.sim import errors
from arc_scaleset_lab.sim.state import JobState, SimState

OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("enqueue"), st.integers(1, 20)),
        st.tuples(st.just("register"), st.integers(0, 7)),
        st.tuples(st.just("online"), st.integers(0, 7)),
        st.tuples(st.just("exit"), st.integers(0, 7)),
        st.tuples(st.just("remove"), st.integers(0, 7)),
        st.tuples(st.just("acquire"), st.integers(0, 30)),
        st.tuples(st.just("advance"), st.integers(1, 10)),
        st.tuples(st.just("session"), st.integers(0, 1)),
    ),
    max_size=60,
)


def check_invariants(state: SimState, scale_set_id: int) -> None:
    stats = state.statistics(scale_set_id)
    assert stats.total_assigned_jobs == stats.total_acquired_jobs + stats.total_running_jobs
    assert stats.total_registered_runners == stats.total_busy_runners + stats.total_idle_runners
    assert stats.total_busy_runners == stats.total_running_jobs
    for job in state.jobs.values():
        assert job.run_count <= 1
        if job.state == JobState.RUNNING:
            runner = state.runners[job.runner_id or -1]
            assert runner.job_request_id == job.request_id
    busy = [r.job_request_id for r in state.runners.values() if r.busy]
    assert len(busy) == len(set(busy))


def run_operations(operations: list[tuple[str, int]]) -> None:
    async def scenario() -> None:
        clock = FakeClock()
        state = SimState(clock=clock)
        tenant = state.tenant_for_scope("org").id
        ss = state.create_scale_set(
            tenant, name="arc", runner_group_id=1, labels=[{"type": "System", "name": "arc"}], disable_update=True
        ).id
        refusals: list[int] = []
        for op, arg in operations:
            name = f"r{arg}"
            try:
                if op == "enqueue":
                    state.enqueue_job("arc", duration=arg)
                elif op == "register":
                    state.generate_jit_config(tenant, ss, name=name, work_folder="", service_url="u")
                elif op == "online":
                    state.runner_online(name)
                elif op == "exit":
                    state.runner_exit(name, exit_code=1)
                elif op == "remove":
                    found = state.runners_named(tenant, name)
                    if found:
                        state.remove_runner(tenant, found[0].id)
                elif op == "acquire":
                    state.acquire_jobs(ss, [1000 + arg, 1000 + arg + 1])
                elif op == "advance":
                    await clock.advance(arg)
                    state.complete_due_jobs()
                elif op == "session":
                    if ss in state.sessions:
                        state.delete_session(tenant, ss, state.sessions[ss].id)
                    else:
                        state.create_session(tenant, ss, owner="l")
            except errors.ActionsError as error:
                refusals.append(error.status)
            check_invariants(state, ss)
        # Refusals are the documented ones only (not found, conflict, bad request), never a crash.
        assert set(refusals) <= {400, 404, 409}
        # Drain: every acquired job eventually runs once some runner is online.
        state.generate_jit_config(tenant, ss, name="drain", work_folder="", service_url="u")
        for _ in range(100):
            for runner in list(state.runners.values()):
                state.runner_online(runner.name)
            await clock.advance(25)
            state.complete_due_jobs()
            if not any(j.state in (JobState.ACQUIRED, JobState.RUNNING) for j in state.jobs.values()):
                break
            state.generate_jit_config(tenant, ss, name=f"drain-{clock.monotonic()}", work_folder="", service_url="u")
        for job in state.jobs.values():
            assert job.state in (JobState.AVAILABLE, JobState.COMPLETED)
            assert job.run_count == (1 if job.state == JobState.COMPLETED else 0)
        check_invariants(state, ss)

    asyncio.run(scenario())


@settings(max_examples=150, deadline=None)
@given(OPERATIONS)
def test_any_sequence_of_operations_keeps_exactly_once_and_consistent_statistics(
    operations: list[tuple[str, int]],
) -> None:
    run_operations(operations)
