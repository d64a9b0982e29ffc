"""Finding and reading the listener's config.json (its format and rules: tests/unit/api/test_listener_config.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from arc_scaleset.api.credentials import AppConfig
from arc_scaleset.api.listener_config import ListenerConfigError
from arc_scaleset.listener.config import config_path_from_environment, load_config
from tests.unit.api.listener_config_fixtures import ARC_WRITTEN_PAT_CONFIG, TOKEN


def test_a_config_file_written_by_arcs_controller_loads(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(ARC_WRITTEN_PAT_CONFIG)
    config = load_config(path)
    assert config.runner_scale_set_id == 7
    assert config.app_config() == AppConfig(github_token=TOKEN)


def test_problems_name_the_file_they_are_in(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(ARC_WRITTEN_PAT_CONFIG.replace('"runner_scale_set_id":7', '"runner_scale_set_id":0'))
    with pytest.raises(ListenerConfigError) as caught:
        load_config(path)
    assert caught.value.problems == ["runner_scale_set_id is required and must not be 0"]
    assert str(path) in str(caught.value)


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ListenerConfigError, match="cannot read the config file"):
        load_config(tmp_path / "absent.json")


def test_the_path_comes_from_listener_config_path() -> None:
    assert config_path_from_environment({"LISTENER_CONFIG_PATH": "/etc/gha-listener/config.json"}) == Path(
        "/etc/gha-listener/config.json"
    )


def test_an_unset_listener_config_path_is_a_clear_error() -> None:
    with pytest.raises(ListenerConfigError, match="LISTENER_CONFIG_PATH is not set"):
        config_path_from_environment({})
