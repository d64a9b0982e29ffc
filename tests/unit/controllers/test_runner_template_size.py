"""A runner template above the controller's size bound is refused, naming its size, the bound and the flag (issue 26,
item 9: every runner stores a copy of the template, so an unbounded one could fill etcd's quota): on a scale set,
and on an EphemeralRunnerSet, measured so that a set made from a scale set weighs what the scale set did."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.controllers.autoscalingrunnerset.desired import ephemeral_runner_spec
from arc_scaleset.controllers.runner_template_size import (
    RunnerTemplateTooLarge,
    check_template_size,
    pod_template_size,
    runner_set_template,
    runner_set_template_problem,
    template_size,
)
from arc_scaleset.controllers.settings import DEFAULT_MAX_RUNNER_TEMPLATE_BYTES
from tests.unit.controllers.ars_factory import ars_object


def scale_set(script_bytes: int) -> dict[str, Any]:
    container = {"name": "runner", "image": "runner:1", "env": [{"name": "SCRIPT", "value": "x" * script_bytes}]}
    return {"metadata": {"name": "arc-runners"}, "spec": {"template": {"spec": {"containers": [container]}}}}


def test_the_bound_is_256_kib_by_default_and_a_template_at_it_is_accepted() -> None:
    assert DEFAULT_MAX_RUNNER_TEMPLATE_BYTES == 256 * 1024
    obj = scale_set(1000)
    check_template_size(obj, limit=template_size(obj))


def test_a_template_above_the_bound_is_refused_naming_its_size_the_bound_and_the_flag() -> None:
    obj = scale_set(300 * 1024)
    with pytest.raises(RunnerTemplateTooLarge) as refused:
        check_template_size(obj, limit=DEFAULT_MAX_RUNNER_TEMPLATE_BYTES)
    assert refused.value.reason == "RunnerTemplateTooLarge"
    size = template_size(obj)
    assert size > 300 * 1024
    assert f"spec.template is {size / 1024:.1f} KiB ({size} bytes)" in refused.value.message
    assert "256.0 KiB (262144 bytes)" in refused.value.message
    assert "--max-runner-template-bytes" in refused.value.message


def test_a_scale_set_without_a_readable_template_measures_as_empty() -> None:
    assert template_size({"spec": {"template": "not an object"}}) == len(b"{}")
    assert template_size({}) == len(b"{}")


# -- the same bound on an EphemeralRunnerSet (one made by hand has no scale set to check it) -------------------------


def runner_set(template: dict[str, Any]) -> dict[str, Any]:
    runner_spec = {"githubConfigUrl": "https://github.com/my-org", "githubConfigSecret": "gh", **template}
    return {"metadata": {"name": "arc"}, "spec": {"replicas": 3, "ephemeralRunnerSpec": runner_spec}}


def test_a_runner_set_made_from_a_scale_set_measures_what_the_scale_set_did() -> None:
    ars = ars_object(template={"metadata": {"labels": {"team": "a"}}, **scale_set(5000)["spec"]["template"]})
    made = {
        "spec": {"ephemeralRunnerSpec": ephemeral_runner_spec(AutoscalingRunnerSet.from_object(ars), scale_set_id=1)}
    }
    assert pod_template_size(runner_set_template(made)) == template_size(ars)
    # So a scale set at the bound never has its runner set refused.
    assert runner_set_template_problem(made, limit=template_size(ars)) is None


def test_a_runner_set_template_above_the_bound_is_a_problem_naming_its_size_the_bound_and_the_flag() -> None:
    obj = runner_set(scale_set(300 * 1024)["spec"]["template"])
    problem = runner_set_template_problem(obj, limit=DEFAULT_MAX_RUNNER_TEMPLATE_BYTES)
    assert problem is not None
    reason, message = problem
    assert reason == "RunnerTemplateTooLarge"
    size = pod_template_size(runner_set_template(obj))
    assert f"spec.ephemeralRunnerSpec) is {size / 1024:.1f} KiB ({size} bytes)" in message
    assert "256.0 KiB (262144 bytes)" in message
    assert "--max-runner-template-bytes" in message
    assert "no runner is created" in message


def test_only_the_pod_template_of_a_runner_set_is_measured_not_its_github_settings() -> None:
    obj = runner_set({"spec": {"containers": []}})
    assert runner_set_template(obj) == {"spec": {"containers": []}}
    assert runner_set_template({}) == {}
