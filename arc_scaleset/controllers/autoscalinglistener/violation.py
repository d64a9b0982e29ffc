"""A field of a scale set's listener input that the controller refuses, and why (shared by the policies)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

ROOT: Final = "listenerTemplate"
"""Template field paths start here: the AutoscalingRunnerSet's field, where the user wrote the template."""


@dataclass(frozen=True)
class Violation:
    """``field`` as the user wrote it (``listenerTemplate.spec.nodeName``); ``problem`` says what is wrong and
    what would allow it."""

    field: str
    problem: str

    def __str__(self) -> str:
        return f"{self.field}: {self.problem}"
