"""A listener killed with SIGKILL every 60 s for 10 minutes under a steady workload leaves no gap (issue 30;
docs/listener.md, "Leaving no gap" and "Standby listener").

Two scale sets of one controller, in two namespaces, get the same seeded workload at the same instants. One has a
standby listener (annotation ``listener.arc-scaleset.dev/standby``): two listener pods, the real ``arc-scaleset
listener`` the lab's node agent runs for each, one holding the pair's Lease. The **active** one's process (the Lease
holder) is killed every 60 s: its peer, warmed up, takes the session over, and the controller replaces the dead pod,
which becomes the next standby. The other set's listener is never killed: the run without kills, measured in the
same minutes on the same machine, so a busy machine slows both alike. Shown:

- every job of both sets runs exactly once;
- each takeover resumes its predecessor's session (what the service delivered to the dead listener is delivered
  again, not dropped with a new session), and the desired count on the EphemeralRunnerSet then equals what the
  service's statistics say: no scale decision lost or doubled;
- the gap after each kill (from the kill to the new active listener's first poll, as the service saw it) is under
  :data:`TAKEOVER_BOUND` at the median: a takeover, not a new process's start (1.7-1.9 s p50 without a standby);
- issue 30's bound, the killed set's queue-to-start p95 within 10% of the calm set's, or within
  :data:`P95_NOISE_FLOOR` of it when that is more. Why a floor: the p95s are sub-second (the 13th slowest of 260
  jobs, set by the lab's runner start on a loaded machine), and 10% of them is 30-35 ms, less than the calm set's
  own p95 moves between two runs of the same workload (0.32 s and 0.35 s, docs/listener.md): 10% alone would
  measure the machine, not the gap. The floor still fails a set that falls behind the way one without a standby
  did (0.53 s behind at load 9), and the median gap is asserted on its own, since at 0.4 jobs a second the jobs
  that arrive during ten sub-second gaps are too few to move a p95 at all.
Printed: each gap and both sets' queue-to-start percentiles.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from arc_scaleset.api.listener_standby import ANNOTATION_STANDBY, STANDBY_VALUE, standby_lease_name, standby_pod_names
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.resources import LEASES
from arc_scaleset_lab.demo.summary import audit_jobs, percentile, queue_latencies
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.scale_sets import ScaleSetSnapshot
from arc_scaleset_lab.harness.system import System, SystemOptions
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim.workload import WorkloadSpec, run_workload
from tests.e2e.harness import (
    REPOSITORY,
    ScaleSetFactory,
    ScaleSetHandle,
    describe,
    session_of,
    started_system,
)

KILL_EVERY: Final = 60.0
KILLS: Final = 10
MIN_RUNNERS: Final = 2
MAX_RUNNERS: Final = 12
WORKLOAD: Final = WorkloadSpec(
    jobs=260,  # at 0.4 a second: about 650 s, past the last kill
    rate=0.4,
    duration_min=5.0,
    duration_max=15.0,
    seed=30,
    repositories=(REPOSITORY,),
)
TAKEOVER_BOUND: Final = 1.0
"""Seconds: the median gap from a kill to the new active listener's first poll (a standby takes over within a
fraction of a second; a new process needs 1.7-1.9 s at the median to start, docs/listener.md)."""
P95_RATIO: Final = 1.10
P95_NOISE_FLOOR: Final = 0.15
"""Seconds the killed set's queue-to-start p95 may exceed the calm set's besides :data:`P95_RATIO` (module
docstring)."""
REPLACEMENT_BOUND: Final = 60.0
"""Seconds a replacement may take to poll (the gap measured is seconds; this only bounds a failing run)."""
SESSION_OPENED: Final = frozenset({"refresh_session", "create_session"})

STANDBY: Final = {ANNOTATION_STANDBY: STANDBY_VALUE}
RUN_ID = uuid.uuid4().hex[:6]
KILLED_NAMESPACE = f"e2e-kills-{RUN_ID}"
CALM_NAMESPACE = f"e2e-calm-{RUN_ID}"

pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
async def two_namespaces(cluster: TestCluster, request: pytest.FixtureRequest) -> AsyncIterator[System]:
    """A system of this module's own whose controller serves both namespaces (``--watch-namespace`` and
    ``--watch-single-namespace`` each add theirs) and nothing else on the shared cluster."""
    workdir = Path(tempfile.mkdtemp(prefix="arc-scaleset-e2e-kills-"))
    options = SystemOptions(
        controller_namespace=f"arc-{KILLED_NAMESPACE}",
        watch_namespace=KILLED_NAMESPACE,
        controller_args=(f"--watch-single-namespace={CALM_NAMESPACE}",),
        long_poll_seconds=2.0,  # the sim's session expiry stays the service's (about 2 minutes)
    )
    try:
        async with started_system(
            workdir, kubeconfig=cluster.kubeconfig, namespace=KILLED_NAMESPACE, options=options
        ) as running:
            await running.ensure_namespace(CALM_NAMESPACE, labels={"arc-scaleset.dev/test": "true"})
            yield running
    finally:
        if request.session.testsfailed:
            print(f"\ne2e logs kept in {workdir / 'logs'}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


@dataclass
class Replacement:
    """What one kill led to."""

    gap: float
    """Seconds from the kill to the replacement's first poll, as the service saw it."""
    session: str | None
    """The scale set's session once the replacement polls."""
    desired_matched: bool
    """The EphemeralRunnerSet's desired count came to equal the service's statistics afterwards."""


@dataclass
class KillRun:
    """The 10-minute run, for the tests to assert on: the sets (still there), the session before the first kill,
    each kill's :class:`Replacement`, every job once completed."""

    killed: ScaleSetHandle
    calm: ScaleSetHandle
    session: str
    replacements: list[Replacement]
    killed_jobs: list[dict[str, Any]]
    calm_jobs: list[dict[str, Any]]

    def figures(self) -> str:
        gaps = [r.gap for r in self.replacements]
        return (
            f"{len(gaps)} kills, gap from kill to the replacement's first poll: p50 {statistics.median(gaps):.2f} s, "
            f"max {max(gaps):.2f} s ({' '.join(f'{g:.2f}' for g in gaps)}); queue-to-start of "
            f"{len(self.killed_jobs)} jobs (p50 p90 p95 p97 p99 s): killed {quantiles(self.killed_jobs)}, without "
            f"kills {quantiles(self.calm_jobs)}; runners created: killed {self.killed.tracker.created}, without kills "
            f"{self.calm.tracker.created}"
        )


@pytest.fixture(scope="module")
async def kill_run(two_namespaces: System) -> AsyncIterator[KillRun]:
    """Both sets under the workload, the killed one's listener killed every minute; the sets are deleted after
    the module's tests."""
    system = two_namespaces
    factories = [
        ScaleSetFactory(system, namespace=KILLED_NAMESPACE, stem="killed"),
        ScaleSetFactory(system, namespace=CALM_NAMESPACE, stem="calm"),
    ]
    try:
        killed = await factories[0].create(min_runners=MIN_RUNNERS, max_runners=MAX_RUNNERS, annotations=STANDBY)
        calm = await factories[1].create(min_runners=MIN_RUNNERS, max_runners=MAX_RUNNERS)
        ready = await killed.wait_ready(timeout=90)
        await calm.wait_ready(timeout=90)
        assert ready.listener_name is not None
        await eventually(lambda: standby_ready(system, ready.listener_name or ""), "a standby listener", timeout=90)
        session = await session_of(system, ready.scale_set_id)
        assert session is not None
        workload = asyncio.create_task(run_workload(WORKLOAD, enqueue_on(system, killed, calm)), name="workload")
        try:
            replacements = await kill_every_minute(system, killed, ready, started=time.monotonic())
            await workload
        finally:
            workload.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await workload
        run = KillRun(
            killed=killed,
            calm=calm,
            session=session,
            replacements=replacements,
            killed_jobs=await killed.wait_jobs_completed(timeout=180),
            calm_jobs=await calm.wait_jobs_completed(timeout=180),
        )
        print(f"\n{run.figures()}")
        yield run
    finally:
        for factory in factories:
            await factory.delete_all()


async def test_a_listener_killed_every_minute_for_ten_minutes_loses_no_job_and_no_scale_decision(
    kill_run: KillRun,
) -> None:
    for jobs in (kill_run.killed_jobs, kill_run.calm_jobs):
        audit = audit_jobs(jobs)
        assert audit.exactly_once, audit
        assert audit.succeeded == audit.total, audit
    # Resumed, not replaced: a new session would have dropped what the dead listener had been delivered.
    assert [r.session for r in kill_run.replacements] == [kill_run.session] * KILLS, kill_run.figures()
    assert all(r.desired_matched for r in kill_run.replacements), kill_run.replacements
    await kill_run.killed.wait_settled(timeout=120)


async def test_a_standby_takes_over_within_a_fraction_of_a_second_and_keeps_queue_to_start(
    kill_run: KillRun,
) -> None:
    gaps = [r.gap for r in kill_run.replacements]
    assert statistics.median(gaps) < TAKEOVER_BOUND, kill_run.figures()
    killed = percentile(queue_latencies(kill_run.killed_jobs), 0.95)
    calm = percentile(queue_latencies(kill_run.calm_jobs), 0.95)
    assert killed <= max(calm * P95_RATIO, calm + P95_NOISE_FLOOR), kill_run.figures()


def enqueue_on(system: System, *handles: ScaleSetHandle) -> Any:
    """The workload's ``enqueue``: each planned job enqueued for every set at once (its labels: the set's name)."""

    async def enqueue(labels: Sequence[str], repository: str, duration: float, display_name: str) -> int:
        async def one(handle: ScaleSetHandle) -> int:
            [job_id] = await system.sim.enqueue_job(
                [handle.name], repository=repository, duration=duration, display_name=display_name
            )
            handle.job_ids.append(job_id)
            return job_id

        ids = await asyncio.gather(*(one(handle) for handle in handles))
        return ids[0]

    return enqueue


async def kill_every_minute(
    system: System, killed: ScaleSetHandle, ready: ScaleSetSnapshot, *, started: float
) -> list[Replacement]:
    """SIGKILL the set's listener every :data:`KILL_EVERY` seconds from ``started``, :data:`KILLS` times; after each
    kill wait for the replacement's first poll and see what it resumed and published."""
    listener, scale_set_id = ready.listener_name, ready.scale_set_id
    assert listener is not None
    assert scale_set_id is not None
    replacements = []
    for kill in range(1, KILLS + 1):
        # The schedule of the fault, not a synchronisation: the kill lands whatever the system is doing.
        await asyncio.sleep(max(0.0, started + kill * KILL_EVERY - time.monotonic()))
        active = await lease_holder(system, listener)
        pid = system.listener_pids().get(active or "")
        assert pid is not None, f"kill {kill}: no active listener process for {listener} ({active}); {describe(ready)}"
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        first_poll = await replacement_first_poll(system, scale_set_id, after=killed_at)
        replacements.append(
            Replacement(
                gap=first_poll - killed_at,
                session=await session_of(system, scale_set_id),
                desired_matched=await desired_count_matches_statistics(system, killed, scale_set_id),
            )
        )
    return replacements


async def lease_holder(system: System, listener: str) -> str | None:
    """The pod of the listener's standby pair that holds its Lease (the active listener), or ``None``."""
    try:
        lease = await system.kube.get(LEASES, standby_lease_name(listener), namespace=system.controller_namespace)
    except NotFound:
        return None
    return ((lease.get("spec") or {}).get("holderIdentity")) or None


async def standby_ready(system: System, listener: str) -> bool:
    """Both processes of the pair run and one holds the Lease: the other stands by, warmed up."""
    running = system.listener_pids()
    return await lease_holder(system, listener) is not None and all(
        pod in running for pod in standby_pod_names(listener)
    )


async def replacement_first_poll(system: System, scale_set_id: int, *, after: float) -> float:
    """When (``time.monotonic()``) the service saw the first poll of the listener that opened the scale set's
    session after ``after``: the end of the gap a kill at ``after`` left."""

    async def first_poll() -> float | None:
        return first_poll_after_opening(await system.sim.requests(scale_set_id=scale_set_id, after=after))

    found: float = await eventually(first_poll, what="the replacement listener's first poll", timeout=REPLACEMENT_BOUND)
    return found


def first_poll_after_opening(requests: Sequence[Mapping[str, Any]]) -> float | None:
    """The arrival of the first poll that follows the first session opened (refreshed or created) in
    ``requests``; ``None`` before there is one. A poll the dead listener had sent does not follow an opening."""
    ordered = sorted(requests, key=lambda r: float(r["at"]))
    opened = next((r["at"] for r in ordered if r["route"] in SESSION_OPENED and r["status"] < 300), None)
    if opened is None:
        return None
    return next((float(r["at"]) for r in ordered if r["route"] == "get_message" and r["at"] > opened), None)


async def desired_count_matches_statistics(system: System, handle: ScaleSetHandle, scale_set_id: int) -> bool:
    """Whether the EphemeralRunnerSet's ``replicas`` comes to be what the service's statistics ask for (the minimum
    plus the assigned jobs, at most the maximum), read between two identical readings of the statistics."""

    async def assigned() -> int:
        sets = await system.sim.scale_sets()
        return int(next(s for s in sets if s["id"] == scale_set_id)["statistics"]["totalAssignedJobs"])

    async def matches() -> bool:
        before = await assigned()
        replicas = (await handle.snapshot()).replicas
        return before == await assigned() and replicas == min(handle.min_runners + before, MAX_RUNNERS)

    try:
        await eventually(matches, what="the desired count to equal the statistics", timeout=30)
    except TimeoutError:
        return False
    return True


def quantiles(jobs: Sequence[Mapping[str, Any]]) -> str:
    latencies = queue_latencies(jobs)
    return " ".join(f"{percentile(latencies, q):.2f}" for q in (0.50, 0.90, 0.95, 0.97, 0.99))
