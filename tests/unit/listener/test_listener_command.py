"""The command's edges that need no service: bad configuration exits 1 with a clear line; listen addresses."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from arc_scaleset.listener import command


@pytest.fixture(autouse=True)
def keep_test_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    # The command installs its own stdout handler; in tests, pytest's capture handlers must stay.
    monkeypatch.setattr(command, "configure_logging", lambda **_: None)


def args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    command.configure(parser)
    return parser.parse_args([])


def test_no_flags_are_required() -> None:
    parsed = args()
    assert parsed.kubeconfig is None


def test_a_missing_config_path_exits_1_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("LISTENER_CONFIG_PATH", raising=False)
    assert command.run(args()) == 1
    assert "LISTENER_CONFIG_PATH is not set" in caplog.text


def test_an_invalid_config_exits_1_listing_every_problem(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"configure_url": "", "github_token": "ghp_secretvalue", "max_runners": 1, "min_runners": 2}')
    monkeypatch.setenv("LISTENER_CONFIG_PATH", str(path))
    assert command.run(args()) == 1
    out = caplog.text
    assert "configure_url is required" in out
    assert "runner_scale_set_id is required" in out
    assert "max_runners (1) must be greater than or equal to min_runners (2)" in out
    assert "ghp_secretvalue" not in out
