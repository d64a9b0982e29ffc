"""``status`` and ``explain`` print what tenants wrote (condition messages, Event notes, the listener's state):
no control character of theirs reaches the terminal, and no line of theirs reads as one of the renderer's."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from arc_scaleset.api.keys import ANNOTATION_LISTENER_STATE
from arc_scaleset.diagnose.printable import printable
from arc_scaleset.diagnose.render import render_findings, render_status
from arc_scaleset.diagnose.rules import explain
from arc_scaleset.diagnose.snapshot import Snapshot
from arc_scaleset.diagnose.summary import summarize
from tests.unit.diagnose.test_explain_rules import recorded

# Sets the clipboard (OSC 52), clears the screen, returns the cursor, a C1 CSI, a line that forges a condition.
HOSTILE = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07gone\x1b[2J\rok \x9b31m\nConditions  Ready=True fine\u202e"
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]")


def hostile(name: str) -> Snapshot:
    """The recorded snapshot ``name`` with HOSTILE in every condition message, Event note and the listener's
    last error class."""
    snapshot = recorded(name)
    for obj in (snapshot.scale_set, snapshot.listener or {}):
        for condition in (obj.get("status") or {}).get("conditions") or []:
            condition["message"] = HOSTILE
    snapshot.events = [dataclasses.replace(event, note=HOSTILE) for event in snapshot.events]
    for runner_set in snapshot.runner_sets:
        annotations = runner_set["metadata"].get("annotations") or {}
        if ANNOTATION_LISTENER_STATE in annotations:
            state = json.loads(annotations[ANNOTATION_LISTENER_STATE])
            annotations[ANNOTATION_LISTENER_STATE] = json.dumps({**state, "lastErrorClass": HOSTILE})
    return snapshot


@pytest.mark.parametrize("name", ["listener_failing", "healthy", "bad_credentials"])
def test_status_text_shows_tenant_control_characters_escaped(name: str) -> None:
    plain = render_status(summarize(recorded(name)))
    text = render_status(summarize(hostile(name)))
    assert not CONTROL.search(text), repr(text)
    assert "\\x1b]52;c;" in text
    assert "\\x1b[2J\\rok \\x9b31m\\nConditions  Ready=True fine\\u202e" in text
    # The forged line stays inside the line it came in: the screen has the renderer's lines and no more.
    assert len(text.splitlines()) == len(plain.splitlines())


def test_status_text_escapes_the_listeners_reported_error() -> None:
    text = render_status(summarize(hostile("listener_failing")))
    (session,) = [line for line in text.splitlines() if "session Failing" in line]
    assert session.endswith("last error \\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07gone\\x1b[2J\\rok \\x9b31m\\nConditions"
                            "  Ready=True fine\\u202e")  # fmt: skip


def test_explain_text_shows_tenant_control_characters_escaped() -> None:
    snapshot = hostile("bad_credentials")
    text = render_findings(snapshot.namespace, snapshot.name, explain(snapshot))
    assert not CONTROL.search(text), repr(text)
    assert "\\x1b]52;c;" in text
    assert len(text.splitlines()) == 1 + len(explain(snapshot))


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text, ünïcode and emoji \U0001f680", "plain text, ünïcode and emoji \U0001f680"),
        ("\x1b[2J", "\\x1b[2J"),
        ("a\r\nb\tc", "a\\r\\nb\\tc"),
        ("\x00\x7f\x85\x9b", "\\x00\\x7f\\x85\\x9b"),
        ("\u202eevil\u2066", "\\u202eevil\\u2066"),
    ],
)
def test_printable_escapes_control_characters_only(raw: str, shown: str) -> None:
    assert printable(raw) == shown
