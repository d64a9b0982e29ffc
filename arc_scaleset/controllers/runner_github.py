"""The GitHub side of runners: a client for an EphemeralRunnerSpec, and "remove this registration" with
the outcomes every caller branches on.

``RemoveRunner`` has three answers that matter (spec 2.3, 2.4): removed (or nothing to remove: runner ID 0,
or the service no longer knows the runner), the runner is busy (``JobStillRunning``: keep it), or an error
(retry later).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from arc_scaleset.api.common import ProxyConfig, TLSConfig, VaultConfig
from arc_scaleset.controllers.github_access import GitHubAccess
from arc_scaleset.github import ActionsClient, JobStillRunning, NotFound


def _model(value: Any, model: type[ProxyConfig] | type[TLSConfig] | type[VaultConfig]) -> Any:
    return None if value is None else model.model_validate(value)


async def client_for_runner_spec(github: GitHubAccess, *, namespace: str, spec: Mapping[str, Any]) -> ActionsClient:
    """The pooled client for an EphemeralRunnerSpec (an ER's ``spec`` or an ERS's ``spec.ephemeralRunnerSpec``).

    Raises :class:`~arc_scaleset.controllers.errors.ConfigurationError` for input a user must fix.
    """
    return await github.client_for(
        namespace=namespace,
        config_url=str(spec.get("githubConfigUrl") or ""),
        secret_name=str(spec.get("githubConfigSecret") or ""),
        proxy=_model(spec.get("proxy"), ProxyConfig),
        tls=_model(spec.get("githubServerTLS"), TLSConfig),
        vault=_model(spec.get("vaultConfig"), VaultConfig),
    )


class Removal(enum.Enum):
    REMOVED = "removed"
    NOTHING_TO_REMOVE = "nothing-to-remove"
    BUSY = "busy"


async def remove_registration(client: ActionsClient, runner_id: int) -> Removal:
    """Unregister runner ``runner_id``. Other errors (transient, auth) propagate."""
    if runner_id <= 0:
        return Removal.NOTHING_TO_REMOVE
    try:
        await client.remove_runner(runner_id)
    except JobStillRunning:
        return Removal.BUSY
    except NotFound:  # RunnerNotFound included: already gone
        return Removal.NOTHING_TO_REMOVE
    return Removal.REMOVED
