"""One HTTP answer as the client keeps it: private to the package."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class Response:
    """The request's method and URL, and the answer's status, headers and (whole, decompressed) body."""

    method: str
    url: str
    status: int
    reason: str
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body) if self.body else None
