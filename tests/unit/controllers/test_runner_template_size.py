"""A runner template above the controller's size bound is refused, naming its size, the bound and the flag (issue 26,
item 9: every runner stores a copy of the template, so an unbounded one could fill etcd's quota)."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.controllers.runner_template_size import (
    RunnerTemplateTooLarge,
    check_template_size,
    template_size,
)
from arc_scaleset.controllers.settings import DEFAULT_MAX_RUNNER_TEMPLATE_BYTES


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
