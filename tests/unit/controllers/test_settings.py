"""ControllerSettings: the manager's options, their defaults and their derived values."""

from __future__ import annotations

import pytest

from arc_scaleset.controllers.settings import (
    DEFAULT_LISTENER_COMMAND,
    ControllerSettings,
    SettingsError,
    listener_command,
)

ENV = {"CONTROLLER_MANAGER_POD_NAMESPACE": "arc-system", "CONTROLLER_MANAGER_CONTAINER_IMAGE": "img:1"}


def test_environment_gives_namespace_image_and_the_default_listener_command() -> None:
    settings = ControllerSettings.from_environment(ENV)
    assert settings.controller_namespace == "arc-system"
    assert settings.controller_image == "img:1"
    assert settings.listener_entrypoint == ("arc-scaleset", "listener") == DEFAULT_LISTENER_COMMAND


def test_listener_entrypoint_env_replaces_the_command() -> None:
    settings = ControllerSettings.from_environment({**ENV, "LISTENER_ENTRYPOINT": "/x"})
    assert settings.listener_entrypoint == ("/x",)


@pytest.mark.parametrize("value", [None, "", "   "])
def test_an_unset_or_blank_entrypoint_means_the_default(value: str | None) -> None:
    assert listener_command(value) == DEFAULT_LISTENER_COMMAND


def test_options_override_the_environment_and_lists_become_tuples() -> None:
    settings = ControllerSettings.from_environment(
        ENV, controller_namespace="other", exclude_label_prefixes=["argocd.argoproj.io/"], image_pull_secrets=["r"]
    )
    assert settings.controller_namespace == "other"
    assert settings.exclude_label_prefixes == ("argocd.argoproj.io/",)
    assert settings.image_pull_secrets == ("r",)


@pytest.mark.parametrize("missing", ["CONTROLLER_MANAGER_POD_NAMESPACE", "CONTROLLER_MANAGER_CONTAINER_IMAGE"])
def test_missing_required_environment_is_refused_with_the_variable_named(missing: str) -> None:
    env = {k: v for k, v in ENV.items() if k != missing}
    with pytest.raises(SettingsError, match=missing):
        ControllerSettings.from_environment(env)


def test_defaults_follow_arc() -> None:
    settings = ControllerSettings(controller_namespace="ns", controller_image="img")
    assert settings.runner_max_concurrent_reconciles == 2
    assert settings.listener_metrics_addr == ":8080"
    assert settings.listener_metrics_endpoint == "/metrics"
    assert settings.listener_metrics_port == 8080
    assert (settings.log_level, settings.log_format) == ("debug", "text")


def test_listener_metrics_address_zero_disables_the_port() -> None:
    settings = ControllerSettings(controller_namespace="ns", controller_image="img", listener_metrics_addr="0")
    assert not settings.listener_metrics_enabled
    assert settings.listener_metrics_port is None


def test_an_unusable_listener_metrics_address_is_refused_at_construction() -> None:
    with pytest.raises(SettingsError, match="listener metrics address"):
        ControllerSettings(controller_namespace="ns", controller_image="img", listener_metrics_addr="localhost")


def test_invalid_log_settings_fall_back_to_arcs_defaults_for_listeners() -> None:
    settings = ControllerSettings(controller_namespace="ns", controller_image="img", log_level="trace", log_format="x")
    assert (settings.listener_log_level, settings.listener_log_format) == ("debug", "text")
    ok = ControllerSettings(controller_namespace="ns", controller_image="img", log_level="warn", log_format="json")
    assert (ok.listener_log_level, ok.listener_log_format) == ("warn", "json")
