"""The listener pod's lifecycle as a pure plan (pod_plan.plan_pod): one step from the live pod, the desired pod,
the restart backoff and the failure the live pod shows."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from arc_scaleset.controllers.autoscalinglistener.pod import desired_listener_pod
from arc_scaleset.controllers.autoscalinglistener.pod_plan import (
    DELETION_REQUEUE_SECONDS,
    PodAction,
    PodStep,
    plan_pod,
)
from arc_scaleset.controllers.autoscalinglistener.restart import BackoffState, PodFailure
from arc_scaleset.controllers.autoscalinglistener.status import (
    REASON_POD_PENDING,
    REASON_RECREATING,
    REASON_WAITING_FOR_BACKOFF,
)
from tests.unit.controllers.listener_factory import listener_object, parsed_listener

OWNER = listener_object()
DESIRED = desired_listener_pod(
    OWNER, parsed_listener(OWNER), command=("arc-scaleset", "listener"), metrics_port=8080, config_resource_version="7"
)
FAILURE = PodFailure("ListenerFailed", "the listener container exited with code 1 (Error)")
WAITING = BackoffState(failures=2, delay=10.0, remaining=4.0, cap=300.0, last_failure=FAILURE.message)
OVER = BackoffState(failures=2, delay=10.0, remaining=0.0, cap=300.0, last_failure=FAILURE.message)


def live_pod(*, running: bool = True, **metadata: Any) -> dict[str, Any]:
    """The desired pod as the API server holds it (ours: its owner reference names the listener)."""
    pod = copy.deepcopy(DESIRED)
    pod["metadata"].update({"uid": "pod-1", **metadata})
    state = {"running": {"startedAt": "2026-01-01T00:00:00Z"}} if running else {"waiting": {"reason": "Pulling"}}
    phase = "Running" if running else "Pending"
    pod["status"] = {"phase": phase, "containerStatuses": [{"name": "listener", "state": state}]}
    return pod


def plan(
    live: dict[str, Any] | None,
    *,
    failure: PodFailure | None = None,
    restarts: BackoffState | None = None,
    counted: bool = False,
) -> PodStep:
    return plan_pod(live, DESIRED, owner=OWNER, failure=failure, restarts=restarts, counted=counted)


def test_no_pod_and_no_failure_on_record_creates_one() -> None:
    step = plan(None)
    assert step.action is PodAction.CREATE
    assert step.readiness is not None
    assert step.readiness.reason == REASON_POD_PENDING


def test_no_pod_while_the_restart_backoff_runs_waits_it_out() -> None:
    step = plan(None, restarts=WAITING)
    assert step.action is PodAction.WAIT_BACKOFF
    assert step.requeue_after == WAITING.remaining
    assert step.readiness is not None
    assert step.readiness.reason == REASON_WAITING_FOR_BACKOFF
    assert FAILURE.message in step.readiness.message


def test_no_pod_once_the_backoff_is_over_creates_one() -> None:
    assert plan(None, restarts=OVER).action is PodAction.CREATE


def test_a_pod_that_is_not_the_listeners_is_in_the_way_whatever_it_shows() -> None:
    foreign = live_pod(ownerReferences=[])
    step = plan(foreign, failure=FAILURE, restarts=WAITING)
    assert step.action is PodAction.IN_THE_WAY
    assert "is not this listener's" in step.why


def test_a_failed_pod_is_replaced_with_its_failure() -> None:
    step = plan(live_pod(running=False), failure=FAILURE, restarts=OVER)
    assert step == PodStep(PodAction.REPLACE_FAILED, failure=FAILURE)


@pytest.mark.parametrize(
    ("counted", "restarts", "reason"),
    [
        (True, OVER, REASON_WAITING_FOR_BACKOFF),
        (False, None, REASON_RECREATING),
        (True, None, REASON_RECREATING),  # a failure after a healthy run: no backoff, replaced once it is gone
    ],
)
def test_a_terminating_pod_is_waited_for_with_the_reason_of_its_deletion(
    counted: bool, restarts: BackoffState | None, reason: str
) -> None:
    step = plan(live_pod(deletionTimestamp="2026-01-01T00:00:00Z"), restarts=restarts, counted=counted)
    assert step.action is PodAction.WAIT_TERMINATING
    assert step.requeue_after == DELETION_REQUEUE_SECONDS
    assert step.readiness is not None
    assert step.readiness.reason == reason


def test_a_pod_of_an_older_config_is_recreated() -> None:
    older = live_pod()
    older["metadata"]["annotations"]["actions.github.com/listener-config-resource-version"] = "6"
    step = plan(older)
    assert step.action is PodAction.RECREATE
    assert "the listener config changed" in step.why
    assert step.readiness is not None
    assert step.readiness.reason == REASON_RECREATING


def test_a_running_pod_in_line_is_kept_and_its_ready_left_to_what_the_listener_reports() -> None:
    step = plan(live_pod())
    assert step == PodStep(PodAction.KEEP, running=True)


def test_a_starting_pod_in_line_is_kept_as_pending() -> None:
    step = plan(live_pod(running=False))
    assert step.action is PodAction.KEEP
    assert not step.running
    assert step.readiness is not None
    assert step.readiness.reason == REASON_POD_PENDING
    assert "Pulling" in step.readiness.message
