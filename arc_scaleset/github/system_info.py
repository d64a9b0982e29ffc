"""Who is calling: the ``User-Agent`` every request to GitHub and the Actions service carries."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from arc_scaleset import __version__

# The client library's own identity (the `build_*` fields); in ARC these name the scaleset Go module.
BUILD_VERSION = __version__
BUILD_COMMIT_SHA = "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemInfo:
    """The caller's identity; ``subsystem`` is e.g. ``controller`` or ``ghalistener``."""

    system: str = "actions-runner-controller"
    version: str = __version__
    commit_sha: str = "unknown"
    scale_set_id: int = 0
    subsystem: str = ""

    def user_agent(self) -> str:
        """The JSON object the service expects as User-Agent (keys in the reference client's order)."""
        return orjson.dumps(
            {
                "system": self.system,
                "version": self.version,
                "commit_sha": self.commit_sha,
                "scale_set_id": self.scale_set_id,
                "subsystem": self.subsystem,
                "build_version": BUILD_VERSION,
                "build_commit_sha": BUILD_COMMIT_SHA,
                "kind": "scaleset",
            }
        ).decode()
