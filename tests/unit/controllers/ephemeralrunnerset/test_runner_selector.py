"""Which runners the applied-revision write lists: those of its scale set, not every runner of the namespace."""

from __future__ import annotations

from typing import Any

from arc_scaleset.controllers.ephemeralrunnerset.status import runner_selector


def runner_set(labels: dict[str, str] | None) -> dict[str, Any]:
    return {"metadata": {"name": "arc-abcde", "namespace": "arc-runners", "labels": labels or {}}}


def test_a_set_of_a_scale_set_lists_only_that_scale_sets_runners() -> None:
    ers = runner_set({"actions.github.com/scale-set-name": "arc", "app.kubernetes.io/component": "runner-set"})
    assert runner_selector(ers) == "actions.github.com/scale-set-name=arc"


def test_a_set_without_the_scale_set_label_lists_every_runner_of_the_namespace() -> None:
    assert runner_selector(runner_set(None)) is None


def test_a_scale_set_label_kept_off_runners_is_not_relied_on() -> None:
    ers = runner_set({"actions.github.com/scale-set-name": "arc"})
    assert runner_selector(ers, ["actions.github.com/"]) is None
    assert runner_selector(ers, ["example.com/"]) == "actions.github.com/scale-set-name=arc"
