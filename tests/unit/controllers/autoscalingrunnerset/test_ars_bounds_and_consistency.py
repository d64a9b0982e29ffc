"""The AutoscalingRunnerSet's bounds and status consistency (issue 15): a scale set above the runner ceiling is
refused, a problem its EphemeralRunnerSet reports shows on the scale set, and the phase and observedGeneration
are only ever written together."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from arc_scaleset.controllers.autoscalingrunnerset.bounds import check_runner_bounds
from arc_scaleset.controllers.autoscalingrunnerset.status import (
    ReconcileReport,
    derive_status,
    runner_set_problem,
    status_patch,
)
from arc_scaleset.controllers.errors import RunnersAboveCeiling
from arc_scaleset.kube.conditions import get_condition
from tests.unit.controllers.ars_factory import ars_object, parsed

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("bounds", "named"),
    [
        ({"minRunners": 500_000}, "minRunners 500000 is above"),
        ({"maxRunners": 10_001}, "maxRunners 10001 is above"),
        ({"minRunners": 20_000, "maxRunners": 30_000}, "minRunners 20000 and maxRunners 30000 are above"),
        (
            {"minRunnersSchedule": [{"start": "08:00", "end": "18:00", "runners": 500_000}]},
            "minRunnersSchedule[0].runners 500000 is above",
        ),
    ],
)
def test_a_scale_set_above_the_ceiling_is_refused_naming_the_field_and_the_flag(
    bounds: dict[str, Any], named: str
) -> None:
    with pytest.raises(RunnersAboveCeiling) as refused:
        check_runner_bounds(parsed(ars_object(**bounds)), ceiling=10_000)
    assert refused.value.reason == "RunnersAboveCeiling"
    assert named in refused.value.message
    assert "--max-runners-ceiling" in refused.value.message


@pytest.mark.parametrize(
    "bounds",
    [
        {},
        {"minRunners": 10_000, "maxRunners": 10_000},
        {"minRunners": 3},
        {"maxRunners": 10, "minRunnersSchedule": [{"start": "08:00", "end": "18:00", "runners": 500_000}]},
    ],
)
def test_a_scale_set_within_the_ceiling_or_without_a_maximum_is_accepted(bounds: dict[str, Any]) -> None:
    check_runner_bounds(parsed(ars_object(**bounds)), ceiling=10_000)


def test_a_problem_of_the_runner_set_makes_the_scale_set_degraded_and_not_ready_once_the_spec_is_applied() -> None:
    refused = {"status": {"conditions": [{"type": "Degraded", "status": "True", "reason": "InvalidRunnerTemplate",
                                          "message": "the API server refuses the runner pod: bad mount"}]}}  # fmt: skip
    problem = runner_set_problem(refused)
    assert problem == ("InvalidRunnerTemplate", "the API server refuses the runner pod: bad mount")
    assert runner_set_problem({"status": {"conditions": [{"type": "Degraded", "status": "False"}]}}) is None
    assert runner_set_problem(None) is None

    report = ReconcileReport(generation=2, observed_generation=1, stored_phase="Pending", complete=True,
                             runner_set_problem=problem)  # fmt: skip
    status = derive_status({"phase": "Pending", "observedGeneration": 1}, report, now=NOW)
    assert (status["phase"], status["observedGeneration"]) == ("Running", 2), "the spec did reach the set"
    ready, degraded = get_condition(status["conditions"], "Ready"), get_condition(status["conditions"], "Degraded")
    assert ready is not None
    assert degraded is not None
    assert (ready["status"], ready["reason"]) == ("False", "InvalidRunnerTemplate")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidRunnerTemplate")
    assert "bad mount" in degraded["message"]


def test_a_status_patch_never_carries_the_observed_generation_without_the_phase() -> None:
    stale_copy = {"phase": "Running", "observedGeneration": 1}
    report = ReconcileReport(generation=2, observed_generation=1, stored_phase="Running", complete=True)
    desired = derive_status(stale_copy, report, now=NOW)
    patch = status_patch(stale_copy, desired)
    assert (patch["phase"], patch["observedGeneration"]) == ("Running", 2)

    pending = derive_status(stale_copy, ReconcileReport(generation=2, observed_generation=1, stored_phase="Running"),
                            now=NOW)  # fmt: skip
    patch = status_patch(stale_copy, pending)
    assert (patch["phase"], patch["observedGeneration"]) == ("Pending", 1)
    assert status_patch(pending, pending) == {}
