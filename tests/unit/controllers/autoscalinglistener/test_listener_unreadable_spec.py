"""A listener whose spec cannot be read: ``Ready`` names the field and what is wrong, never the value it holds; a
listener pod that still runs serves on its previous config and ``Ready`` says so; a deleting one is deleted from
what can be read."""

from __future__ import annotations

import datetime as dt

import pydantic
import pytest

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.listener_standby import ANNOTATION_STANDBY, STANDBY_VALUE
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.controllers.autoscalinglistener.deletion import listener_children
from arc_scaleset.controllers.autoscalinglistener.status import derive_conditions
from arc_scaleset.controllers.autoscalinglistener.unreadable_spec import (
    deletion_skeleton,
    unreadable_spec_message,
    unreadable_spec_report,
)
from arc_scaleset.controllers.errors import first_spec_error
from arc_scaleset.kube.conditions import get_condition
from tests.unit.controllers.listener_factory import listener_object

NOW = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
TOKEN = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
WINDOW = {"days": "Mon-Fri", "start": "08:00", "end": "18:00", "timeZone": "Europe/Berlim", "runners": 1}


def validation_error(obj: dict[str, object]) -> pydantic.ValidationError:
    with pytest.raises(pydantic.ValidationError) as caught:
        AutoscalingListener.from_object(obj)
    return caught.value


def test_the_message_names_the_field_and_what_is_wrong_with_it() -> None:
    obj = listener_object(minRunnersSchedule=[WINDOW])
    message = unreadable_spec_message(validation_error(obj))
    assert message.startswith("the AutoscalingListener cannot be read: spec.minRunnersSchedule.0.timeZone: ")
    assert "'Europe/Berlim' is not an IANA time zone name" in message
    assert message.endswith("nothing is created or changed for it until then")


def test_the_value_a_field_holds_is_never_quoted() -> None:
    # A token pasted into a field of another type: pydantic's error carries it as its input, the message must not.
    obj = listener_object(runnerScaleSetId=TOKEN, template={"spec": {"containers": [{"env": [{"value": TOKEN}]}]}})
    exc = validation_error(obj)
    assert TOKEN in str(exc.errors())  # what the message is made from holds it
    message = unreadable_spec_message(exc)
    assert "spec.runnerScaleSetId: Input should be a valid integer" in message
    assert TOKEN not in message
    assert TOKEN not in first_spec_error(exc)


@pytest.mark.parametrize("standby", [False, True])
def test_a_deleting_listener_finds_the_same_children_without_its_spec(standby: bool) -> None:
    # The skeleton the deletion of an unreadable listener works from names every child the full listener does.
    obj = listener_object(minRunnersSchedule=[{**WINDOW, "timeZone": "Europe/Berlin"}])
    if standby:
        obj["metadata"]["annotations"] = {ANNOTATION_STANDBY: STANDBY_VALUE}
    skeleton = deletion_skeleton(AutoscalingListenerView(obj))
    assert listener_children(skeleton) == listener_children(AutoscalingListener.from_object(obj))
    assert "team" in {namespace for _, namespace, _ in listener_children(skeleton)}, "its Role and RoleBinding"


def test_without_a_running_pod_the_listener_is_not_ready_for_the_field() -> None:
    obj = listener_object(minRunnersSchedule=[WINDOW])
    view = AutoscalingListenerView(obj)
    message = unreadable_spec_message(validation_error(obj))
    report = unreadable_spec_report(view, message, pod_running=False, restarts=None)
    ready = get_condition(derive_conditions([], report, now=NOW), "Ready") or {}
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "InvalidSpec", message)


def test_a_running_pod_serves_on_its_previous_config_and_ready_names_the_field() -> None:
    obj = listener_object(minRunnersSchedule=[WINDOW])
    view = AutoscalingListenerView(obj)
    message = unreadable_spec_message(validation_error(obj))
    report = unreadable_spec_report(view, message, pod_running=True, restarts=None)
    ready = get_condition(derive_conditions([], report, now=NOW), "Ready") or {}
    assert ready["status"] == "True"
    assert ready["message"] == f"the listener pod runs on its previous config; {message}"
