"""Failures a real installation meets: the controller killed in the middle of an update, the listener
process killed, the Actions service failing for a while. The system recovers from each without losing or
repeating a job, and without a duplicate or lost runner."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.kube.errors import KubeError
from arc_scaleset_lab.harness.system import System
from arc_scaleset_lab.sim.faults import FaultRule
from tests.e2e.harness import ScaleSetFactory, ScaleSetHandle, active_faults, session_of


async def _sample_applied_revision(runners: ScaleSetHandle, samples: list[int]) -> None:
    while True:
        with contextlib.suppress(KubeError):
            ers = await runners.system.kube.get(EPHEMERAL_RUNNER_SETS, runners.name, namespace=runners.namespace)
            samples.append(int((ers.get("status") or {}).get("appliedActionableRevision") or 0))
        await asyncio.sleep(0.1)


async def test_a_controller_killed_mid_update_converges_without_lost_or_duplicated_runners(
    system: System, scale_set: ScaleSetFactory
) -> None:
    runners = await scale_set.create(min_runners=2, max_runners=8)
    await runners.wait_ready()
    await runners.enqueue(3, duration=15.0)
    before = await runners.wait(lambda s: s.busy == 3, timeout=45, what="3 busy runners")
    samples: list[int] = []
    sampler = asyncio.create_task(_sample_applied_revision(runners, samples))
    try:
        await runners.change_template()
        await runners.wait(
            lambda s: s.desired_revision > before.desired_revision, timeout=30, what="the new revision on the ERS"
        )
        await system.kill_controller()
        await runners.enqueue(2, duration=3.0)  # work arriving while no controller runs
        await system.start_controller()

        await runners.assert_every_job_ran_once(timeout=120)
        settled = await runners.wait_settled(timeout=120)
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler

    assert samples, "the applied revision was sampled"
    assert samples == sorted(samples), f"the applied revision went backwards: {samples}"
    assert settled.applied_revision > before.applied_revision
    duplicates = {name: n for name, n in runners.tracker.names().items() if n > 1}
    assert not duplicates, f"runner names used by more than one EphemeralRunner: {duplicates}"

    async def registrations_match_live_runners() -> bool:
        # A runner still on its way out (finalizer pending) keeps its registration for a moment.
        live = {r.name for r in (await runners.snapshot()).live_runners()}
        return await runners.registered_runner_names() == live

    await runners.wait_until(
        registrations_match_live_runners,
        timeout=60,
        what="every registration to belong to a live runner and every live runner to be registered",
    )


async def test_a_killed_listener_is_recreated_by_the_controller_and_no_job_is_lost(
    system: System, scale_set: ScaleSetFactory
) -> None:
    runners = await scale_set.create(min_runners=1, max_runners=8)
    ready = await runners.wait_ready()
    assert ready.listener_name is not None
    first = system.listener_pids().get(ready.listener_name)
    assert first is not None, f"no listener process for pod {ready.listener_name}: {system.listener_pids()}"
    session = await session_of(system, ready.scale_set_id)
    assert session is not None

    await runners.enqueue(3, duration=3.0)
    os.kill(first, signal.SIGKILL)
    await runners.enqueue(3, duration=3.0)  # while no listener runs

    def new_listener_holds_the_session(snapshot: object) -> bool:
        pid = system.listener_pids().get(ready.listener_name or "")
        return pid is not None and pid != first and bool(getattr(snapshot, "session_owner", None))

    await runners.wait(new_listener_holds_the_session, timeout=90, what="a new listener process holding the session")
    await runners.assert_every_job_ran_once(timeout=90)
    # The jobs queued while no listener ran were taken by the replacement, on the session its predecessor recorded:
    # resumed from its cursor (docs/listener.md, "Leaving no gap"), not replaced by one of its own.
    assert await session_of(system, ready.scale_set_id) == session
    await runners.wait_settled()


async def test_the_system_recovers_after_the_actions_service_fails_for_a_while(
    system: System, scale_set: ScaleSetFactory
) -> None:
    runners = await scale_set.create(min_runners=1, max_runners=6)
    await runners.wait_ready()
    # Every protocol request fails with 503 until 25 of them have been refused: the listener's long poll,
    # its job acquisitions, the controller's JIT configs and runner removals alike.
    await system.sim.add_fault(FaultRule(route="*", status=503, count=25, message="service unavailable"))
    await runners.enqueue(5, duration=2.0)

    async def fault_spent() -> bool:
        return not await active_faults(system)

    await runners.wait_until(fault_spent, timeout=60, what="the 25 injected failures to be consumed")
    await runners.assert_every_job_ran_once(timeout=120)
    await runners.wait_settled(timeout=120)
