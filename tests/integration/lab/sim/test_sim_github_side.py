"""The sim's GitHub REST side over real HTTP: registration tokens, app installation tokens, runner registration."""

from __future__ import annotations

import datetime as dt
import json
import ssl

import aiohttp
import jwt
import pytest

from arc_scaleset_lab.sim import SimConfig, SimulatedGitHub
from arc_scaleset_lab.sim.auth import SCOPE_REPO
from tests.integration.lab.sim.conftest import PAT, register


@pytest.mark.parametrize(
    ("path", "config_path"),
    [
        ("orgs/org", "org"),
        ("repos/org/repo", "org/repo"),
        ("enterprises/ent", "enterprises/ent"),
    ],
)
async def test_every_scope_registers_and_gets_a_tenant_url_on_this_server(
    sim: SimulatedGitHub, http: aiohttp.ClientSession, path: str, config_path: str
) -> None:
    async with http.post(
        f"{sim.api_url}/{path}/actions/runners/registration-token", headers={"Authorization": f"Bearer {PAT}"}
    ) as response:
        assert response.status == 201
        body = await response.json()
    assert set(body) == {"token", "expires_at"}
    assert dt.datetime.fromisoformat(body["expires_at"]) > dt.datetime.now(dt.UTC)

    tenant = await register(http, sim, f"{sim.url}/{config_path}", path)
    assert tenant.url.startswith(f"{sim.url}/tenant/")
    assert tenant.url.endswith("/")
    claims = jwt.decode(tenant.token, options={"verify_signature": False})
    assert claims["exp"] > dt.datetime.now(dt.UTC).timestamp()


async def test_wrong_pat_is_401_with_githubs_error_body(sim: SimulatedGitHub, http: aiohttp.ClientSession) -> None:
    async with http.post(
        f"{sim.api_url}/orgs/org/actions/runners/registration-token", headers={"Authorization": "Bearer ghp_wrong"}
    ) as response:
        assert response.status == 401
        body = await response.json()
    assert body["message"] == "Bad credentials"
    assert "documentation_url" in body


async def test_pat_without_the_scope_is_403(sim: SimulatedGitHub, http: aiohttp.ClientSession) -> None:
    sim.credentials.add_token("ghp_repo_only", scopes=[SCOPE_REPO])
    async with http.post(
        f"{sim.api_url}/orgs/org/actions/runners/registration-token", headers={"Authorization": "Bearer ghp_repo_only"}
    ) as response:
        assert response.status == 403


async def test_registration_token_for_another_org_does_not_open_this_one(
    sim: SimulatedGitHub, http: aiohttp.ClientSession
) -> None:
    async with http.post(
        f"{sim.api_url}/orgs/org/actions/runners/registration-token", headers={"Authorization": f"Bearer {PAT}"}
    ) as response:
        token = (await response.json())["token"]
    async with http.post(
        f"{sim.api_url}/actions/runner-registration",
        data=json.dumps({"url": sim.config_url("other"), "runner_event": "register"}),
        headers={"Authorization": f"RemoteAuth {token}", "Content-Type": "application/json"},
    ) as response:
        assert response.status == 404
    async with http.post(
        f"{sim.api_url}/actions/runner-registration",
        data=json.dumps({"url": sim.config_url("org"), "runner_event": "register"}),
        headers={"Authorization": "RemoteAuth not-a-token", "Content-Type": "application/json"},
    ) as response:
        assert response.status == 401


async def test_app_installation_token_needs_a_valid_rs256_jwt_and_then_acts_as_bearer(
    sim: SimulatedGitHub, http: aiohttp.ClientSession
) -> None:
    app = sim.credentials.add_app(app_id=123, installation_ids=[456])
    assert app.private_key_pem is not None
    now = int(dt.datetime.now(dt.UTC).timestamp()) - 60
    app_jwt = jwt.encode({"iat": now, "exp": now + 540, "iss": "123"}, app.private_key_pem, algorithm="RS256")
    headers = {"Authorization": f"Bearer {app_jwt}", "Content-Type": "application/vnd.github+json"}
    async with http.post(f"{sim.api_url}/app/installations/456/access_tokens", headers=headers) as response:
        assert response.status == 201
        installation = await response.json()
    async with http.post(f"{sim.api_url}/app/installations/999/access_tokens", headers=headers) as response:
        assert response.status == 404
    async with http.post(
        f"{sim.api_url}/app/installations/456/access_tokens", headers={"Authorization": "Bearer garbage"}
    ) as response:
        assert response.status == 401
    async with http.post(
        f"{sim.api_url}/orgs/org/actions/runners/registration-token",
        headers={"Authorization": f"Bearer {installation['token']}"},
    ) as response:
        assert response.status == 201


async def test_github_routes_are_also_served_at_the_root(sim: SimulatedGitHub, http: aiohttp.ClientSession) -> None:
    async with http.post(
        f"{sim.url}/orgs/org/actions/runners/registration-token", headers={"Authorization": f"Bearer {PAT}"}
    ) as response:
        assert response.status == 201


async def test_tls_sim_is_trusted_through_its_generated_ca(http: aiohttp.ClientSession) -> None:
    async with await SimulatedGitHub.start(config=SimConfig(), tls=True) as sim:
        sim.credentials.add_token(PAT)
        assert sim.url.startswith("https://")
        assert sim.ca_pem
        context = ssl.create_default_context(cadata=sim.ca_pem)
        async with http.post(
            f"{sim.api_url}/orgs/org/actions/runners/registration-token",
            headers={"Authorization": f"Bearer {PAT}"},
            ssl=context,
        ) as response:
            assert response.status == 201
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await http.post(f"{sim.api_url}/orgs/org/actions/runners/registration-token")
