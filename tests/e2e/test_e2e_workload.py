"""A scale set under a workload, as a user runs it: every job runs exactly once, and a runner-template change
made while runners are busy lets them finish their jobs, replaces the idle ones, and ends with every runner
at the new revision."""

from __future__ import annotations

from tests.e2e.harness import ScaleSetFactory


async def test_a_workload_of_jobs_all_run_exactly_once_and_the_set_returns_to_its_minimum(
    scale_set: ScaleSetFactory,
) -> None:
    runners = await scale_set.create(min_runners=1, max_runners=10)
    await runners.wait_ready()

    for _ in range(4):
        await runners.enqueue(5, duration=2.0)
        await runners.wait(lambda s: s.busy > 0, timeout=30, what="runners taking the jobs")

    await runners.assert_every_job_ran_once(timeout=90)
    settled = await runners.wait_settled()
    assert runners.tracker.created > runners.min_runners, "the set scaled up for the jobs"
    assert len(settled.live_runners()) == runners.min_runners


async def test_a_template_change_lets_busy_runners_finish_and_replaces_idle_ones(scale_set: ScaleSetFactory) -> None:
    runners = await scale_set.create(min_runners=2, max_runners=8)
    await runners.wait_ready()
    await runners.enqueue(3, duration=15.0)
    before = await runners.wait(
        lambda s: s.busy == 3 and s.idle_running >= 1, timeout=45, what="3 busy runners and an idle one"
    )
    busy = {r.name for r in before.live_runners() if r.busy}
    idle = {r.name for r in before.live_runners() if not r.busy}
    old_revision = before.desired_revision

    await runners.change_template()

    rolled = await runners.wait(
        lambda s: (
            s.desired_revision > old_revision
            and s.applied_revision == s.desired_revision
            and not any(r.name in idle for r in s.runners)
            and any(not r.busy and r.revision == s.desired_revision for r in s.live_runners())
        ),
        timeout=30,
        what="the new revision applied: old idle runners gone, a new idle runner in their place",
    )
    still_there = {r.name for r in rolled.live_runners()}
    assert busy <= still_there, "busy runners are never taken away from their jobs"
    assert all(r.revision == old_revision for r in rolled.live_runners() if r.name in busy)

    jobs = await runners.wait_jobs_completed(timeout=60)
    assert {j["runnerName"] for j in jobs} == busy, "each job finished on the runner that started it"
    assert all(j["runCount"] == 1 and j["result"] == "succeeded" for j in jobs)
    settled = await runners.wait_settled()
    assert {r.revision for r in settled.live_runners()} == {settled.desired_revision}
    # A finished runner may still be on its way out (finalizers) when the set first rests: wait for it.
    await runners.wait(
        lambda s: not busy & {r.name for r in s.runners},
        timeout=60,
        what="old-revision runners gone once their jobs end",
    )
