"""The listener's config.json: ARC's exact keys, and accepted by this project's listener as written."""

from __future__ import annotations

import base64

import orjson
import pytest

from arc_scaleset.controllers.autoscalinglistener.config import (
    InvalidListenerConfig,
    data_differs,
    desired_config_secret,
    listener_config_document,
)
from arc_scaleset.controllers.github_access import AppConfig
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.listener.config import config_from_mapping
from tests.unit.controllers.listener_factory import listener_object, parsed_listener

SETTINGS = ControllerSettings(controller_namespace="arc-system", controller_image="img")
PAT = AppConfig(github_token="ghp_secret_value")

ARC_KEYS = [
    "configure_url", "vault_type", "vault_lookup_key", "github_app_id", "github_app_installation_id",
    "github_app_private_key", "github_token", "ephemeral_runner_set_namespace", "ephemeral_runner_set_name",
    "max_runners", "min_runners", "runner_scale_set_id", "runner_scale_set_name", "server_root_ca", "log_level",
    "log_format", "metrics_addr", "metrics_endpoint", "metrics",
]  # fmt: skip


def test_the_document_has_arcs_keys_in_arcs_order_and_values() -> None:
    document = listener_config_document(parsed_listener(listener_object()), app_config=PAT, server_root_ca=None,
                                        settings=SETTINGS)  # fmt: skip
    assert list(document) == ARC_KEYS
    assert document == {
        "configure_url": "https://github.com/my-org", "vault_type": "", "vault_lookup_key": "",
        "github_app_id": "", "github_app_installation_id": 0, "github_app_private_key": "",
        "github_token": "ghp_secret_value", "ephemeral_runner_set_namespace": "team",
        "ephemeral_runner_set_name": "arc-runners", "max_runners": 10, "min_runners": 1, "runner_scale_set_id": 7,
        "runner_scale_set_name": "arc-runners", "server_root_ca": "", "log_level": "debug", "log_format": "text",
        "metrics_addr": ":8080", "metrics_endpoint": "/metrics", "metrics": None,
    }  # fmt: skip


def test_the_listener_reads_what_the_controller_writes() -> None:
    obj = listener_object(metrics={"gauges": {"g": {"labels": ["name"]}}})
    document = listener_config_document(parsed_listener(obj), app_config=PAT, server_root_ca="PEM", settings=SETTINGS)
    secret = desired_config_secret(obj, parsed_listener(obj), document)
    raw = base64.b64decode(secret["data"]["config.json"])
    config = config_from_mapping(orjson.loads(raw))
    assert config.github_token == "ghp_secret_value"
    assert (config.min_runners, config.max_runners, config.runner_scale_set_id) == (1, 10, 7)
    assert config.server_root_ca == "PEM"
    assert config.metrics is not None
    assert "g" in config.metrics.gauges


def test_disabled_listener_metrics_leave_both_fields_empty() -> None:
    settings = ControllerSettings(controller_namespace="a", controller_image="i", listener_metrics_addr="0")
    document = listener_config_document(parsed_listener(listener_object()), app_config=PAT, server_root_ca=None,
                                        settings=settings)  # fmt: skip
    assert (document["metrics_addr"], document["metrics_endpoint"]) == ("", "")


def test_an_unregistered_scale_set_is_refused_before_the_listener_sees_it() -> None:
    with pytest.raises(InvalidListenerConfig, match="runnerScaleSetId"):
        listener_config_document(parsed_listener(listener_object(runnerScaleSetId=0)), app_config=PAT,
                                 server_root_ca=None, settings=SETTINGS)  # fmt: skip


def test_the_app_config_never_shows_secrets_in_its_repr() -> None:
    app = AppConfig(github_app_id="1", github_app_installation_id=2, github_app_private_key="-----BEGIN KEY")
    assert "BEGIN" not in repr(app)
    assert "ghp_" not in repr(PAT)


def test_secret_data_drift_compares_bytes() -> None:
    obj = listener_object()
    listener = parsed_listener(obj)
    document = listener_config_document(listener, app_config=PAT, server_root_ca=None, settings=SETTINGS)
    secret = desired_config_secret(obj, listener, document)
    assert not data_differs(secret, secret)
    rotated = desired_config_secret(obj, listener, {**document, "github_token": "ghp_rotated"})
    assert data_differs(secret, rotated)
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "al-uid"
