"""What the AutoscalingRunnerSet takes from its listener: a report that the scale set is gone on GitHub (verified
and registered again at once, issue 15 item 8), and the listener's readiness and outages as its own conditions
(item 9)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from arc_scaleset.api.keys import ANNOTATION_LISTENER_STATE
from arc_scaleset.api.listener_state import SCALE_SET_NOT_FOUND, ListenerPhase, ListenerState
from arc_scaleset.controllers.autoscalingrunnerset.listener_report import listener_problems, scale_set_gone_report
from arc_scaleset.controllers.autoscalingrunnerset.status import ReconcileReport, derive_status
from arc_scaleset.kube.conditions import get_condition

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def runner_set(*, scale_set_id: int, error: str, phase: ListenerPhase = ListenerPhase.STOPPED, at: int = 0) -> Any:
    state = ListenerState(
        scale_set_id=scale_set_id,
        state=phase,
        since=NOW + dt.timedelta(seconds=at),
        last_error_class=error,
    )
    return {"metadata": {"name": "arc-runners", "annotations": {ANNOTATION_LISTENER_STATE: state.to_annotation()}}}


def listener(ready: tuple[str, str, str], degraded: tuple[str, str, str]) -> dict[str, Any]:
    conditions = [
        {"type": kind, "status": status, "reason": reason, "message": message}
        for kind, (status, reason, message) in (("Ready", ready), ("Degraded", degraded))
    ]
    return {"metadata": {"name": "arc-runners-754b578d-listener", "namespace": "arc-systems"},
            "status": {"conditions": conditions}}  # fmt: skip


def test_the_listeners_report_that_github_no_longer_knows_the_scale_set_is_found() -> None:
    gone = runner_set(scale_set_id=7, error=SCALE_SET_NOT_FOUND, at=5)
    report = scale_set_gone_report([runner_set(scale_set_id=7, error=SCALE_SET_NOT_FOUND), gone], 7)
    assert report is not None
    assert report.since == NOW + dt.timedelta(seconds=5), "the latest report"


def test_a_report_about_an_earlier_scale_set_or_another_failure_is_no_reason_to_register_again() -> None:
    assert scale_set_gone_report([runner_set(scale_set_id=6, error=SCALE_SET_NOT_FOUND)], 7) is None
    assert scale_set_gone_report([runner_set(scale_set_id=7, error="TransientError")], 7) is None
    assert scale_set_gone_report([{"metadata": {"annotations": {ANNOTATION_LISTENER_STATE: "garbage"}}}], 7) is None


def status_with_listener(found: dict[str, Any] | None) -> dict[str, Any]:
    not_ready, degraded = listener_problems(found)
    report = ReconcileReport(generation=2, observed_generation=2, stored_phase="Running", complete=True,
                             listener_not_ready=not_ready, listener_degraded=degraded)  # fmt: skip
    return derive_status({"phase": "Running", "observedGeneration": 2}, report, now=NOW)


def test_a_scale_set_whose_listener_holds_no_session_is_running_but_not_ready() -> None:
    status = status_with_listener(
        listener(
            ("False", "WaitingForSession", "another message session holds the scale set"),
            ("False", "ListenerHealthy", "ok"),
        )
    )
    assert (status["phase"], status["observedGeneration"]) == ("Running", 2), "the spec is applied"
    ready = get_condition(status["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "WaitingForSession")
    assert ready["message"].startswith("listener arc-systems/arc-runners-754b578d-listener: another message session")
    assert get_condition(status["conditions"], "Degraded")["status"] == "False"


def test_a_scale_set_whose_listener_is_in_an_outage_is_degraded_with_the_listeners_reason() -> None:
    status = status_with_listener(
        listener(("False", "Failing", "polls fail"), ("True", "ListenerOffline", "the listener is offline (Failing)"))
    )
    degraded = get_condition(status["conditions"], "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ListenerOffline")
    assert get_condition(status["conditions"], "Ready")["reason"] == "Failing"


def test_a_scale_set_whose_listener_is_ready_is_ready() -> None:
    status = status_with_listener(listener(("True", "ListenerRunning", "polls"), ("False", "ListenerHealthy", "ok")))
    assert get_condition(status["conditions"], "Ready")["status"] == "True"
    unknown = status_with_listener(None)  # no listener seen (yet): nothing to say about it
    assert get_condition(unknown["conditions"], "Ready")["status"] == "True"


def test_a_scale_set_whose_listener_has_no_status_yet_is_not_ready() -> None:
    """A listener just created (or made by ARC) carries no conditions: the scale set waits for its first report
    instead of saying Ready and taking it back when the listener's pod turns out to be pending."""
    status = status_with_listener({"metadata": {"name": "arc-runners-754b578d-listener", "namespace": "arc-systems"}})
    ready = get_condition(status["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ListenerNotReported")
    assert ready["message"].startswith("listener arc-systems/arc-runners-754b578d-listener: ")
    assert get_condition(status["conditions"], "Degraded")["status"] == "False"


def test_a_listener_ready_for_an_earlier_spec_does_not_make_the_scale_set_ready() -> None:
    """The scale set changed the listener's spec (generation 3); its Ready condition still speaks of generation 2,
    which the listener's controller is about to replace: the scale set is not Ready until it has."""
    found = listener(("True", "ListenerRunning", "polling"), ("False", "ListenerHealthy", "ok"))
    found["metadata"]["generation"] = 3
    for condition in found["status"]["conditions"]:
        condition["observedGeneration"] = 2
    ready = get_condition(status_with_listener(found)["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ListenerNotReported")
    assert "generation 3" in ready["message"]

    for condition in found["status"]["conditions"]:
        condition["observedGeneration"] = 3
    assert get_condition(status_with_listener(found)["conditions"], "Ready")["status"] == "True"
