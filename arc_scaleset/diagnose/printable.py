"""Text that is safe to print on a terminal: what ``status`` and ``explain`` show of the objects they read.

Condition messages, Event notes, the listener's state and object names are written by whoever can write those
objects, which includes every team with a scale set (and its listener). A terminal acts on the control
characters in what it prints: ``ESC ] 52`` sets the clipboard, ``ESC [ 2J`` clears the screen, a carriage
return or ``CSI`` (``\\x9b``, the one-byte C1 form of ``ESC [``) overwrites what was printed before, and a line
feed starts a line that reads as the renderer's own. :func:`printable` shows each such character as a visible
escape instead, so what is printed is exactly what the object says and nothing more.

The renderers build their output line by line and pass each line through :func:`printable`: only the newlines
they join the lines with reach the terminal. JSON and YAML output need nothing of this: both encoders escape
control characters themselves.
"""

from __future__ import annotations

import re
from typing import Final

_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

# C0 (including ESC, CR, LF, TAB), DEL and C1 control characters, and the Unicode bidirectional controls
# (which reorder what follows them on screen: "Trojan Source", CVE-2021-42574).
_UNPRINTABLE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character (C0, DEL, C1, bidirectional controls; newlines and tabs too) shown
    as a backslash escape (``\\x1b``, ``\\n``, ``\\u202e``); every other character unchanged."""
    return _UNPRINTABLE.sub(_escape, text)
