"""The GitHub side of runners: a client for an EphemeralRunnerSpec, and "remove this registration" with
the outcomes every caller branches on.

``RemoveRunner`` has three answers that matter (docs/controllers.md): removed (or nothing to remove: runner ID 0,
or the service no longer knows the runner), the runner is busy (``JobStillRunning``: keep it), or an error
(retry later).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Mapping
from typing import Any, Final

import orjson

from arc_scaleset.api.common import ProxyConfig, TLSConfig, VaultConfig
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.controllers.errors import GitHubAuthenticationStepFailed
from arc_scaleset.controllers.github_access import GitHubAccess
from arc_scaleset.github import ActionsClient, AuthenticationStepFailed, JobStillRunning, NotFound

CLIENT_FIELDS: Final = ("githubConfigUrl", "githubConfigSecret", "proxy", "githubServerTLS", "vaultConfig")
"""The EphemeralRunnerSpec fields that decide which client (and which credentials) a runner uses."""
DEFAULT_CLIENT_REUSE: Final = 1.0


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


class RunnerClients:
    """:func:`client_for_runner_spec` for many runners of one spec at once, without a Secret read each.

    Resolving a client reads the GitHub Secret (and the CA ConfigMap and proxy Secret, when set) from the
    API server. In a scale-up, every new runner of a set asks for the same client within moments, so:
    concurrent requests for the same spec share one resolution, and a resolution is reused for ``reuse``
    seconds after it *started* (default 1 s). A rotated Secret therefore takes effect within a second
    instead of on the very next reconcile; errors (a missing Secret, an invalid URL) reach every concurrent
    waiter and are never reused.
    """

    def __init__(self, github: GitHubAccess, *, clock: Clock = REAL_CLOCK, reuse: float = DEFAULT_CLIENT_REUSE) -> None:
        self._github = github
        self._clock = clock
        self._reuse = reuse
        self._resolved: dict[tuple[str, bytes], tuple[float, ActionsClient]] = {}
        self._in_flight: dict[tuple[str, bytes], asyncio.Task[ActionsClient]] = {}

    async def client_for(self, *, namespace: str, spec: Mapping[str, Any]) -> ActionsClient:
        """The pooled client for ``spec`` (an ER's ``spec``); errors as :func:`client_for_runner_spec`."""
        key = (namespace, orjson.dumps({f: spec.get(f) for f in CLIENT_FIELDS}, option=orjson.OPT_SORT_KEYS))
        resolved = self._resolved.get(key)
        if resolved is not None and self._clock.monotonic() - resolved[0] < self._reuse:
            return resolved[1]
        task = self._in_flight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._resolve(key, namespace, dict(spec)))
            # Retrieve the outcome even if every waiter was cancelled (no "exception never retrieved").
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            self._in_flight[key] = task
        # A cancelled waiter must not cancel the resolution the others wait for.
        return await asyncio.shield(task)

    async def _resolve(self, key: tuple[str, bytes], namespace: str, spec: Mapping[str, Any]) -> ActionsClient:
        started = self._clock.monotonic()
        try:
            client = await client_for_runner_spec(self._github, namespace=namespace, spec=spec)
        finally:
            del self._in_flight[key]
        now = self._clock.monotonic()
        for stale in [k for k, (at, _) in self._resolved.items() if now - at >= self._reuse]:
            del self._resolved[stale]
        self._resolved[key] = (started, client)
        return client


class Removal(enum.Enum):
    REMOVED = "removed"
    NOTHING_TO_REMOVE = "nothing-to-remove"
    BUSY = "busy"


async def remove_registration(client: ActionsClient, runner_id: int) -> Removal:
    """Unregister runner ``runner_id``. Other errors (transient, auth) propagate.

    Only the removal's own answer says "nothing to remove": a 404 from a step of the authentication chain
    before it (:class:`~arc_scaleset.github.AuthenticationStepFailed`) says nothing about the runner, and is
    raised as :class:`~arc_scaleset.controllers.errors.GitHubAuthenticationStepFailed`, so that no caller
    deletes a runner that may be running a job on GitHub's word it never gave.
    """
    if runner_id <= 0:
        return Removal.NOTHING_TO_REMOVE
    try:
        await client.remove_runner(runner_id)
    except JobStillRunning:
        return Removal.BUSY
    except AuthenticationStepFailed as exc:
        raise GitHubAuthenticationStepFailed(
            f"cannot ask GitHub whether runner {runner_id} may be removed: {exc}; runners are kept until GitHub"
            " answers for them"
        ) from None
    except NotFound:  # RunnerNotFound included: already gone
        return Removal.NOTHING_TO_REMOVE
    return Removal.REMOVED
