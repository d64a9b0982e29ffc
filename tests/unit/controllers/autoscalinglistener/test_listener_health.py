"""The AutoscalingListener's Ready and Degraded conditions follow what the listener reports about itself, and
an outage's start and end are Events (issue 15, item 9: the listener was offline for minutes while Ready=True)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from arc_scaleset.api.keys import ANNOTATION_LISTENER_STATE
from arc_scaleset.api.listener_state import ListenerPhase, ListenerState
from arc_scaleset.controllers.autoscalinglistener.listener_health import (
    listener_readiness,
    listener_state_changed,
    reported_state,
    runner_set_index,
)
from arc_scaleset.controllers.autoscalinglistener.restart import BackoffState
from arc_scaleset.controllers.autoscalinglistener.status import (
    ListenerReport,
    PodReadiness,
    backoff_readiness,
    derive_conditions,
    outage_event,
    pending_readiness,
)
from arc_scaleset.kube.conditions import get_condition
from tests.unit.controllers.listener_factory import listener_object

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
POD = "arc-runners-abc12345-listener"
RUNNER_SET = "team/arc-runners"


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def state(
    phase: ListenerPhase,
    *,
    since: float = 0.0,
    error: str = "",
    session: str | None = "5e5510e0-0000-4000-8000-000000000001",
) -> ListenerState:
    return ListenerState(
        scale_set_id=7,
        owner=POD,
        session_id=session,
        state=phase,
        since=at(since),
        last_successful_poll=at(since) if phase is ListenerPhase.POLLING else None,
        last_error_class=error,
    )


def runner_set(reported: ListenerState | None) -> dict[str, Any]:
    annotations = {ANNOTATION_LISTENER_STATE: reported.to_annotation()} if reported is not None else {}
    return {"metadata": {"name": "arc-runners", "namespace": "team", "annotations": annotations}}


def pod(*, created: float = 0.0) -> dict[str, Any]:
    return {"metadata": {"name": POD, "creationTimestamp": at(created).strftime("%Y-%m-%dT%H:%M:%SZ")}}


def condition(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any]:
    found = get_condition(conditions, type_)
    assert found is not None, f"no {type_} in {conditions}"
    return found


def report(readiness: PodReadiness, *, restarts: BackoffState | None = None) -> ListenerReport:
    return ListenerReport(generation=1, pod=readiness, pod_running=readiness.runs, restarts=restarts)


def health(phase: ListenerPhase | None, *, error: str = "", since: float = 0.0) -> PodReadiness:
    return listener_readiness(POD, RUNNER_SET, None if phase is None else state(phase, error=error, since=since))


# -- Ready follows the listener's own account -----------------------------------------------------------------


def test_a_polling_listener_is_ready() -> None:
    readiness = health(ListenerPhase.POLLING)
    assert (readiness.ready, readiness.reason, readiness.runs) == (True, "ListenerRunning", True)
    assert "holds a message session" in readiness.message


@pytest.mark.parametrize(
    ("phase", "error", "reason", "words"),
    [
        (ListenerPhase.WAITING_FOR_SESSION, "SessionConflict", "WaitingForSession", "another message session holds"),
        (ListenerPhase.FAILING, "TransientError", "Failing", "or gave an unusable answer (TransientError)"),
        (ListenerPhase.STOPPED, "ScaleSetNotFound", "Stopped", "no longer exists on GitHub (ScaleSetNotFound)"),
        (ListenerPhase.FAILING, "SomethingNew", "Failing", "(SomethingNew)"),
    ],
)
def test_a_listener_without_a_session_or_failing_its_polls_is_not_ready_and_says_why(
    phase: ListenerPhase, error: str, reason: str, words: str
) -> None:
    readiness = health(phase, error=error)
    assert (readiness.ready, readiness.reason, readiness.runs) == (False, reason, True)
    assert words in readiness.message


def test_a_running_listener_that_reported_nothing_yet_is_starting_not_ready() -> None:
    readiness = health(None)
    assert (readiness.ready, readiness.reason) == (False, "ListenerStarting")
    assert RUNNER_SET in readiness.message


def test_the_message_changes_only_with_the_reported_state_so_a_listener_at_rest_writes_no_status() -> None:
    assert health(ListenerPhase.FAILING, error="TransientError") == health(
        ListenerPhase.FAILING, error="TransientError"
    )


# -- whose state it is ----------------------------------------------------------------------------------------


def test_the_state_of_the_pods_own_listener_is_taken() -> None:
    reported = state(ListenerPhase.POLLING, since=30)
    assert reported_state(runner_set(reported), pod=pod(created=20), predecessor=None) == reported


def test_what_the_set_carried_when_the_pod_was_created_is_a_predecessors_word_not_the_new_listeners() -> None:
    killed = state(ListenerPhase.POLLING, since=30)  # SIGKILLed: it never wrote that it stopped
    carried = runner_set(killed)
    annotation = carried["metadata"]["annotations"][ANNOTATION_LISTENER_STATE]
    assert reported_state(carried, pod=pod(created=40), predecessor=annotation) is None


def test_a_state_written_long_before_the_pod_existed_is_a_predecessors_even_after_a_controller_restart() -> None:
    old = state(ListenerPhase.POLLING, since=0)
    assert reported_state(runner_set(old), pod=pod(created=3600), predecessor=None) is None
    # A listener whose clock lags a little behind the API server's is still believed.
    assert reported_state(runner_set(old), pod=pod(created=30), predecessor=None) == old


def test_no_state_or_an_unreadable_one_is_no_state() -> None:
    assert reported_state(runner_set(None), pod=pod(), predecessor=None) is None
    garbled = {"metadata": {"annotations": {ANNOTATION_LISTENER_STATE: "{not json"}}}
    assert reported_state(garbled, pod=pod(), predecessor=None) is None


def test_only_a_change_of_the_state_annotation_concerns_the_listener() -> None:
    before = runner_set(state(ListenerPhase.POLLING))
    scaled = {**before, "spec": {"replicas": 3}, "status": {"currentReplicas": 2}}
    assert not listener_state_changed(before, scaled)
    assert listener_state_changed(before, runner_set(state(ListenerPhase.FAILING, error="TransientError")))


def test_listeners_are_indexed_by_the_runner_set_they_scale() -> None:
    assert list(runner_set_index(listener_object())) == ["team/arc-runners"]


# -- outages ----------------------------------------------------------------------------------------------------


def test_a_ready_listener_that_starts_failing_is_degraded_and_an_event_marks_the_outage_and_its_end() -> None:
    ready = derive_conditions(None, report(health(ListenerPhase.POLLING)), now=at(0))
    failing = derive_conditions(
        ready, report(health(ListenerPhase.FAILING, error="TransientError", since=10)), now=at(11)
    )

    assert condition(failing, "Ready")["status"] == "False"
    degraded = condition(failing, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ListenerOffline")
    assert "Failing" in degraded["message"]
    assert degraded["lastTransitionTime"] == "2026-03-01T12:00:11Z"
    started = outage_event(ready, failing, now=at(11))
    assert started is not None
    assert started[:2] == ("Warning", "ListenerOffline")
    assert "(Failing)" in started[2]

    still = derive_conditions(
        failing, report(health(ListenerPhase.FAILING, error="TimeoutError", since=20)), now=at(21)
    )
    assert condition(still, "Degraded")["lastTransitionTime"] == "2026-03-01T12:00:11Z", "the outage is one span"
    assert outage_event(failing, still, now=at(21)) is None, "one Event per outage start"

    back = derive_conditions(still, report(health(ListenerPhase.POLLING, since=52)), now=at(53))
    assert condition(back, "Ready")["status"] == "True"
    assert condition(back, "Degraded")["status"] == "False"
    ended = outage_event(still, back, now=at(53))
    assert ended == (
        "Normal",
        "ListenerOnline",
        "the listener is online again after 42s (offline since 2026-03-01T12:00:11Z)",
    )


def test_a_listener_that_was_never_ready_is_starting_not_in_an_outage() -> None:
    created = derive_conditions(None, report(pending_readiness({"metadata": {"name": POD}})), now=at(0))
    waiting = health(ListenerPhase.WAITING_FOR_SESSION, error="SessionConflict")
    conditions = derive_conditions(created, report(waiting), now=at(5))
    assert condition(conditions, "Ready")["reason"] == "WaitingForSession"
    assert condition(conditions, "Degraded")["status"] == "False"
    assert outage_event(created, conditions, now=at(5)) is None


def test_a_killed_listener_is_one_outage_from_its_crash_until_its_replacement_polls() -> None:
    ready = derive_conditions(None, report(health(ListenerPhase.POLLING)), now=at(0))
    restarts = BackoffState(failures=1, delay=5.0, remaining=5.0, cap=300.0, last_failure="exit code 137")
    crashed = derive_conditions(ready, report(backoff_readiness(restarts), restarts=restarts), now=at(10))
    assert condition(crashed, "Degraded")["reason"] == "ListenerFailing"
    started = outage_event(ready, crashed, now=at(10))
    assert started is not None
    assert started[1] == "ListenerOffline"

    # The replacement runs, but holds no session yet: still offline, still the same outage.
    replaced = derive_conditions(crashed, report(health(None), restarts=restarts), now=at(16))
    degraded = condition(replaced, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ListenerOffline")
    assert degraded["lastTransitionTime"] == "2026-03-01T12:00:10Z"
    assert outage_event(crashed, replaced, now=at(16)) is None

    online = derive_conditions(replaced, report(health(ListenerPhase.POLLING, since=19), restarts=restarts), now=at(20))
    assert condition(online, "Degraded")["status"] == "False"
    ended = outage_event(replaced, online, now=at(20))
    assert ended is not None
    assert ended[:2] == ("Normal", "ListenerOnline")
    assert "after 10s" in ended[2]
