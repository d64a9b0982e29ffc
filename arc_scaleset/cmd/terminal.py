"""``arc-scaleset status`` on a terminal: the plain-text screen, framed and coloured by rich.

Contract: :func:`rich_console` returns a rich console only when ``rich`` is importable AND the stream is a
TTY; otherwise None and the caller prints the plain text unchanged (pipes, files, ``-o json|yaml`` and an
operator image without rich see exactly what they saw before). ``rich`` is the lab's dependency, not the
operator's: it is imported here, lazily, and nowhere else in the operator. The words on the screen are those
of the plain text (:func:`arc_scaleset.diagnose.render.render_status`): rich adds a frame and colours only.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

# The styles: section labels, condition states, event types.
_STYLES: tuple[tuple[str, str], ...] = (
    (r"(?m)^  (GitHub|Runners|RunnerSet|Listener|Conditions|Events[^:]*:)", "bold cyan"),
    (r"\bReady=True\b|\bDegraded=False\b|\bProgressing=False\b", "green"),
    (r"\bReady=False\b|\bDegraded=True\b|\bReady=Unknown\b", "bold red"),
    (r"\bProgressing=True\b|\(rolling out\)", "yellow"),
    (r"\bWarning\b", "bold yellow"),
    (r"(?m)^  note:.*$", "italic"),
)


def rich_console(stream: TextIO | None = None) -> Any | None:
    """A ``rich.console.Console`` writing to ``stream`` (default stdout) when rich is importable and the
    stream is a TTY; None otherwise (print plain text)."""
    out = stream if stream is not None else sys.stdout
    try:
        if not out.isatty():
            return None
    except (AttributeError, ValueError):  # a closed or unusual stream: no terminal
        return None
    try:
        from rich.console import Console  # lazily: rich is not an operator dependency
    except ImportError:
        return None
    return Console(file=out, highlight=False)


def print_status(console: Any, screens: Sequence[str]) -> None:
    """Print each plain-text status screen (first line: the scale set) as a framed, coloured panel."""
    from rich.panel import Panel
    from rich.text import Text

    for screen in screens:
        title, _, body = screen.partition("\n")
        text = Text(body)
        for pattern, style in _STYLES:
            text.highlight_regex(pattern, style=style)
        console.print(Panel(text, title=Text(title, style="bold"), title_align="left", expand=False))
