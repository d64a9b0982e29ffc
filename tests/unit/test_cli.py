"""``arc-scaleset`` without the lab installed: the operator's commands, and a clear word on the lab's.

(tests/packaging/test_wheel.py proves the same on a wheel installed with and without the extra.)
"""

from __future__ import annotations

import pytest

from arc_scaleset import cli


@pytest.fixture
def without_lab(monkeypatch: pytest.MonkeyPatch) -> None:
    # What plugin_commands() finds when the lab's registry cannot import (its extra is missing).
    monkeypatch.setattr(cli, "plugin_commands", dict)


@pytest.mark.usefixtures("without_lab")
@pytest.mark.parametrize("command", cli.LAB_COMMANDS)
def test_a_lab_command_without_the_lab_exits_2_with_one_line_naming_the_extra(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([command, "--help"]) == 2

    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"arc-scaleset: '{command}' comes with the lab, which is not installed: pip install 'arc-scaleset[lab]'"
    ]


@pytest.mark.usefixtures("without_lab")
def test_the_help_without_the_lab_keeps_the_install_command_whole_on_a_narrow_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")

    with pytest.raises(SystemExit):
        cli.main(["--help"])

    out = capsys.readouterr().out
    assert "pip install 'arc-scaleset[lab]'" in out
    assert all(len(line) <= 80 for line in out.splitlines()), out


def test_the_help_with_the_lab_lists_its_commands_and_no_install_hint(capsys: pytest.CaptureFixture[str]) -> None:
    # The development install (the dev extra) includes the lab.
    with pytest.raises(SystemExit):
        cli.main(["--help"])

    out = capsys.readouterr().out
    assert all(f"    {command} " in out for command in cli.LAB_COMMANDS), out
    assert "arc-scaleset[lab]" not in out
