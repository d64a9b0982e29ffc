"""The status patch the pod player writes to end a runner pod."""

from __future__ import annotations

import datetime as dt

from arc_scaleset_lab.node.runner_pods import terminated_status

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
RUNNING_POD = {
    "spec": {"containers": [{"name": "runner", "image": "r:1"}, {"name": "dind", "image": "docker:dind"}]},
    "status": {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {"name": "runner", "image": "r:1", "restartCount": 0, "state": {"running": {"startedAt": "T0"}}},
        ],
    },
}


def test_exit_zero_succeeds_the_pod_and_terminates_every_container() -> None:
    status = terminated_status(RUNNING_POD, exit_code=0, now=NOW)["status"]
    assert status["phase"] == "Succeeded"
    runner, dind = status["containerStatuses"]
    assert runner["state"]["terminated"]["exitCode"] == 0
    assert runner["state"]["terminated"]["startedAt"] == "T0"
    assert runner["state"]["terminated"]["finishedAt"] == "2026-01-01T12:00:00Z"
    assert dind["state"]["terminated"]["exitCode"] == 0
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"PodScheduled": "True", "Ready": "False"}


def test_a_non_zero_code_fails_the_pod_with_that_code_on_the_runner_only() -> None:
    status = terminated_status(RUNNING_POD, exit_code=7, now=NOW)["status"]
    assert status["phase"] == "Failed"
    runner, dind = status["containerStatuses"]
    assert (runner["state"]["terminated"]["exitCode"], runner["state"]["terminated"]["reason"]) == (7, "Error")
    assert dind["state"]["terminated"]["exitCode"] == 0
