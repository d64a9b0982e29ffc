"""One HTTP answer as the client keeps it: private to the package."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class Response:
    """The request's method and URL, and the answer's status, headers and (whole, decompressed) body.

    ``redirected``: the answer came from a hop a redirect led to, not from the URL the caller asked for; its
    body is then never shown in an error (docs/github.md "Transport and errors").
    """

    method: str
    url: str
    status: int
    reason: str
    headers: Mapping[str, str]
    body: bytes
    redirected: bool = False

    def json(self) -> Any:
        return orjson.loads(self.body) if self.body else None
