"""The command's edges that need no service: bad configuration exits 1 with a clear line; anything unexpected
is logged through the redacting logger, never printed raw."""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import secrets
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import structlog

from arc_scaleset.listener import command
from arc_scaleset.observability.logging import REDACTED, configure_logging, redact
from arc_scaleset.observability.uncaught import log_asyncio_exception
from tests.unit.api.listener_config_fixtures import ARC_WRITTEN_PAT_CONFIG


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


def test_group_mode_without_its_namespace_exits_1_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("LISTENER_GROUP_SECRET", "arc-shared-listener-0123456789")
    monkeypatch.delenv("LISTENER_GROUP_NAMESPACE", raising=False)
    monkeypatch.delenv("LISTENER_CONFIG_PATH", raising=False)
    assert command.run(args()) == 1
    assert "LISTENER_GROUP_NAMESPACE is not set" in caplog.text


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


GITHUB_TOKEN = "ghp_" + "Uncaught0123456789abcdefghijklmnopqr"


@pytest.fixture
def real_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The command's own logging setup (redaction included), into a buffer; everything put back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    buffer = io.StringIO()

    def configure(**options: str) -> None:
        configure_logging(level=options.get("level", "info"), fmt=options.get("fmt", "text"), stream=buffer)

    monkeypatch.setattr(command, "configure_logging", configure)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    yield buffer
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    structlog.reset_defaults()


def valid_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(
        orjson.dumps(
            {
                "configure_url": "https://github.com/octo-org",
                "github_token": GITHUB_TOKEN,
                "ephemeral_runner_set_namespace": "arc-runners",
                "ephemeral_runner_set_name": "set-a",
                "min_runners": 0,
                "max_runners": 3,
                "runner_scale_set_id": 7,
                "log_format": "json",
            }
        ).decode()
    )
    return path


def test_an_unexpected_exception_is_logged_redacted_with_its_traceback_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, real_logging: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LISTENER_CONFIG_PATH", str(valid_config(tmp_path)))

    def broken_build(*_: object, **__: object) -> None:
        raise RuntimeError(f"a bug that quotes the token {GITHUB_TOKEN}")

    monkeypatch.setattr(command, "build_listener", broken_build)
    assert command.run(args()) == 1
    lines = [orjson.loads(line) for line in real_logging.getvalue().splitlines()]
    crash = next(line for line in lines if line["msg"] == "listener crashed")
    assert crash["level"] == "error"
    assert "RuntimeError: a bug that quotes the token [REDACTED]" in crash["exception"]
    assert GITHUB_TOKEN not in real_logging.getvalue()
    captured = capsys.readouterr()
    assert captured.err == ""  # nothing printed past the logger


def test_uncaught_exceptions_of_the_process_and_its_threads_go_through_the_redacting_logger(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, real_logging: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LISTENER_CONFIG_PATH", raising=False)
    assert command.run(args()) == 1  # sets logging up and installs the hooks before reading the config
    try:
        raise ValueError(f"escaped from main with {GITHUB_TOKEN}")
    except ValueError as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    thread = threading.Thread(target=lambda: (_ for _ in ()).throw(KeyError(GITHUB_TOKEN)), name="worker")
    thread.start()
    thread.join()
    text = real_logging.getvalue()
    assert "uncaught exception in the process: ValueError" in text
    assert "uncaught exception in thread worker: KeyError" in text
    assert "Traceback (most recent call last)" in text
    assert GITHUB_TOKEN not in text
    assert capsys.readouterr().err == ""


async def test_an_exception_in_a_task_nobody_awaited_goes_through_the_redacting_logger(
    real_logging: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging(level="info", fmt="text", stream=real_logging)
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(log_asyncio_exception)
    try:
        raised = asyncio.get_running_loop().create_future()
        try:
            raise RuntimeError(f"lost in a task with {GITHUB_TOKEN}")
        except RuntimeError as exc:
            raised.set_exception(exc)
        loop.call_exception_handler({"message": "Task exception was never retrieved", "exception": raised.exception()})
        never_raised = LookupError(f"never raised, with {GITHUB_TOKEN}")
        loop.call_exception_handler({"message": "Future exception was never retrieved", "exception": never_raised})
    finally:
        loop.set_exception_handler(None)
    text = real_logging.getvalue()
    assert "uncaught exception in a task: Task exception was never retrieved: RuntimeError" in text
    assert "RuntimeError: lost in a task with [REDACTED]" in text  # the traceback's last line
    assert "Future exception was never retrieved: LookupError: never raised, with [REDACTED]" in text
    assert GITHUB_TOKEN not in text
    assert capsys.readouterr().err == ""


def test_the_proxy_password_of_the_pod_environment_is_masked_before_the_listener_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The proxy URL reaches the listener as ``https_proxy`` (from the runner set's proxy Secret): its password
    is registered with the redactor like the config's credentials (issue 26)."""
    password = "pr0xy-" + secrets.token_hex(8)  # shaped like no known credential
    path = tmp_path / "config.json"
    path.write_text(ARC_WRITTEN_PAT_CONFIG)
    monkeypatch.setenv("LISTENER_CONFIG_PATH", str(path))
    monkeypatch.setenv("https_proxy", f"http://ops:{password}@proxy.corp:3128")
    started: list[object] = []

    async def no_service(config: object, **_: object) -> int:
        started.append(config)
        return 0

    monkeypatch.setattr(command, "_main", no_service)
    monkeypatch.setattr(command, "freeze_startup_objects", lambda: None)
    monkeypatch.setattr(command, "shrink_tls_read_buffers", lambda _: None)
    assert command.run(args()) == 0
    assert started
    assert redact(f"the proxy refused password {password}") == f"the proxy refused password {REDACTED}"
