"""The AutoscalingRunnerSet status: phase and observedGeneration (ARC #4636) and the Ready/Progressing/Degraded
conditions, derived from what a pass found."""

from __future__ import annotations

import datetime as dt

from arc_scaleset.controllers.autoscalingrunnerset.status import (
    RUNNER_COUNTS,
    ReconcileReport,
    derive_status,
    scale_set_runner_counts,
    status_patch,
)
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.failures import Failure

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(minutes=5)


def test_a_spec_change_is_pending_until_a_pass_completes_and_observed_generation_catches_up() -> None:
    running = {"phase": "Running", "observedGeneration": 1}
    report = ReconcileReport(generation=2, observed_generation=1, stored_phase="Running",
                             progress=("RollingOutRevision", "bumped"))  # fmt: skip
    pending = derive_status(running, report, now=NOW)
    assert (pending["phase"], pending["observedGeneration"]) == ("Pending", 1)
    assert get_condition(pending["conditions"], "Progressing")["status"] == "True"
    assert get_condition(pending["conditions"], "Ready")["reason"] == "RollingOutRevision"

    done = derive_status(pending, ReconcileReport(generation=2, observed_generation=1, stored_phase="Pending",
                                                  complete=True), now=LATER)  # fmt: skip
    assert (done["phase"], done["observedGeneration"]) == ("Running", 2)
    ready = get_condition(done["conditions"], "Ready")
    assert ready["status"] == "True"
    assert ready["observedGeneration"] == 2
    assert get_condition(done["conditions"], "Progressing")["status"] == "False"
    assert get_condition(done["conditions"], "Degraded")["status"] == "False"


def test_a_new_object_starts_pending() -> None:
    status = derive_status({}, ReconcileReport(generation=1, observed_generation=0, stored_phase=""), now=NOW)
    assert status["phase"] == "Pending"
    assert status["observedGeneration"] == 0


def test_a_problem_is_degraded_and_not_ready_with_the_errors_reason_and_keeps_the_phase() -> None:
    report = ReconcileReport(generation=3, observed_generation=3, stored_phase="Running",
                             problem=("SecretNotFound", "Secret team/gh does not exist"))  # fmt: skip
    status = derive_status({"phase": "Running", "observedGeneration": 3}, report, now=NOW)
    assert status["phase"] == "Running"
    degraded = get_condition(status["conditions"], "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "SecretNotFound")
    assert "team/gh" in degraded["message"]
    assert get_condition(status["conditions"], "Ready")["status"] == "False"


def test_a_repeated_identical_pass_writes_nothing() -> None:
    report = ReconcileReport(generation=1, observed_generation=1, stored_phase="Running", complete=True)
    first = derive_status({}, report, now=NOW)
    again = derive_status(first, report, now=LATER)
    assert status_patch(first, again) == {}


def test_transition_times_move_only_when_a_condition_flips() -> None:
    ok = ReconcileReport(generation=1, observed_generation=1, stored_phase="Running", complete=True)
    first = derive_status({}, ok, now=NOW)
    bad = ReconcileReport(generation=1, observed_generation=1, stored_phase="Running", problem=("X", "y"))
    second = derive_status(first, bad, now=LATER)
    assert get_condition(second["conditions"], "Degraded")["lastTransitionTime"] == "2026-01-01T00:05:00Z"
    assert get_condition(second["conditions"], "Progressing")["lastTransitionTime"] == "2026-01-01T00:00:00Z"


def test_the_runner_counts_are_the_sum_over_the_scale_sets_runner_sets_and_replace_what_arc_left() -> None:
    current = {"status": {"currentReplicas": 3, "pendingEphemeralRunners": 1, "runningEphemeralRunners": 2,
                          "finishedEphemeralRunners": 1}}  # fmt: skip
    draining = {"status": {"currentReplicas": 2, "runningEphemeralRunners": 2, "deletingEphemeralRunners": 4}}
    counts = scale_set_runner_counts([current, draining, {}], in_status=True)
    assert counts == {
        "currentRunners": 5,
        "pendingEphemeralRunners": 1,
        "runningEphemeralRunners": 4,
        "failedEphemeralRunners": 0,
        "finishedEphemeralRunners": 1,
        "deletingEphemeralRunners": 4,
    }
    arc_left = {"phase": "Running", "currentRunners": 7, "runningEphemeralRunners": 7, "state": ""}
    report = ReconcileReport(generation=1, observed_generation=0, stored_phase="Running", runner_counts=counts)
    status = derive_status(arc_left, report, now=NOW)
    assert {key: status[key] for key in counts} == counts
    assert status_patch(status, derive_status(status, report, now=LATER)) == {}


def test_without_counts_in_status_the_scale_set_removes_those_it_holds_and_then_writes_none() -> None:
    runner_set = {"status": {"currentReplicas": 3, "runningEphemeralRunners": 3}}
    counts = scale_set_runner_counts([runner_set], in_status=False)
    assert set(counts) == {name for name, _ in RUNNER_COUNTS}
    assert set(counts.values()) == {None}
    report = ReconcileReport(generation=1, observed_generation=1, stored_phase="Running", runner_counts=counts)
    held = {"phase": "Running", "observedGeneration": 1, "currentRunners": 3, "runningEphemeralRunners": 3}
    patch = status_patch(held, derive_status(held, report, now=NOW))
    assert {key: patch[key] for key in ("currentRunners", "runningEphemeralRunners")} == {
        "currentRunners": None,
        "runningEphemeralRunners": None,
    }
    removed = {"phase": "Running", "observedGeneration": 1, "conditions": patch["conditions"]}
    assert status_patch(removed, derive_status(removed, report, now=LATER)) == {}


REFUSED = Failure(reason="Invalid", error="422 Invalid: spec.patchID: Required value", since=NOW, attempts=3)


def test_a_pass_that_failed_unexpectedly_never_says_no_problem_found() -> None:
    fine = derive_status({}, ReconcileReport(generation=1, observed_generation=1, stored_phase="Running",
                                             complete=True), now=NOW)  # fmt: skip
    failed = ReconcileReport(generation=1, observed_generation=1, stored_phase="Running", failed=True,
                             progress=("UpdatingEphemeralRunnerSet", "merged labels and annotations"))  # fmt: skip
    before_persistent = derive_status(fine, failed, now=LATER)
    assert get_condition(before_persistent["conditions"], "Degraded") == get_condition(
        fine["conditions"], "Degraded"
    ), "a failure that is not persistent yet leaves Degraded as it was"

    failed.failure = REFUSED
    status = derive_status(before_persistent, failed, now=LATER)
    degraded = get_condition(status["conditions"], "Degraded")
    assert degraded is not None
    assert (degraded["status"], degraded["reason"]) == ("True", "Invalid")
    assert "spec.patchID: Required value" in degraded["message"]
    assert degraded["message"] != "no problem found"
    ready = get_condition(status["conditions"], "Ready")
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "Invalid")
