"""Finished jobs stay on their EphemeralRunnerSet after their runners are gone (``status.recentJobs``, issue 29):
the runner controller completes the job's timeline with its pod's milestones when it writes ``Succeeded``, and
the set keeps the record, newest first, bounded by count. Against the real control plane, the simulated GitHub
and kwok pods; the listener's record on each runner is written as the listener writes it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.job_timeline import Milestone, listener_milestones
from arc_scaleset.api.job_window import WindowBounds, window_timelines
from arc_scaleset.kube.client import PatchType
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import harness_fixture  # noqa: F401 - fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

KEPT = 2
LISTENER_SIDE = {Milestone.QUEUED, Milestone.ACQUIRED, Milestone.ASSIGNED, Milestone.STARTED}
POD_SIDE = {Milestone.POD_CREATED, Milestone.POD_RUNNING, Milestone.RUNNER_ONLINE, Milestone.FINISHED}


async def _record_as_the_listener(h: ControllerHarness, name: str) -> None:
    """The listener's half of the job's timeline on runner ``name``, as it writes it when the job starts."""
    now = dt.datetime.now(dt.UTC)
    timeline = listener_milestones(
        queued=now - dt.timedelta(seconds=30),
        acquired=now - dt.timedelta(seconds=29),
        assigned=now - dt.timedelta(seconds=2),
        started=now - dt.timedelta(seconds=1),
    )
    await h.kube.patch(EPHEMERAL_RUNNERS, name, {"status": {"jobTimeline": timeline}}, namespace=h.namespace,
                       subresource="status", patch_type=PatchType.MERGE)  # fmt: skip


def _without(name: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda runners: name not in {runner["metadata"]["name"] for runner in runners}


async def _window(h: ControllerHarness) -> list[dict[str, Any]]:
    return list(((await h.get_ers()).get("status") or {}).get("recentJobs") or [])


async def test_finished_jobs_stay_on_the_set_with_their_whole_timeline_after_their_runners_are_gone_up_to_a_bound(
    h: ControllerHarness,
) -> None:
    await h.start(ers_options={"job_window": WindowBounds(max_jobs=KEPT)})
    await h.create_ers(replicas=3, patch_id=0)
    names = [runner["metadata"]["name"] for runner in await h.wait_running(3)]
    for name in names:
        await h.make_busy(name)
        await _record_as_the_listener(h, name)
    await h.patch_ers(replicas=0, patchID=0)  # nothing replaces the runners once their jobs end

    finished: list[str] = []
    for name in names:
        h.sim.state.runner_exit(name)  # the job ends on GitHub's side, then the runner process exits 0
        await h.finish_pod(name, exit_code=0)
        finished.insert(0, name)
        await h.wait_runners(_without(name), what=f"runner {name} deleted")
        expected = finished[:KEPT]

        async def kept(expected: list[str] = expected) -> list[dict[str, Any]] | None:
            window = await _window(h)
            return window if [record["runner"] for record in window] == expected else None

        window = await eventually(kept, what=f"the set keeping {expected}, newest first")

    # Each kept job has both halves of its timeline: the listener's and the pod's (online, though the finished pod
    # is no longer Ready; finished).
    for timeline in window_timelines(window, now=dt.datetime.now(dt.UTC)):
        assert timeline.milestones.keys() >= LISTENER_SIDE
        assert timeline.milestones.keys() >= POD_SIDE
        assert timeline.repository == "org/repo"
        assert timeline.job_id
        assert sum(timeline.wait_phases().values()) == pytest.approx(29, abs=1)
        assert timeline.run_seconds is not None
    assert names[0] not in {record["runner"] for record in window}, "the oldest job left the bounded window"
