"""Fixtures for the sim's HTTP surface: a running sim and a raw-HTTP Actions-service caller.

The caller builds requests by hand exactly as docs/github.md describes (paths, ``api-version``, headers,
bodies), so these tests check the sim's protocol, not our client's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from arc_scaleset_lab.sim import SimConfig, SimulatedGitHub

PAT = "ghp_simtest_0123456789"
API_VERSION = "api-version=6.0-preview"
NIL_UUID = "00000000-0000-0000-0000-000000000000"


@pytest.fixture
async def sim(request: pytest.FixtureRequest) -> AsyncIterator[SimulatedGitHub]:
    """A sim with small long-poll holds; override SimConfig fields with indirect parametrization."""
    overrides: dict[str, Any] = getattr(request, "param", {})
    running = await SimulatedGitHub.start(config=SimConfig(**{"long_poll_seconds": 0.2, **overrides}))
    running.credentials.add_token(PAT)
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield session


@dataclass
class Tenant:
    """An authenticated view of one tenant: the admin URL and token from ``actions/runner-registration``."""

    http: aiohttp.ClientSession
    url: str
    token: str

    def admin_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}

    async def call(self, method: str, path: str, body: Any = None, *, query: str = "") -> tuple[int, Any]:
        separator = "&" if "?" in path else "?"
        url = f"{self.url}{path}{separator}{query + '&' if query else ''}{API_VERSION}"
        data = None if body is None else json.dumps(body)
        async with self.http.request(method, url, data=data, headers=self.admin_headers()) as response:
            text = await response.text()
            return response.status, (json.loads(text) if text else None)

    async def create_scale_set(self, name: str = "arc-runners", labels: list[str] | None = None) -> dict[str, Any]:
        body = {
            "name": name,
            "runnerGroupId": 1,
            "labels": [{"type": "System", "name": label} for label in (labels or [name])],
            "RunnerSetting": {"disableUpdate": True},
            "createdOn": "0001-01-01T00:00:00Z",
        }
        status, created = await self.call("POST", "_apis/runtime/runnerscalesets", body)
        assert status == 200, created
        result: dict[str, Any] = created
        return result

    async def create_session(self, scale_set_id: int, owner: str = "listener-pod") -> tuple[int, Any]:
        return await self.call(
            "POST",
            f"_apis/runtime/runnerscalesets/{scale_set_id}/sessions",
            {"sessionId": NIL_UUID, "ownerName": owner},
        )

    async def jit(self, scale_set_id: int, name: str) -> tuple[int, Any]:
        return await self.call(
            "POST", f"_apis/runtime/runnerscalesets/{scale_set_id}/generatejitconfig", {"name": name, "workFolder": ""}
        )


def queue_headers(session: dict[str, Any], max_capacity: int = 10) -> dict[str, str]:
    return {
        "Accept": "application/json; api-version=6.0-preview",
        "Authorization": f"Bearer {session['messageQueueAccessToken']}",
        "X-ScaleSetMaxCapacity": str(max_capacity),
    }


async def get_message(
    http: aiohttp.ClientSession, session: dict[str, Any], last_message_id: int = 0
) -> tuple[int, Any]:
    url = session["messageQueueUrl"] + (f"&lastMessageId={last_message_id}" if last_message_id > 0 else "")
    async with http.get(url, headers=queue_headers(session)) as response:
        text = await response.text()
        return response.status, (json.loads(text) if text else None)


async def delete_message(http: aiohttp.ClientSession, session: dict[str, Any], message_id: int) -> int:
    base, _, query = session["messageQueueUrl"].partition("?")
    headers = {"Authorization": f"Bearer {session['messageQueueAccessToken']}", "Content-Type": "application/json"}
    async with http.delete(f"{base}/{message_id}?{query}", headers=headers) as response:
        return response.status


async def acquire_jobs(
    http: aiohttp.ClientSession, tenant: Tenant, session: dict[str, Any], ids: list[int]
) -> tuple[int, Any]:
    scale_set_id = session["runnerScaleSet"]["id"]
    url = f"{tenant.url}_apis/runtime/runnerscalesets/{scale_set_id}/acquirejobs?{API_VERSION}"
    headers = {"Authorization": f"Bearer {session['messageQueueAccessToken']}", "Content-Type": "application/json"}
    async with http.post(url, data=json.dumps(ids), headers=headers) as response:
        return response.status, await response.json(content_type=None)


async def register(http: aiohttp.ClientSession, sim: SimulatedGitHub, config_url: str, scope_path: str) -> Tenant:
    """Steps 2 and 3 of the authentication chain (docs/github.md) with the PAT: registration token, then the
    admin connection."""
    async with http.post(
        f"{sim.api_url}/{scope_path}/actions/runners/registration-token",
        headers={"Authorization": f"Bearer {PAT}", "Content-Type": "application/vnd.github.v3+json"},
    ) as response:
        assert response.status == 201
        registration = await response.json()
    async with http.post(
        f"{sim.api_url}/actions/runner-registration",
        data=json.dumps({"url": config_url, "runner_event": "register"}),
        headers={"Authorization": f"RemoteAuth {registration['token']}", "Content-Type": "application/json"},
    ) as response:
        assert response.status == 200
        admin = await response.json()
    return Tenant(http, admin["url"], admin["token"])


@pytest.fixture
async def tenant(sim: SimulatedGitHub, http: aiohttp.ClientSession) -> Tenant:
    return await register(http, sim, sim.config_url("org"), "orgs/org")
