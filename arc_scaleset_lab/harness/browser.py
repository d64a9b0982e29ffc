"""Headless Chromium (Debian's package ``chromium``) on a local HTML file: its DOM once loaded, or a screenshot.

For the demo's report (:mod:`arc_scaleset_lab.demo.report_html`): :func:`dump_dom` gives the DOM after the page's
scripts ran, and :func:`charts` reads each chart of it (its marks, what the browser laid out, "no data").
Chromium runs with ``--no-sandbox`` only as root (its sandbox refuses root; CI runs as root), with a profile of its
own in a temporary directory, and is given ``timeout`` seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Final

COMMAND: Final = "chromium"
PACKAGE: Final = "chromium"
"""The Debian package that provides :data:`COMMAND`."""


class BrowserError(RuntimeError):
    """Chromium is missing or failed; the message has its exit code and the end of its output."""


def _run(html_file: Path, flags: list[str], *, timeout: float) -> str:
    binary = shutil.which(COMMAND)
    if binary is None:
        raise BrowserError(f"{COMMAND} is not on PATH (Debian: apt-get install {PACKAGE})")
    with tempfile.TemporaryDirectory(prefix="arc-scaleset-chromium-") as profile:
        command = [
            binary,
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            *(["--no-sandbox"] if os.geteuid() == 0 else []),
            *flags,
            html_file.resolve().as_uri(),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise BrowserError(f"{COMMAND} exited with {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def dump_dom(html_file: Path, *, timeout: float = 60.0) -> str:
    """The page's DOM, serialised after it loaded and its scripts ran."""
    return _run(html_file, ["--dump-dom"], timeout=timeout)


def screenshot(html_file: Path, png: Path, *, width: int = 1040, height: int = 1800, timeout: float = 60.0) -> Path:
    """A PNG of the page's first ``width`` x ``height`` CSS pixels at ``png``."""
    png = png.resolve()
    _run(html_file, [f"--screenshot={png}", f"--window-size={width},{height}"], timeout=timeout)
    if not png.is_file():
        raise BrowserError(f"{COMMAND} wrote no screenshot at {png}")
    return png


@dataclass
class RenderedChart:
    """One ``<figure class="chart">`` of a page: its marks, how many the browser drew with a size (its
    ``data-drawn``, ``None`` when no script set it) and whether it says it has no data."""

    key: str
    marks: int = 0
    drawn: int | None = None
    no_data: bool = False


class _Charts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[RenderedChart] = []
        self._depth = 0  # figure elements open, the chart's own included

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        if tag == "figure":
            if self._depth == 0 and "chart" in classes:
                drawn = attributes.get("data-drawn")
                self.found.append(RenderedChart(attributes.get("data-chart") or "", drawn=None if drawn is None else
                                                int(drawn)))  # fmt: skip
                self._depth = 1
            elif self._depth:
                self._depth += 1
        elif self._depth and "mark" in classes:
            self.found[-1].marks += 1
        elif self._depth and "no-data" in classes:
            self.found[-1].no_data = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure" and self._depth:
            self._depth -= 1


def charts(page: str) -> list[RenderedChart]:
    """The charts of an HTML page (as written, or as a browser's DOM dump), in page order."""
    parser = _Charts()
    parser.feed(page)
    parser.close()
    return parser.found
