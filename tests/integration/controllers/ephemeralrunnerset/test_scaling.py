"""EphemeralRunnerSet scaling against the real control plane, the simulated GitHub and kwok pods."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import started_harness_fixture  # noqa: F401 - fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


def annotations_of(runner: dict[str, Any]) -> dict[str, str]:
    return runner["metadata"].get("annotations") or {}


async def test_scale_up_from_zero_then_down_to_min_then_to_zero(h: ControllerHarness) -> None:
    await h.create_ers(replicas=0, patch_id=0)
    await eventually(_phase(h, "Running"), what="ERS phase Running")

    await h.patch_ers(replicas=4, patchID=0)
    runners = await h.wait_running(4)
    assert {annotations_of(r)["actions.github.com/patch-id"] for r in runners} == {"0"}
    assert {annotations_of(r)["actions.github.com/actionable-revision"] for r in runners} == {"0"}
    assert h.registered() == {r["metadata"]["name"] for r in runners}
    pods = await h.pods()
    assert sorted(p["metadata"]["name"] for p in pods) == sorted(r["metadata"]["name"] for r in runners)

    # One runner busy: scale-down to 1 (patchID 0 = authoritative) removes only idle ones.
    busy = runners[0]["metadata"]["name"]
    await h.make_busy(busy)
    await h.patch_ers(replicas=1, patchID=0)
    remaining = await h.wait_runners(lambda rs: [r["metadata"]["name"] for r in rs] == [busy], what="only busy left")
    assert remaining[0]["status"]["jobId"]
    assert h.registered() == {busy}

    # To zero: the busy runner is never removed; it goes when its job ends (exit 0 -> Succeeded -> deleted).
    await h.patch_ers(replicas=0, patchID=0)
    await h.wait_runners(lambda rs: [r["metadata"]["name"] for r in rs] == [busy], what="busy runner kept")
    h.sim.state.runner_exit(busy)  # job ends on the GitHub side
    await h.finish_pod(busy, exit_code=0)
    await h.wait_runners(lambda rs: rs == [], what="no runners")
    assert h.registered() == set()


async def test_nonzero_patch_scales_up_once_and_never_down(h: ControllerHarness) -> None:
    await h.create_ers(replicas=3, patch_id=1)
    runners = await h.wait_running(3)
    assert {annotations_of(r)["actions.github.com/patch-id"] for r in runners} == {"1"}
    # Same patch ID, fewer replicas: nothing happens (no scale-down on a non-zero patch).
    await h.patch_ers(replicas=1)
    await h.patch_ers(replicas=1, patchID=2)
    await h.wait_running(3)
    # A higher replica count under a new patch ID tops up.
    await h.patch_ers(replicas=5, patchID=3)
    runners = await h.wait_running(5)
    assert sorted(annotations_of(r)["actions.github.com/patch-id"] for r in runners) == ["1", "1", "1", "3", "3"]


async def test_finished_runners_are_kept_until_the_next_patch_and_not_replaced_in_the_patch_that_reaps_them(
    h: ControllerHarness,
) -> None:
    await h.create_ers(replicas=2, patch_id=1)
    runners = await h.wait_running(2)
    done = runners[0]["metadata"]["name"]
    # Keep the ER controller from deleting its own Succeeded runner: stop it, mark Succeeded by hand (the
    # state a crash between "mark Succeeded" and "delete" leaves), restart without the ER controller.
    await h.stop()
    await h.kube.patch(EPHEMERAL_RUNNERS, done, {"status": {"phase": "Succeeded"}}, namespace=h.namespace,
                       subresource="status")  # fmt: skip
    await h.start("EphemeralRunnerSet")
    # Same patch ID (gate closed: runners carry patch 1): the finished runner is kept.
    await h.patch_ers(replicas=2)
    ers = await h.get_ers()
    assert ers["status"].get("finishedRunnerCleanupPatchID", 0) == 0
    assert done in {r["metadata"]["name"] for r in await h.runners()}

    # The listener publishes patch 2 (still 2 replicas: it has not yet seen the job complete). The finished
    # runner is reaped, the marker records 2, and NO replacement is created under patch 2.
    await h.patch_ers(replicas=2, patchID=2)
    await h.wait_runners(
        lambda rs: all(r["metadata"].get("deletionTimestamp") for r in rs if r["metadata"]["name"] == done),
        what="finished runner reaped",
    )
    ers = await eventually(_marker_is(h, 2), what="marker 2")
    assert ers["status"]["finishedRunnerCleanupPatchID"] == 2
    # The ER controller finishes the deletion; the set still creates nothing under patch 2.
    await h.stop()
    await h.start()
    await h.wait_runners(lambda rs: done not in {r["metadata"]["name"] for r in rs}, what="finished runner gone")
    await h.patch_ers(replicas=2)  # another pass under patch 2
    await eventually(_phase(h, "Running"), what="reconciled")
    live = await h.live_runners()
    assert len(live) == 1
    assert annotations_of(live[0])["actions.github.com/patch-id"] == "1"

    # The next patch (the listener's decrement arrived: 1 replica) -> nothing to create; a later patch that
    # asks for 2 creates one under the new patch ID.
    await h.patch_ers(replicas=1, patchID=3)
    await h.patch_ers(replicas=2, patchID=4)
    runners = await h.wait_runners(lambda rs: len(rs) == 2, what="scaled up under patch 4")
    assert sorted(annotations_of(r)["actions.github.com/patch-id"] for r in runners) == ["1", "4"]


async def test_deleting_runners_count_toward_the_total_so_nothing_is_replaced_twice(h: ControllerHarness) -> None:
    await h.create_ers(replicas=2, patch_id=0)
    runners = await h.wait_running(2)
    busy = runners[0]["metadata"]["name"]
    await h.make_busy(busy)
    # Delete the busy runner: its finalizer waits (JobStillRunning, requeue 30 s), so it lingers as "deleting".
    await h.kube.delete(EPHEMERAL_RUNNERS, busy, namespace=h.namespace)
    await h.wait_runners(lambda rs: any(r["metadata"].get("deletionTimestamp") for r in rs), what="deleting")
    # Poke the set a few times: it must not create a replacement while the deleting runner holds its slot.
    for _ in range(3):
        await h.patch_ers(replicas=2, patchID=0)
    await eventually(_phase(h, "Running"), what="reconciled")
    assert len(await h.runners()) == 2


def _phase(h: ControllerHarness, phase: str) -> Any:
    async def check() -> bool:
        return bool((await h.get_ers()).get("status", {}).get("phase") == phase)

    return check


def _marker_is(h: ControllerHarness, value: int) -> Any:
    async def check() -> dict[str, Any] | None:
        ers = await h.get_ers()
        return ers if ers.get("status", {}).get("finishedRunnerCleanupPatchID") == value else None

    return check
