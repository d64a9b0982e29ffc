"""The EphemeralRunnerSet's runner counts (ARC's status fields): derived from the runners, written as a diff with
the phase, and a counts-only change written at most once per interval so a burst costs a handful of writes."""

from __future__ import annotations

from arc_scaleset.clock import FakeClock
from arc_scaleset.controllers.ephemeralrunnerset.counts import StatusPacer, runner_counts, status_changes, status_counts
from arc_scaleset.controllers.runner_classification import RunnerView, classify


def runner(name: str, phase: str = "", *, deleting: bool = False, revision: int = 0) -> RunnerView:
    return RunnerView(name=name, phase=phase, deleting=deleting, revision=revision, runner_id=1)


def test_counts_follow_arcs_classification_current_replicas_being_pending_running_and_failed() -> None:
    states = classify(
        [
            runner("new"),
            runner("pending", "Pending"),
            runner("idle", "Running"),
            runner("busy", "Running"),
            runner("failed", "Failed"),
            runner("done", "Succeeded"),
            runner("outdated", "Outdated", revision=1),
            runner("going", "Running", deleting=True),
        ],
        applied_revision=1,
    )
    assert runner_counts(states) == {
        "currentReplicas": 5,
        "pendingEphemeralRunners": 2,
        "runningEphemeralRunners": 2,
        "failedEphemeralRunners": 1,
        "finishedEphemeralRunners": 1,
        "deletingEphemeralRunners": 1,
    }


def test_values_left_by_arc_are_overwritten_and_unchanged_ones_are_not_sent() -> None:
    counts = runner_counts(classify([runner("idle", "Running")], applied_revision=0))
    arc_left = {"phase": "Running", "currentReplicas": 7, "pendingEphemeralRunners": 0, "runningEphemeralRunners": 7}
    changes = status_changes(arc_left, counts=counts, phase="Running")
    assert changes == {
        "currentReplicas": 1,
        "runningEphemeralRunners": 1,
        "failedEphemeralRunners": 0,
        "finishedEphemeralRunners": 0,
        "deletingEphemeralRunners": 0,
    }
    assert status_changes({**arc_left, **changes}, counts=counts, phase="Running") == {}
    assert status_changes({**arc_left, **changes}, counts=counts, phase="Outdated") == {"phase": "Outdated"}
    # A draining set writes no phase.
    assert "phase" not in status_changes({}, counts=counts, phase=None)


def test_without_counts_in_status_those_a_status_holds_are_removed_and_then_nothing_is_sent() -> None:
    states = classify([runner("idle", "Running")], applied_revision=0)
    assert status_counts(states, in_status=True) == runner_counts(states)
    counts = status_counts(states, in_status=False)
    written_before = {"phase": "Running", "currentReplicas": 1, "runningEphemeralRunners": 1}
    assert status_changes(written_before, counts=counts, phase="Running") == {
        "currentReplicas": None,
        "runningEphemeralRunners": None,
    }, "a merge patch's null removes them"
    assert status_changes({"phase": "Running"}, counts=counts, phase="Running") == {}


async def test_a_counts_only_change_is_written_an_interval_after_it_was_first_seen() -> None:
    clock = FakeClock()
    pacer, other = StatusPacer(clock=clock, interval=2.0), StatusPacer(clock=clock, interval=2.0)
    assert pacer.wait() == 2.0, "a change is held back its interval, to be written with what follows it"
    await clock.advance(1.5)
    assert pacer.wait() == 0.5, "a later pass does not start the interval again"
    assert other.wait() == 2.0, "another set's pacer is its own"
    await clock.advance(0.5)
    assert pacer.wait() == 0.0
    pacer.settled()
    await clock.advance(10.0)
    assert pacer.wait() == 2.0, "after a write (or a change undone), the next change waits its interval again"
    assert StatusPacer(clock=clock, interval=2.0).wait() == 2.0, "a set's memory after it was forgotten"
