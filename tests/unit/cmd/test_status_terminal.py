"""``arc-scaleset status`` uses rich only on a terminal: piped, redirected or without rich, the plain text."""

from __future__ import annotations

import io
import sys

import pytest

from arc_scaleset.cmd import status, terminal
from arc_scaleset.diagnose.render import render_status
from arc_scaleset.diagnose.summary import summarize
from tests.unit.diagnose.test_explain_rules import recorded


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_without_a_tty_status_prints_the_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stdout", piped)

    assert terminal.rich_console() is None
    assert status._terminal([render_status(summarize(recorded("healthy")))]) is False
    assert piped.getvalue() == ""  # nothing written: the caller prints the plain text


def test_on_a_tty_without_rich_status_prints_the_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rich.console", None)  # import fails as when rich is not installed

    assert terminal.rich_console(FakeTty()) is None


def test_on_a_tty_status_frames_the_same_words_with_rich() -> None:
    screen = render_status(summarize(recorded("revision_rolling")))
    tty = FakeTty()
    console = terminal.rich_console(tty)
    assert console is not None
    console.width = 400  # wide enough for no line to wrap: the words stay whole

    terminal.print_status(console, [screen])

    shown = tty.getvalue()
    for line in screen.splitlines():
        for word in line.split():
            assert word in shown
