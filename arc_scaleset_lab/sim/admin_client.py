"""A small async client for the ``/_sim`` admin API, for demos and e2e tests driving a sim in another process."""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import aiohttp

from arc_scaleset_lab.sim.faults import FaultRule
from arc_scaleset_lab.sim.state import RunnerExitRequest


class SimAdminError(Exception):
    pass


class SimAdminClient:
    """``SimAdminClient("http://127.0.0.1:PORT")``; use ``async with`` or call :meth:`close`."""

    def __init__(self, url: str, *, timeout: float = 10.0, ca_file: str | None = None) -> None:
        """``ca_file``: the PEM of the CA a sim started with ``--tls`` generated (its state file's ``caFile``)."""
        self.url = url.rstrip("/")
        self._timeout = timeout
        self._ssl: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> SimAdminClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(
        self, method: str, path: str, *, json: Any = None, params: dict[str, str] | None = None, hold: float = 0
    ) -> Any:
        if self._session is None:
            # trust_env stays off: the lab's own calls never go through a proxy the environment names.
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._ssl))
        client_timeout = aiohttp.ClientTimeout(total=hold + self._timeout)
        async with self._session.request(
            method, self.url + path, json=json, params=params, timeout=client_timeout
        ) as response:
            if response.status >= 400:
                raise SimAdminError(f"{method} {path}: {response.status} {await response.text()}")
            if response.status == 204:
                return None
            return await response.json()

    async def enqueue_job(
        self,
        labels: str | Sequence[str],
        *,
        repository: str = "org/repo",
        duration: float = 1.0,
        display_name: str | None = None,
        event_name: str = "push",
        result: str = "succeeded",
        count: int = 1,
    ) -> list[int]:
        body: dict[str, Any] = {
            "labels": [labels] if isinstance(labels, str) else list(labels),
            "repository": repository,
            "duration": duration,
            "eventName": event_name,
            "result": result,
            "count": count,
        }
        if display_name:
            body["displayName"] = display_name
        ids: list[int] = (await self._call("POST", "/_sim/jobs", json=body))["ids"]
        return ids

    async def runner_online(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._call("POST", f"/_sim/runners/{name}/online")
        return result

    async def runner_exit(self, name: str, *, exit_code: int = 0) -> None:
        await self._call("POST", f"/_sim/runners/{name}/exit", json={"exitCode": exit_code})

    async def fail_runner(self, name: str, *, exit_code: int = 1, reason: str = "requested") -> None:
        await self._call("POST", f"/_sim/runners/{name}/fail", json={"exitCode": exit_code, "reason": reason})

    async def next_runner_events(self, *, after: int, wait_seconds: float) -> list[RunnerExitRequest]:
        data = await self._call(
            "GET", "/_sim/runner-events", params={"after": str(after), "wait": str(wait_seconds)}, hold=wait_seconds
        )
        return [RunnerExitRequest(e["seq"], e["runnerName"], e["exitCode"], e["reason"]) for e in data["events"]]

    async def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._call("GET", "/_sim/stats")
        return result

    async def jobs(self) -> list[dict[str, Any]]:
        return list((await self._call("GET", "/_sim/jobs"))["jobs"])

    async def runners(self) -> list[dict[str, Any]]:
        return list((await self._call("GET", "/_sim/runners"))["runners"])

    async def sessions(self) -> list[dict[str, Any]]:
        return list((await self._call("GET", "/_sim/sessions"))["sessions"])

    async def scale_sets(self) -> list[dict[str, Any]]:
        return list((await self._call("GET", "/_sim/scalesets"))["scaleSets"])

    async def requests(
        self, *, route: str | None = None, scale_set_id: int | None = None, after: float | None = None
    ) -> list[dict[str, Any]]:
        """The protocol requests the sim logged (``GET /_sim/requests``): of ``route``, about ``scale_set_id``,
        arrived after the ``time.monotonic()`` reading ``after``; each ``{at, method, route, status}``."""
        params = {"route": route, "scaleSetId": scale_set_id, "after": after}
        query = {key: str(value) for key, value in params.items() if value is not None}
        return list((await self._call("GET", "/_sim/requests", params=query))["requests"])

    async def add_token(self, token: str, *, scopes: Sequence[str] | None = None) -> None:
        await self._call("POST", "/_sim/tokens", json={"token": token, "scopes": list(scopes or [])})

    async def revoke_token(self, token: str) -> None:
        await self._call("POST", "/_sim/tokens/revoke", json={"token": token})

    async def create_app(self, *, app_id: int, installation_id: int) -> dict[str, Any]:
        result: dict[str, Any] = await self._call(
            "POST", "/_sim/apps", json={"appId": app_id, "installationId": installation_id}
        )
        return result

    async def add_fault(self, rule: FaultRule) -> int:
        return int((await self._call("POST", "/_sim/faults", json=rule.to_json()))["id"])

    async def clear_faults(self) -> None:
        await self._call("DELETE", "/_sim/faults")

    async def evict_session(self, scale_set_id: int) -> bool:
        return bool((await self._call("POST", f"/_sim/scalesets/{scale_set_id}/evict-session"))["evicted"])

    async def delete_scale_set(self, scale_set_id: int) -> None:
        await self._call("DELETE", f"/_sim/scalesets/{scale_set_id}")

    async def expire_queue_tokens(self) -> None:
        await self._call("POST", "/_sim/expire-queue-tokens")

    async def expire_admin_tokens(self) -> None:
        await self._call("POST", "/_sim/expire-admin-tokens")

    # -- Azure (the simulated identity endpoint and Key Vault: arc_scaleset_lab/sim/azure.py) -------------

    async def register_azure_client(self, *, tenant_id: str, client_id: str, certificate_pem: str) -> None:
        """Let ``client_id`` of ``tenant_id`` authenticate with this certificate (the vault's tenant)."""
        await self._call(
            "POST",
            "/_sim/azure/clients",
            json={"tenantId": tenant_id, "clientId": client_id, "certificatePem": certificate_pem},
        )

    async def set_vault_secret(self, name: str, value: str) -> str:
        """Set (or rotate: a new version) vault secret ``name``; returns the new version's ID."""
        return str((await self._call("PUT", f"/_sim/azure/secrets/{name}", json={"value": value}))["version"])

    async def delete_vault_secret(self, name: str) -> None:
        await self._call("DELETE", f"/_sim/azure/secrets/{name}")

    async def azure_stats(self) -> dict[str, Any]:
        """``tokenGrants``, ``tokenRefusals``, ``secretReads`` so far, and ``secretReadsByName`` (name: count)."""
        stats: dict[str, Any] = await self._call("GET", "/_sim/azure/stats")
        return stats
