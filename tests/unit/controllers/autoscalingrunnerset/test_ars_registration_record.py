"""When the ARS's record of its scale set (the runner-group and scale-set-name annotations) needs GitHub's
answer on this pass instead of at the next periodic check."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.controllers.autoscalingrunnerset.registration import registration_record_stale
from tests.unit.controllers.ars_factory import ars_object, parsed

GROUP = "actions.github.com/runner-group-name"
NAME = "actions.github.com/runner-scale-set-name"


def stale(obj: dict[str, Any]) -> bool:
    return registration_record_stale(obj, parsed(obj))


def test_a_complete_record_matching_the_spec_is_not_stale() -> None:
    assert not stale(ars_object())


@pytest.mark.parametrize("key", [GROUP, NAME])
def test_a_missing_or_emptied_annotation_is_stale(key: str) -> None:
    removed = ars_object()
    del removed["metadata"]["annotations"][key]
    emptied = ars_object(annotations={key: ""})
    assert stale(removed)
    assert stale(emptied)


def test_a_recorded_group_other_than_the_spec_is_stale_compared_as_github_names_groups() -> None:
    assert stale(ars_object(runnerGroup="ci", annotations={GROUP: "Default"}))
    assert not stale(ars_object(runnerGroup="ci", annotations={GROUP: "CI"}))


def test_without_a_runner_group_in_the_spec_any_recorded_group_stands() -> None:
    # The default group's name is GitHub's to say ("Default"); only a missing annotation needs it.
    assert not stale(ars_object(annotations={GROUP: "Whatever GitHub calls it"}))


def test_a_recorded_name_other_than_the_spec_is_stale() -> None:
    assert stale(ars_object(runnerScaleSetName="linux-large", annotations={NAME: "linux-small"}))
    assert not stale(ars_object(runnerScaleSetName="linux-large", annotations={NAME: "linux-large"}))
