"""When a listener pod is finished (failed, evicted, disrupted, node lost), and the per-listener backoff
between recreations (ARC #4656, #4331)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from arc_scaleset.controllers.autoscalinglistener.restart import (
    HEALTHY_RUN,
    PodFailure,
    RestartBackoff,
    listener_pod_failure,
    listener_running,
    recreation_note,
)

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def pod(*, phase: str = "Running", state: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if state is not None:
        status["containerStatuses"] = [{"name": "listener", "state": state}]
    status.update(extra.pop("status", {}))
    return {"metadata": {"name": "l", "uid": "u1", **extra.pop("metadata", {})}, "spec": {"nodeName": "n1"},
            "status": status}  # fmt: skip


def test_a_running_or_starting_listener_is_not_a_failure() -> None:
    assert listener_pod_failure(pod(state={"running": {"startedAt": "2026-01-01T11:00:00Z"}}), now=NOW) is None
    assert (
        listener_pod_failure(pod(phase="Pending", state={"waiting": {"reason": "ContainerCreating"}}), now=NOW) is None
    )
    assert listener_running(pod(state={"running": {}}))
    assert not listener_running(pod(phase="Pending"))


def test_a_terminated_listener_container_is_a_failure_with_its_run_time() -> None:
    failure = listener_pod_failure(pod(phase="Failed", state={"terminated": {
        "exitCode": 1, "reason": "Error", "startedAt": "2026-01-01T11:59:00Z", "finishedAt": "2026-01-01T11:59:30Z"}}),
        now=NOW)  # fmt: skip
    assert failure is not None
    assert failure.reason == "ListenerFailed"
    assert "exited with code 1" in failure.message
    assert failure.ran_for == pytest.approx(30.0)


def test_an_evicted_pod_is_replaced() -> None:
    failure = listener_pod_failure(pod(phase="Failed", status={"reason": "Evicted", "message": "low memory"}), now=NOW)
    assert failure is not None
    assert failure.reason == "ListenerEvicted"
    assert "low memory" in failure.message


def test_a_disruption_target_condition_is_replaced() -> None:
    status = {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}]}
    failure = listener_pod_failure(pod(status=status), now=NOW)
    assert failure is not None
    assert failure.reason == "ListenerDisrupted"


def test_a_pod_stuck_terminating_past_its_grace_period_is_force_deleted_as_node_lost() -> None:
    recent = pod(metadata={"deletionTimestamp": "2026-01-01T11:59:30Z", "deletionGracePeriodSeconds": 30})
    assert listener_pod_failure(recent, now=NOW) is None
    stuck = pod(metadata={"deletionTimestamp": "2026-01-01T11:50:00Z", "deletionGracePeriodSeconds": 30})
    failure = listener_pod_failure(stuck, now=NOW)
    assert failure is not None
    assert failure.reason == "ListenerNodeLost"
    assert failure.force_delete


def test_backoff_doubles_per_consecutive_failure_up_to_the_cap_and_counts_a_pod_once() -> None:
    backoff = RestartBackoff(base=5, cap=60)
    delays = [backoff.record_failure(pod_uid=f"p{i}", now=100.0 * i) for i in range(6)]
    assert delays == [5, 10, 20, 40, 60, 60]
    assert backoff.record_failure(pod_uid="p5", now=500.0) == pytest.approx(60 - 0)  # same pod: not counted
    assert backoff.failures == 6
    assert backoff.remaining(now=530.0) == pytest.approx(30.0)
    assert RestartBackoff(base=5, cap=60).remaining(now=0.0) == 0.0  # another listener's


def test_a_listener_that_crash_loops_for_days_is_still_recreated_at_the_cap() -> None:
    # 2.0 ** n overflows a float past n = 1023: the reconcile raised OverflowError on every pass from then on.
    backoff = RestartBackoff(base=5, cap=60)
    delays = [backoff.record_failure(pod_uid=f"p{i}", now=100.0 * i) for i in range(1100)]
    assert delays[-1] == 60


def test_a_listener_that_ran_a_healthy_while_is_replaced_at_once_and_the_count_starts_over() -> None:
    """Issue 30: a listener killed after it worked for a minute is not crash-looping; every second of backoff is a
    second nobody takes the scale set's jobs."""
    backoff = RestartBackoff(base=5, cap=60)
    for i in range(4):
        backoff.record_failure(pod_uid=f"p{i}", now=float(i))
    assert backoff.record_failure(pod_uid="killed", now=10.0, ran_for=HEALTHY_RUN) == 0
    assert (backoff.failures, backoff.remaining(now=10.0), backoff.state(now=10.0)) == (0, 0.0, None)
    assert backoff.is_recorded(pod_uid="killed")  # seen once, however many passes see it before it is gone
    assert backoff.record_failure(pod_uid="killed", now=11.0, ran_for=HEALTHY_RUN) == 0
    # Failing fast after it backs off from the base again.
    assert backoff.record_failure(pod_uid="crashed", now=12.0, ran_for=HEALTHY_RUN - 1) == 5
    assert backoff.failures == 1


def test_the_event_says_when_the_next_listener_comes_and_why_then() -> None:
    failure = PodFailure("ListenerFailed", "the listener container exited with code 137 (Error)", ran_for=61.4)
    assert recreation_note(failure, delay=0.0, failures=0) == (
        "the listener container exited with code 137 (Error); recreating it now (it ran 61s: not a crash loop)"
    )
    assert recreation_note(failure, delay=10.0, failures=2) == (
        "the listener container exited with code 137 (Error); recreating it in 10s (failure 2 in a row)"
    )
