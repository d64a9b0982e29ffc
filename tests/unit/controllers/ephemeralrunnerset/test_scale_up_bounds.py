"""Bounds on what one EphemeralRunnerSet pass creates (issue 15): growing batches, the runner ceiling, the dry
run of the runner pod, and the ``Degraded`` condition that reports them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.clock import FakeClock
from arc_scaleset.controllers.ephemeralrunnerset.conditions import degraded_conditions
from arc_scaleset.controllers.ephemeralrunnerset.scaling import (
    SetSpec,
    Step,
    creation_batches,
    plan_scaling,
    replicas_above_ceiling,
)
from arc_scaleset.controllers.ephemeralrunnerset.template_check import (
    TemplateChecks,
    dry_run_pod,
    rejection_of,
)
from arc_scaleset.controllers.runner_classification import RunnerView, classify
from arc_scaleset.kube.errors import BadRequest, Forbidden, Invalid, ServerError

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def ers(*, replicas: int = 3, image: str = "runner:1", uid: str = "u1", conditions: Any = None) -> dict[str, Any]:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "metadata": {"name": "arc", "namespace": "team", "uid": uid, "generation": 4,
                     "labels": {"actions.github.com/scale-set-name": "arc"}},
        "spec": {"replicas": replicas, "patchID": 0, "actionableRevision": 2, "ephemeralRunnerSpec": {
            "githubConfigUrl": "https://github.com/org", "githubConfigSecret": "gh", "runnerScaleSetId": 7,
            "spec": {"containers": [{"name": "runner", "image": image}]}}},
        "status": {"conditions": conditions} if conditions is not None else {},
    }  # fmt: skip


# -- growing batches ------------------------------------------------------------------------------------


def test_a_scale_up_starts_with_one_runner_and_doubles_up_to_the_concurrency() -> None:
    assert creation_batches(100, limit=20) == [1, 2, 4, 8, 16, 20, 20, 20, 9]
    assert creation_batches(3, limit=50) == [1, 2]
    assert creation_batches(1, limit=50) == [1]
    assert creation_batches(0, limit=50) == []
    assert creation_batches(5, limit=1) == [1, 1, 1, 1, 1]


@given(st.integers(0, 5000), st.integers(1, 200))
def test_batches_add_up_to_the_count_and_never_exceed_the_concurrency(count: int, limit: int) -> None:
    batches = creation_batches(count, limit=limit)
    assert sum(batches) == count
    assert all(1 <= size <= limit for size in batches)
    assert batches[:1] in ([], [1]), "the first batch is a single runner: a refusal costs one request"


# -- the ceiling ----------------------------------------------------------------------------------------


def test_replicas_above_the_ceiling_create_only_up_to_the_ceiling() -> None:
    states = classify([RunnerView(name="r0", phase="Running", runner_id=1)], applied_revision=0)
    plan = plan_scaling(SetSpec(replicas=500_000, patch_id=0, max_replicas=10), states, now=NOW)
    assert (plan.step, plan.create) == (Step.SCALE_UP, 9)
    assert plan_scaling(SetSpec(replicas=5, patch_id=0, max_replicas=10), states, now=NOW).create == 4


def test_replicas_above_the_ceiling_are_a_problem_that_names_the_flag() -> None:
    assert replicas_above_ceiling(ers(replicas=10), ceiling=10) is None
    reason, message = replicas_above_ceiling(ers(replicas=500_000), ceiling=10) or ("", "")
    assert reason == "ReplicasAboveCeiling"
    assert "500000" in message
    assert "--max-runners-ceiling" in message


# -- the dry run of the runner pod ----------------------------------------------------------------------


def test_the_dry_run_pod_is_the_runner_pod_without_an_owner_and_with_a_runner_length_name() -> None:
    pod = dry_run_pod(ers(), version="1.2.3")
    assert pod["metadata"]["name"] == "arc-runner-dryrn"  # generateName + 5 characters, as the API server makes
    assert pod["metadata"]["namespace"] == "team"
    assert "ownerReferences" not in pod["metadata"]
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "runner:1"
    assert {env["name"] for env in container["env"]} >= {"ACTIONS_RUNNER_INPUT_JITCONFIG"}


@pytest.mark.parametrize(
    ("error", "rejected"),
    [
        (Invalid(422, "Invalid", 'Pod "x" is invalid: spec.containers[0].volumeMounts[0].name: Not found'), True),
        (Forbidden(403, "Forbidden", 'pods "x" is forbidden: violates PodSecurity "restricted:latest"'), True),
        (Forbidden(403, "Forbidden", 'pods "x" is forbidden: exceeded quota: q, requested: pods=1'), False),
        (BadRequest(400, "BadRequest", 'admission webhook "w" does not support dry run'), False),
    ],
)
def test_only_a_refusal_of_the_pod_itself_counts_against_the_template(error: Exception, rejected: bool) -> None:
    assert (rejection_of(error) is not None) is rejected


def test_an_error_that_says_nothing_about_the_template_propagates() -> None:
    with pytest.raises(ServerError):
        rejection_of(ServerError(500, "InternalError", "etcd is away"))


async def test_a_verdict_holds_for_its_runner_spec_only_and_is_tried_again_when_due() -> None:
    clock = FakeClock()
    checks = TemplateChecks(clock=clock, recheck_rejected=60, recheck_accepted=600)
    assert checks.known(ers()) is None
    assert checks.due_in(None) == 0, "a runner spec never tried is tried before its first runner"

    rejected = checks.record(ers(), "spec.containers[0].volumeMounts[0].name: Not found")
    assert checks.known(ers(replicas=9)) == rejected, "replicas are not the template"
    assert checks.known(ers(image="runner:2")) is None, "a new runner spec is tried again"
    assert checks.known(ers(uid="u2")) is None, "a set of the same name made anew is tried again"
    assert checks.due_in(rejected) == 60
    await clock.advance(60)
    assert checks.due_in(rejected) == 0

    accepted = checks.record(ers(image="runner:2"), None)
    await clock.advance(599)
    assert checks.due_in(accepted) == 1
    assert checks.known(ers(image="runner:2")) == accepted
    forgotten = TemplateChecks(clock=clock)  # a set's memory after it was forgotten: nothing tried
    assert forgotten.known(ers(image="runner:2")) is None


# -- the Degraded condition -----------------------------------------------------------------------------


def test_degraded_is_written_when_a_problem_starts_changes_or_ends_and_not_otherwise() -> None:
    assert degraded_conditions(ers(), None, now=NOW) is None, "nothing to say, nothing written"
    problem = ("InvalidRunnerTemplate", "the API server refuses the runner pod: bad mount")
    started = degraded_conditions(ers(), problem, now=NOW)
    assert started is not None
    (degraded,) = started
    assert (degraded["type"], degraded["status"], degraded["reason"]) == ("Degraded", "True", "InvalidRunnerTemplate")

    later = NOW + dt.timedelta(minutes=1)
    same = ers(conditions=started)
    same["metadata"]["generation"] = 99  # a listener patch moved the generation
    assert degraded_conditions(same, problem, now=later) is None

    ended = degraded_conditions(ers(conditions=started), None, now=later)
    assert ended is not None
    assert (ended[0]["status"], ended[0]["reason"]) == ("False", "AsExpected")


def test_a_ceiling_refusal_and_a_template_refusal_are_told_apart_in_the_reason() -> None:
    above = replicas_above_ceiling(ers(replicas=20), ceiling=10)
    conditions = degraded_conditions(ers(), above, now=NOW)
    assert conditions is not None
    assert conditions[0]["reason"] == "ReplicasAboveCeiling"
