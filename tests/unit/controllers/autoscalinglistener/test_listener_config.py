"""The listener config the controller writes: ARC's exact keys, refused when the listener would refuse it, and
read back by the listener identically."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path

import orjson
import pytest

from arc_scaleset.api.credentials import AppConfig
from arc_scaleset.controllers.autoscalinglistener.config import (
    InvalidListenerConfig,
    data_differs,
    desired_config_secret,
    listener_config,
)
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.listener.config import load_config
from tests.unit.controllers.listener_factory import listener_object, parsed_listener

SETTINGS = ControllerSettings(controller_namespace="arc-system", controller_image="img")
PAT = AppConfig(github_token="ghp_secret_value")

ARC_KEYS = [
    "configure_url", "vault_type", "vault_lookup_key", "github_app_id", "github_app_installation_id",
    "github_app_private_key", "github_token", "ephemeral_runner_set_namespace", "ephemeral_runner_set_name",
    "max_runners", "min_runners", "runner_scale_set_id", "runner_scale_set_name", "server_root_ca", "log_level",
    "log_format", "metrics_addr", "metrics_endpoint", "metrics",
]  # fmt: skip


def written_json(secret: dict[str, object]) -> bytes:
    data = secret["data"]
    assert isinstance(data, dict)
    return base64.b64decode(data["config.json"])


def test_the_secret_holds_arcs_keys_in_arcs_order_and_values() -> None:
    obj = listener_object()
    config = listener_config(parsed_listener(obj), app_config=PAT, server_root_ca=None, settings=SETTINGS)
    document = orjson.loads(written_json(desired_config_secret(obj, parsed_listener(obj), config)))
    assert list(document) == ARC_KEYS
    assert document == {
        "configure_url": "https://github.com/my-org", "vault_type": "", "vault_lookup_key": "",
        "github_app_id": "", "github_app_installation_id": 0, "github_app_private_key": "",
        "github_token": "ghp_secret_value", "ephemeral_runner_set_namespace": "team",
        "ephemeral_runner_set_name": "arc-runners", "max_runners": 10, "min_runners": 1, "runner_scale_set_id": 7,
        "runner_scale_set_name": "arc-runners", "server_root_ca": "", "log_level": "debug", "log_format": "text",
        "metrics_addr": ":8080", "metrics_endpoint": "/metrics", "metrics": None,
    }  # fmt: skip


def test_the_listener_reads_back_exactly_what_the_controller_writes(tmp_path: Path) -> None:
    obj = listener_object(metrics={"gauges": {"g": {"labels": ["name"]}}, "histograms": {"h": {"labels": []}}})
    app = AppConfig(github_app_id="Iv1.abc", github_app_installation_id=42, github_app_private_key="-----BEGIN KEY")
    config = listener_config(parsed_listener(obj), app_config=app, server_root_ca="PEM", settings=SETTINGS)
    path = tmp_path / "config.json"
    path.write_bytes(written_json(desired_config_secret(obj, parsed_listener(obj), config)))
    read_back = load_config(path)
    assert read_back == config
    assert read_back.app_config() == app
    assert read_back.server_root_ca == "PEM"
    assert read_back.to_json() == config.to_json()


def test_only_the_metrics_the_listener_sets_are_written() -> None:
    obj = listener_object(metrics={"histograms": {"h": {"labels": ["name"]}}})
    config = listener_config(parsed_listener(obj), app_config=PAT, server_root_ca=None, settings=SETTINGS)
    assert config.to_document()["metrics"] == {"histograms": {"h": {"labels": ["name"]}}}


def test_disabled_listener_metrics_leave_both_fields_empty() -> None:
    settings = ControllerSettings(controller_namespace="a", controller_image="i", listener_metrics_addr="0")
    config = listener_config(parsed_listener(listener_object()), app_config=PAT, server_root_ca=None,
                             settings=settings)  # fmt: skip
    assert (config.metrics_addr, config.metrics_endpoint) == ("", "")


def test_an_unregistered_scale_set_is_refused_before_the_listener_sees_it() -> None:
    with pytest.raises(InvalidListenerConfig, match="runner_scale_set_id is required and must not be 0"):
        listener_config(parsed_listener(listener_object(runnerScaleSetId=0)), app_config=PAT,
                        server_root_ca=None, settings=SETTINGS)  # fmt: skip


def test_every_problem_the_listener_would_report_is_reported_by_the_controller_without_secrets() -> None:
    obj = listener_object(githubConfigUrl="", runnerScaleSetId=0,
                          metrics={"histograms": {"h": {"labels": [], "buckets": [5, 1]}}})  # fmt: skip
    with pytest.raises(InvalidListenerConfig) as caught:
        listener_config(parsed_listener(obj), app_config=PAT, server_root_ca=None, settings=SETTINGS)
    message = str(caught.value)
    assert message == (
        "the listener configuration would be rejected: configure_url is required: the GitHub enterprise, "
        "organization or repository URL; runner_scale_set_id is required and must not be 0; "
        "metrics.histograms.h.buckets must be strictly increasing"
    )
    assert "ghp_secret_value" not in message


def test_the_app_config_never_shows_secrets_in_its_repr() -> None:
    app = AppConfig(github_app_id="1", github_app_installation_id=2, github_app_private_key="-----BEGIN KEY")
    assert "BEGIN" not in repr(app)
    assert "ghp_" not in repr(PAT)


def test_secret_data_drift_compares_bytes() -> None:
    obj = listener_object()
    listener = parsed_listener(obj)
    config = listener_config(listener, app_config=PAT, server_root_ca=None, settings=SETTINGS)
    secret = desired_config_secret(obj, listener, config)
    assert not data_differs(secret, secret)
    rotated = desired_config_secret(obj, listener, dataclasses.replace(config, github_token="ghp_rotated"))
    assert data_differs(secret, rotated)
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "al-uid"


VAULT = {
    "type": "azure_key_vault",
    "azureKeyVault": {
        "url": "https://my-vault.vault.azure.net/",
        "tenantId": "tenant",
        "clientId": "client",
        "certificatePath": "/etc/arc/vault.pem",
    },
}


def test_with_a_vault_the_config_carries_the_credentials_the_controller_read_and_no_vault_settings() -> None:
    # ARC's controller writes the vault's settings and lets the listener read the vault, which needs the vault's
    # client certificate in the listener pod; here the listener gets the credentials as from a Secret.
    obj = listener_object(vaultConfig=VAULT)
    config = listener_config(parsed_listener(obj), app_config=PAT, server_root_ca=None, settings=SETTINGS)
    document = orjson.loads(written_json(desired_config_secret(obj, parsed_listener(obj), config)))
    assert document["github_token"] == PAT.github_token
    assert document["vault_type"] == ""
    assert document["vault_lookup_key"] == ""
    assert "azure_key_vault" not in document
