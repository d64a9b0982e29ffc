"""The AutoscalingListener's Ready and Degraded conditions, derived from what a reconcile pass found."""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.controllers.autoscalinglistener.restart import BackoffState, RestartBackoff
from arc_scaleset.controllers.autoscalinglistener.status import (
    ListenerReport,
    backoff_readiness,
    created_readiness,
    derive_conditions,
    pending_readiness,
    recreating_readiness,
    running_readiness,
    status_patch,
)
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.failures import Failure

T0 = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
POD = "arc-runners-abc12345-listener"


def later(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def condition(conditions: list[dict[str, Any]], type: str) -> dict[str, Any]:
    found = get_condition(conditions, type)
    assert found is not None, f"no {type} condition in {conditions}"
    return found


def failing(failures: int = 3, *, delay: float = 4.0, remaining: float = 4.0) -> BackoffState:
    return BackoffState(
        failures=failures,
        delay=delay,
        remaining=remaining,
        cap=300.0,
        last_failure="the listener container exited with code 1 (Error)",
    )


def test_a_running_listener_is_ready_and_not_degraded() -> None:
    conditions = derive_conditions(None, ListenerReport(generation=2, pod=running_readiness(POD)), now=T0)
    ready, degraded = condition(conditions, "Ready"), condition(conditions, "Degraded")
    assert (ready["status"], ready["reason"]) == ("True", "ListenerRunning")
    assert POD in ready["message"]
    assert (degraded["status"], degraded["reason"]) == ("False", "ListenerHealthy")
    assert ready["observedGeneration"] == degraded["observedGeneration"] == 2
    assert ready["lastTransitionTime"] == "2026-01-01T12:00:00Z"


def test_a_pending_pod_is_not_ready_and_says_what_it_waits_for() -> None:
    pod = {
        "metadata": {"name": POD},
        "status": {
            "phase": "Pending",
            "containerStatuses": [{"name": "listener", "state": {"waiting": {"reason": "ImagePullBackOff"}}}],
        },
    }
    conditions = derive_conditions(None, ListenerReport(generation=1, pod=pending_readiness(pod)), now=T0)
    ready = condition(conditions, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "PodPending")
    assert "Pending, ImagePullBackOff" in ready["message"]
    created = derive_conditions(None, ListenerReport(generation=1, pod=created_readiness(POD)), now=T0)
    assert condition(created, "Ready")["reason"] == "PodPending"


def test_a_listener_in_backoff_is_degraded_with_its_failures_next_restart_and_cap() -> None:
    report = ListenerReport(generation=1, pod=backoff_readiness(failing()), restarts=failing())
    conditions = derive_conditions(None, report, now=T0)
    ready, degraded = condition(conditions, "Ready"), condition(conditions, "Degraded")
    assert (ready["status"], ready["reason"]) == ("False", "WaitingForBackoff")
    assert "exited with code 1" in ready["message"]
    assert (degraded["status"], degraded["reason"]) == ("True", "ListenerFailing")
    assert degraded["message"] == (
        "listener failed 3 times in a row; next restart in 4s at 2026-01-01T12:00:04Z (backoff up to 300s);"
        " last failure: the listener container exited with code 1 (Error)"
    )


def test_one_failure_reads_once() -> None:
    report = ListenerReport(generation=1, restarts=failing(1, delay=1.0, remaining=1.0))
    assert condition(derive_conditions(None, report, now=T0), "Degraded")["message"].startswith(
        "listener failed once; next restart in 1s"
    )


def test_the_degraded_message_does_not_change_while_the_backoff_counts_down() -> None:
    # Two passes of the same wait, 1.5 s apart: the due time is absolute, so nothing new to write.
    first = derive_conditions(None, ListenerReport(generation=1, restarts=failing(remaining=4.0)), now=T0)
    second = derive_conditions(first, ListenerReport(generation=1, restarts=failing(remaining=2.5)), now=later(1.5))
    assert second == first
    assert status_patch({"conditions": first}, second) == {}


def test_a_recreated_but_not_yet_running_listener_stays_degraded_without_a_countdown() -> None:
    report = ListenerReport(generation=1, pod=created_readiness(POD), restarts=failing(remaining=0.0))
    degraded = condition(derive_conditions(None, report, now=T0), "Degraded")
    assert degraded["status"] == "True"
    assert "restarted after 4s; waiting for the new pod to run (backoff up to 300s)" in degraded["message"]


def test_degraded_clears_once_a_replacement_pod_runs_and_transition_times_move_only_on_a_flip() -> None:
    waiting = derive_conditions(
        None, ListenerReport(generation=1, pod=backoff_readiness(failing()), restarts=failing()), now=T0
    )
    restarted = derive_conditions(
        waiting,
        ListenerReport(generation=1, pod=created_readiness(POD), restarts=failing(remaining=0.0)),
        now=later(5),
    )
    running = derive_conditions(
        restarted,
        ListenerReport(generation=1, pod=running_readiness(POD), restarts=failing(remaining=0.0)),
        now=later(9),
    )
    # Still True (the message changed): the transition time stays at the first failure.
    assert condition(restarted, "Degraded")["lastTransitionTime"] == "2026-01-01T12:00:00Z"
    assert condition(restarted, "Ready")["lastTransitionTime"] == "2026-01-01T12:00:00Z"
    degraded, ready = condition(running, "Degraded"), condition(running, "Ready")
    assert (degraded["status"], degraded["reason"]) == ("False", "ListenerHealthy")
    assert "runs again; it had failed 3 times in a row" in degraded["message"]
    assert degraded["lastTransitionTime"] == ready["lastTransitionTime"] == "2026-01-01T12:00:09Z"
    assert ready["status"] == "True"


def test_a_configuration_error_without_a_running_pod_is_the_ready_reason() -> None:
    report = ListenerReport(
        generation=3,
        problem=("InvalidListenerTemplate", "the API server rejected the listener pod: spec.containers[0].image"),
    )
    ready = condition(derive_conditions(None, report, now=T0), "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "InvalidListenerTemplate")
    assert "rejected the listener pod" in ready["message"]


def test_a_configuration_error_while_the_pod_runs_keeps_ready_and_names_the_problem() -> None:
    report = ListenerReport(generation=3, pod_running=True, problem=("SecretNotFound", "Secret gh-secret not found"))
    conditions = derive_conditions(None, report, now=T0)
    ready = condition(conditions, "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "ListenerRunning")
    assert "previous config" in ready["message"]
    assert "Secret gh-secret not found" in ready["message"]
    assert condition(conditions, "Degraded")["status"] == "False"


def test_a_pass_that_learned_nothing_keeps_ready_as_stored() -> None:
    stored = derive_conditions(None, ListenerReport(generation=1, pod=running_readiness(POD)), now=T0)
    after_conflict = derive_conditions(stored, ListenerReport(generation=1, pod_running=True), now=later(30))
    assert after_conflict == stored


def test_recreating_names_the_reason() -> None:
    readiness = recreating_readiness(POD, "the listener config changed (Secret resourceVersion 1 -> 2)")
    ready = condition(derive_conditions(None, ListenerReport(generation=1, pod=readiness), now=T0), "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Recreating")
    assert "resourceVersion 1 -> 2" in ready["message"]


def test_conditions_of_other_types_are_kept() -> None:
    other = {
        "type": "Custom",
        "status": "True",
        "reason": "X",
        "message": "",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    }
    conditions = derive_conditions([other], ListenerReport(generation=1, pod=running_readiness(POD)), now=T0)
    assert conditions[0] == other
    assert [c["type"] for c in conditions] == ["Custom", "Ready", "Degraded"]


def test_the_backoff_state_follows_the_failures() -> None:
    backoff = RestartBackoff(base=1.0, cap=8.0)
    assert backoff.state(now=0.0) is None
    backoff.record_failure(pod_uid="a", now=0.0, message="evicted")
    backoff.record_failure(pod_uid="b", now=10.0, message="exited with code 1")
    state = backoff.state(now=11.0)
    assert state == BackoffState(failures=2, delay=2.0, remaining=1.0, cap=8.0, last_failure="exited with code 1")
    later_state = backoff.state(now=20.0)
    assert later_state is not None
    assert later_state.remaining == 0.0


@given(
    failures=st.integers(min_value=0, max_value=50),
    running=st.booleans(),
    remaining=st.floats(min_value=0, max_value=300),
)
def test_degraded_is_true_exactly_when_the_listener_has_failed_and_nothing_runs(
    failures: int, running: bool, remaining: float
) -> None:
    restarts = failing(failures, remaining=remaining) if failures else None
    pod = running_readiness(POD) if running else backoff_readiness(restarts)
    conditions = derive_conditions(None, ListenerReport(generation=1, pod=pod, restarts=restarts), now=T0)
    assert (condition(conditions, "Degraded")["status"] == "True") == (failures > 0 and not running)
    assert (condition(conditions, "Ready")["status"] == "True") == running


def test_a_pass_that_failed_unexpectedly_keeps_degraded_until_the_failure_persists_then_shows_it() -> None:
    healthy = derive_conditions(None, ListenerReport(generation=1, pod=running_readiness(POD)), now=T0)
    failed = ListenerReport(generation=1, failed=True)
    assert derive_conditions(healthy, failed, now=later(1)) == healthy

    failed.failure = Failure(reason="Forbidden", error="403 Forbidden: roles is forbidden", since=T0, attempts=3)
    degraded = condition(derive_conditions(healthy, failed, now=later(2)), "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "Forbidden")
    assert "roles is forbidden" in degraded["message"]
