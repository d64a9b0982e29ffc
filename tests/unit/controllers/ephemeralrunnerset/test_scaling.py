"""The EphemeralRunnerSet's pure decisions: classification, the scaling plan, the revision status."""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from arc_scaleset.api.keys import EphemeralRunnerSetPhase
from arc_scaleset.controllers.ephemeralrunnerset.revision import (
    applied_revision_changes,
    finished_marker_changes,
    phase_changes,
)
from arc_scaleset.controllers.ephemeralrunnerset.scaling import SetSpec, Step, plan_scaling, revision_cleanup
from arc_scaleset.controllers.runner_classification import RunnerView, classify

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
OLD = NOW - dt.timedelta(hours=1)


def runner(name: str, phase: str = "", *, runner_id: int = 1, job: str = "", patch: int = 0, revision: int = 0,
           deleting: bool = False, created: dt.datetime = OLD) -> RunnerView:  # fmt: skip
    return RunnerView(name=name, namespace="ns", created=created, deleting=deleting, phase=phase,
                      runner_id=runner_id, job_id=job, patch_id=patch, revision=revision)  # fmt: skip


def plan(spec: SetSpec, runners: list[RunnerView], **kw: Any) -> Any:
    return plan_scaling(spec, classify(runners, applied_revision=spec.applied_revision), now=NOW, **kw)


# -- classification ---------------------------------------------------------------------------------------


def test_classification_sorts_by_phase_with_deletion_first_and_outdated_split_by_revision() -> None:
    states = classify(
        [
            runner("p", ""),
            runner("p2", "Pending"),
            runner("r", "Running"),
            runner("s", "Succeeded"),
            runner("f", "Failed"),
            runner("o-current", "Outdated", revision=3),
            runner("o-stale", "Outdated", revision=2),
            runner("d", "Running", deleting=True, patch=9),
        ],
        applied_revision=3,
    )
    assert [r.name for r in states.pending] == ["p", "p2"]
    assert [r.name for r in states.running] == ["r"]
    assert [r.name for r in states.finished] == ["s"]
    assert [r.name for r in states.failed] == ["f"]
    assert [r.name for r in states.outdated] == ["o-current"]
    assert [r.name for r in states.stale_outdated] == ["o-stale"]
    assert [r.name for r in states.deleting] == ["d"]
    assert states.latest_patch_id == 9  # deleting runners count for the gate
    assert states.total == 4
    assert states.scale_up_total == 5


def test_runner_view_reads_missing_or_garbage_annotations_as_zero() -> None:
    view = RunnerView.of(
        {
            "metadata": {"name": "x", "annotations": {"actions.github.com/patch-id": "abc"}},
            "status": {"runnerId": "7"},
        }
    )
    assert (view.patch_id, view.revision, view.runner_id) == (0, 0, 0)


# -- the scaling plan -------------------------------------------------------------------------------------


def test_patch_zero_scales_up_to_replicas() -> None:
    result = plan(SetSpec(replicas=3, patch_id=0), [runner("a", "Running")])
    assert (result.step, result.create, result.check_finished_marker) == (Step.SCALE_UP, 2, False)


def test_nonzero_patch_is_acted_on_only_until_a_runner_carries_it() -> None:
    open_gate = plan(SetSpec(replicas=3, patch_id=5), [runner("a", "Running", patch=4)])
    assert (open_gate.step, open_gate.create, open_gate.check_finished_marker) == (Step.SCALE_UP, 2, True)
    closed = plan(SetSpec(replicas=3, patch_id=5), [runner("a", "Running", patch=5)])
    assert closed.step is Step.GATE_CLOSED
    assert closed.create == 0


def test_nonzero_patch_never_scales_down() -> None:
    result = plan(SetSpec(replicas=1, patch_id=5), [runner("a", "Running"), runner("b", "Running")])
    assert result.step is Step.STEADY
    assert result.cleanup.empty


def test_patch_zero_scales_down_idle_runners_pending_first_oldest_first() -> None:
    runners = [
        runner("busy", "Running", job="j", created=OLD),
        runner("run-old", "Running", created=OLD),
        runner("pend-new", "Pending", created=OLD + dt.timedelta(minutes=2)),
        runner("pend-old", "Pending", created=OLD + dt.timedelta(minutes=1)),
        runner("unregistered", "Pending", runner_id=0, created=OLD),
    ]
    result = plan(SetSpec(replicas=2, patch_id=0), runners)
    assert result.step is Step.SCALE_DOWN
    assert [r.name for r in result.cleanup.remove] == ["pend-old", "pend-new", "run-old"]
    assert result.cleanup.remove_limit == 3


def test_finished_runners_are_reaped_with_the_marker_instead_of_scaling() -> None:
    result = plan(SetSpec(replicas=3, patch_id=8), [runner("done", "Succeeded", patch=7)])
    assert result.step is Step.REAP_FINISHED
    assert result.record_finished_marker == 8
    assert [r.name for r in result.cleanup.delete] == ["done"]
    assert result.create == 0


def test_finished_runners_are_kept_while_the_gate_is_closed() -> None:
    result = plan(SetSpec(replicas=3, patch_id=8), [runner("done", "Succeeded", patch=8)])
    assert result.step is Step.GATE_CLOSED
    assert result.cleanup.empty


def test_deleting_runners_count_toward_the_scale_up_total() -> None:
    result = plan(SetSpec(replicas=3, patch_id=0), [runner("a", "Running"), runner("gone", "Running", deleting=True)])
    assert result.create == 1


def test_stale_outdated_runners_are_deleted_and_do_not_make_the_set_outdated() -> None:
    result = plan(SetSpec(replicas=1, patch_id=0, applied_revision=2), [runner("old", "Outdated", revision=1)])
    assert result.step is Step.DELETE_STALE_OUTDATED
    assert result.phase is EphemeralRunnerSetPhase.RUNNING
    assert [r.name for r in result.cleanup.delete] == ["old"]


def test_current_outdated_runner_holds_the_set_outdated_and_keeps_busy_runners() -> None:
    runners = [
        runner("evidence", "Outdated", revision=2),
        runner("idle", "Running"),
        runner("busy", "Running", job="j"),
        runner("done", "Succeeded"),
    ]
    result = plan(SetSpec(replicas=5, patch_id=0, applied_revision=2), runners)
    assert result.step is Step.OUTDATED_HOLD
    assert result.phase is EphemeralRunnerSetPhase.OUTDATED
    assert result.create == 0
    assert [r.name for r in result.cleanup.delete] == ["done"]
    assert [r.name for r in result.cleanup.remove] == ["idle"]


def test_failed_runners_are_reaped_once_old_enough_and_requeued_until_then() -> None:
    young = runner("young", "Failed", created=NOW - dt.timedelta(seconds=20))
    result = plan(SetSpec(replicas=1, patch_id=0), [young], failed_runner_min_age=60)
    assert result.step is Step.STEADY
    assert result.requeue_after == 40
    old = runner("old", "Failed", created=NOW - dt.timedelta(seconds=61))
    reaped = plan(SetSpec(replicas=1, patch_id=0), [old], failed_runner_min_age=60)
    assert reaped.step is Step.REAP_FAILED
    assert [r.name for r in reaped.cleanup.delete] == ["old"]


def test_revision_cleanup_deletes_done_removes_idle_and_pending_keeps_busy() -> None:
    states = classify(
        [
            runner("p", "Pending"),
            runner("idle", "Running"),
            runner("busy", "Running", job="j"),
            runner("s", "Succeeded"),
            runner("f", "Failed"),
            runner("d", "Running", deleting=True),
        ],
        applied_revision=1,
    )
    cleanup = revision_cleanup(states)
    assert sorted(r.name for r in cleanup.delete) == ["f", "s"]
    assert sorted(r.name for r in cleanup.remove) == ["idle", "p"]


def test_a_runner_adopted_from_arc_with_only_a_job_request_id_is_busy_and_kept() -> None:
    # ARC's listeners up to 0.12 recorded a job as status.jobRequestId alone.
    arc_busy = RunnerView(name="arc-busy", phase="Running", runner_id=4, job_request_id=81)
    idle = runner("idle", "Running")
    states = classify([arc_busy, idle], applied_revision=0)
    assert [r.name for r in states.busy] == ["arc-busy"]
    assert [r.name for r in revision_cleanup(states).remove] == ["idle"]
    down = plan(SetSpec(replicas=0, patch_id=0), [arc_busy, idle])
    assert [r.name for r in down.cleanup.remove] == ["idle"]


def test_a_superseded_set_planned_at_zero_under_patch_zero_creates_nothing_and_drains_idle_runners() -> None:
    # What the EphemeralRunnerSet controller does with a set a newer one of its scale set replaced.
    runners = [runner("idle", "Running"), runner("busy", "Running", job="j"), runner("done", "Succeeded")]
    reaped = plan(SetSpec(replicas=0, patch_id=0), runners)
    assert (reaped.step, reaped.create) == (Step.REAP_FINISHED, 0)
    drained = plan(SetSpec(replicas=0, patch_id=0), runners[:2])
    assert (drained.step, drained.create) == (Step.SCALE_DOWN, 0)
    assert [r.name for r in drained.cleanup.remove] == ["idle"]


# -- properties -------------------------------------------------------------------------------------------

phases = st.sampled_from(["", "Pending", "Running", "Succeeded", "Failed", "Outdated"])


@st.composite
def runner_sets(draw: st.DrawFn) -> tuple[SetSpec, list[RunnerView]]:
    applied = draw(st.integers(0, 3))
    spec = SetSpec(replicas=draw(st.integers(0, 12)), patch_id=draw(st.integers(0, 4)), applied_revision=applied,
                   actionable_revision=applied)  # fmt: skip
    count = draw(st.integers(0, 12))
    runners = [
        runner(
            f"r{i}",
            draw(phases),
            runner_id=draw(st.integers(0, 2)),
            job=draw(st.sampled_from(["", "job"])),
            patch=draw(st.integers(0, 4)),
            revision=draw(st.integers(0, 3)),
            deleting=draw(st.booleans()),
            created=NOW - dt.timedelta(seconds=draw(st.integers(0, 120))),
        )
        for i in range(count)
    ]
    return spec, runners


@settings(max_examples=400, deadline=None)
@given(runner_sets())
def test_never_removes_or_deletes_a_live_runner_with_a_job(case: tuple[SetSpec, list[RunnerView]]) -> None:
    spec, runners = case
    result = plan(spec, runners)
    for victim in (*result.cleanup.delete, *result.cleanup.remove):
        assert not (victim.has_job and not victim.is_done), victim
        assert not victim.deleting
    states = classify(runners, applied_revision=spec.applied_revision)
    for victim in revision_cleanup(states).remove:
        assert not victim.has_job


@settings(max_examples=400, deadline=None)
@given(runner_sets())
def test_scale_up_never_exceeds_replicas_minus_pending_running_failed_deleting(
    case: tuple[SetSpec, list[RunnerView]],
) -> None:
    spec, runners = case
    result = plan(spec, runners)
    states = classify(runners, applied_revision=spec.applied_revision)
    held = len(states.pending) + len(states.running) + len(states.failed) + len(states.deleting)
    assert 0 <= result.create <= max(0, spec.replicas - held)
    if result.create:
        assert result.cleanup.empty  # one kind of action per pass
        assert not states.outdated  # an Outdated set never grows


@settings(max_examples=300, deadline=None)
@given(runner_sets())
def test_scale_down_only_for_patch_zero_and_never_below_replicas(case: tuple[SetSpec, list[RunnerView]]) -> None:
    spec, runners = case
    result = plan(spec, runners)
    if result.step is Step.SCALE_DOWN:
        states = classify(runners, applied_revision=spec.applied_revision)
        assert spec.patch_id == 0
        assert result.cleanup.remove_limit == states.total - spec.replicas
        assert all(r.runner_id != 0 for r in result.cleanup.remove)


# -- revision status --------------------------------------------------------------------------------------


def ers(status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "s", "resourceVersion": "1"}, "status": status}


def test_advancing_the_applied_revision_resets_the_marker_and_recomputes_the_phase_against_the_new_revision() -> None:
    live = ers({"phase": "Outdated", "appliedActionableRevision": 1, "finishedRunnerCleanupPatchID": 4})
    old_outdated = runner("o", "Outdated", revision=1)
    changes = applied_revision_changes(live, target=2, runners=[old_outdated])
    assert changes == {"appliedActionableRevision": 2, "finishedRunnerCleanupPatchID": 0, "phase": "Running"}


@given(st.integers(0, 5), st.integers(0, 5), st.integers(0, 9))
def test_applied_revision_never_moves_backwards(live_applied: int, target: int, marker: int) -> None:
    live = ers({"phase": "Running", "appliedActionableRevision": live_applied, "finishedRunnerCleanupPatchID": marker})
    changes = applied_revision_changes(live, target=target, runners=[])
    if target <= live_applied:
        assert "appliedActionableRevision" not in changes
        assert "finishedRunnerCleanupPatchID" not in changes
    else:
        assert changes["appliedActionableRevision"] == target


def test_finished_marker_write_is_a_no_op_when_equal_and_may_move_backwards() -> None:
    assert finished_marker_changes(ers({"finishedRunnerCleanupPatchID": 3}), patch_id=3) == {}
    assert finished_marker_changes(ers({"finishedRunnerCleanupPatchID": 9}), patch_id=1) == {
        "finishedRunnerCleanupPatchID": 1
    }


def test_phase_write_sends_only_the_phase() -> None:
    assert phase_changes(ers({"phase": "Running", "appliedActionableRevision": 3}), phase="Outdated") == {
        "phase": "Outdated"
    }
    assert phase_changes(ers({"phase": "Running"}), phase="Running") == {}
