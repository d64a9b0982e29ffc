"""The AutoscalingRunnerSet marks the listener it makes with its UID: the listener lives in another namespace, where
no owner reference can point, and the listener controller serves only listeners their scale set made."""

from __future__ import annotations

from arc_scaleset.controllers.autoscalingrunnerset.desired import desired_autoscaling_listener
from tests.unit.controllers.ars_factory import ars_object, parsed

UID_ANNOTATION = "actions.github.com/autoscaling-runner-set-uid"


def test_the_scale_set_controller_stamps_its_uid_on_the_listener_over_any_user_annotation() -> None:
    obj = ars_object(autoscalingListener={"annotations": {UID_ANNOTATION: "forged", "note": "kept"}})
    listener = desired_autoscaling_listener(
        parsed(obj), namespace="arc-system", scale_set_id=7, ephemeral_runner_set="arc-runners", image="img:1",
        url_labels={},
    )  # fmt: skip
    assert listener["metadata"]["annotations"] == {UID_ANNOTATION: "ars-uid", "note": "kept"}
