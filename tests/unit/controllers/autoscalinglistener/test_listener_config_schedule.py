"""minRunnersSchedule from the AutoscalingRunnerSet to the listener's decision: the ARS passes it to the
AutoscalingListener, the listener's config.json carries it, and the listener raises its minimum inside a window."""

from __future__ import annotations

import base64
import datetime as dt

import orjson

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.credentials import AppConfig
from arc_scaleset.api.listener_config import ListenerConfig
from arc_scaleset.controllers.autoscalinglistener.config import desired_config_secret, listener_config
from arc_scaleset.controllers.autoscalingrunnerset.desired import desired_autoscaling_listener
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.listener.desired_state import DesiredState
from tests.unit.controllers.ars_factory import ars_object, parsed

SETTINGS = ControllerSettings(controller_namespace="arc-system", controller_image="img")
PAT = AppConfig(github_token="ghp_secret_value")
WORKING_HOURS = {"days": "Mon-Fri", "start": "08:00", "end": "18:00", "timeZone": "Europe/Berlin", "runners": 5}


def listener_for(**spec: object) -> dict[str, object]:
    ars = parsed(ars_object(minRunners=1, maxRunners=4, **spec))
    return desired_autoscaling_listener(
        ars, namespace="arc-system", scale_set_id=7, ephemeral_runner_set="arc-runners", image="img:1", url_labels={}
    )


def config_json(listener_object: dict[str, object]) -> bytes:
    listener_object["metadata"]["uid"] = "al-uid"  # type: ignore[index]  # given by the API server
    listener = AutoscalingListener.from_object(listener_object)
    config = listener_config(listener, app_config=PAT, server_root_ca=None, settings=SETTINGS)
    data = desired_config_secret(listener_object, listener, config)["data"]
    return base64.b64decode(data["config.json"])


def test_the_schedule_reaches_the_listeners_decision() -> None:
    listener = listener_for(minRunnersSchedule=[WORKING_HOURS, {"start": "22:00", "end": "23:00", "runners": 2}])
    assert listener["spec"]["minRunnersSchedule"] == [  # type: ignore[index]
        WORKING_HOURS,
        {"start": "22:00", "end": "23:00", "runners": 2},
    ]
    config = ListenerConfig.from_json(config_json(listener))
    assert [window.to_document() for window in config.min_runners_schedule] == [
        {"days": "Mon-Fri", "start": "08:00", "end": "18:00", "time_zone": "Europe/Berlin", "runners": 5},
        {"days": "*", "start": "22:00", "end": "23:00", "time_zone": "UTC", "runners": 2},
    ]
    state = DesiredState(
        min_runners=config.min_runners, max_runners=config.max_runners, schedule=config.min_runners_schedule
    )
    wednesday = dt.datetime(2026, 1, 7, tzinfo=dt.UTC)
    assert state.min_runners_at(wednesday + dt.timedelta(hours=9)) == 4  # 5 wanted, capped by maxRunners 4
    assert state.min_runners_at(wednesday + dt.timedelta(hours=20)) == 1
    assert state.min_runners_at(wednesday + dt.timedelta(hours=22, minutes=30)) == 2


def test_without_a_schedule_neither_the_listener_nor_its_config_mention_one() -> None:
    listener = listener_for()
    assert "minRunnersSchedule" not in listener["spec"]  # type: ignore[operator]
    assert "min_runners_schedule" not in orjson.loads(config_json(listener))
