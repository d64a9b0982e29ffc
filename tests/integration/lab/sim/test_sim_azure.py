"""The simulated Azure identity endpoint and Key Vault, spoken to by hand as the SDKs speak: a client assertion
is honoured only when signed by the registered certificate's key, for this token URL, by this client; the vault
answers only a token it issued, and challenges anything else as Key Vault does."""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from typing import Any

import aiohttp
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from arc_scaleset_lab.sim import SimulatedGitHub
from arc_scaleset_lab.sim.azure import make_client_certificate

TENANT = "tenant-1"
CLIENT = "client-1"
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
SCOPE = "https://vault.azure.net/.default"


def assertion(pem: str, *, audience: str, client_id: str = CLIENT, algorithm: str = "PS256") -> str:
    """A client assertion as azure-identity builds one (x5t#S256 header, 30 minutes), signed by ``pem``'s key."""
    certificate = x509.load_pem_x509_certificate(pem.encode())
    key = serialization.load_pem_private_key(pem[pem.index("-----BEGIN PRIVATE KEY-----") :].encode(), None)
    thumbprint = hashlib.sha256(certificate.public_bytes(serialization.Encoding.DER)).digest()
    now = int(time.time())
    return jwt.encode(
        {"jti": str(uuid.uuid4()), "aud": audience, "iss": client_id, "sub": client_id, "nbf": now, "exp": now + 1800},
        key,  # type: ignore[arg-type]
        algorithm=algorithm,
        headers={"x5t#S256": base64.urlsafe_b64encode(thumbprint).decode()},
    )


async def token(http: aiohttp.ClientSession, sim: SimulatedGitHub, signed: str) -> tuple[int, dict[str, Any]]:
    form = {
        "client_assertion": signed,
        "client_assertion_type": JWT_BEARER,
        "client_id": CLIENT,
        "grant_type": "client_credentials",
        "scope": SCOPE,
    }
    async with http.post(f"{sim.url}/{TENANT}/oauth2/v2.0/token", data=form) as response:
        return response.status, await response.json()


async def test_an_assertion_signed_by_the_registered_certificate_gets_a_token_the_vault_accepts(
    sim: SimulatedGitHub, http: aiohttp.ClientSession
) -> None:
    pem = make_client_certificate(CLIENT)
    sim.azure.register_client(TENANT, CLIENT, pem)
    sim.azure.set_secret("creds", "the value")
    status, body = await token(http, sim, assertion(pem, audience=f"{sim.url}/{TENANT}/oauth2/v2.0/token"))
    assert status == 200, body
    assert body["token_type"] == "Bearer"
    headers = {"Authorization": f"Bearer {body['access_token']}"}
    async with http.get(f"{sim.url}/secrets/creds/?api-version=2025-07-01", headers=headers) as response:
        assert response.status == 200
        secret = await response.json()
    assert secret["value"] == "the value"
    assert secret["id"].startswith(f"{sim.url}/secrets/creds/")


async def test_an_assertion_from_another_key_or_for_another_audience_is_refused_as_azure_refuses_it(
    sim: SimulatedGitHub, http: aiohttp.ClientSession
) -> None:
    pem = make_client_certificate(CLIENT)
    sim.azure.register_client(TENANT, CLIENT, pem)
    audience = f"{sim.url}/{TENANT}/oauth2/v2.0/token"

    status, body = await token(http, sim, assertion(make_client_certificate(CLIENT), audience=audience))
    assert (status, body["error"], body["error_codes"]) == (401, "invalid_client", [700027])

    status, body = await token(http, sim, assertion(pem, audience="https://login.example/other/token"))
    assert (status, body["error"]) == (401, "invalid_client")

    status, body = await token(http, sim, assertion(pem, audience=audience, client_id="someone-else"))
    assert (status, body["error"]) == (401, "invalid_client")


async def test_the_vault_challenges_a_request_without_a_token_it_issued(
    sim: SimulatedGitHub, http: aiohttp.ClientSession
) -> None:
    sim.azure.register_client(TENANT, CLIENT, make_client_certificate(CLIENT))
    for headers in ({}, {"Authorization": "Bearer made-up"}):
        async with http.get(f"{sim.url}/secrets/creds/?api-version=2025-07-01", headers=headers) as response:
            assert response.status == 401
            challenge = response.headers["WWW-Authenticate"]
            assert (await response.json())["error"]["code"] == "Unauthorized"
        assert challenge == f'Bearer authorization="{sim.url}/{TENANT}", resource="https://vault.azure.net"'


async def test_a_missing_secret_is_key_vaults_secret_not_found(
    sim: SimulatedGitHub, http: aiohttp.ClientSession
) -> None:
    pem = make_client_certificate(CLIENT)
    sim.azure.register_client(TENANT, CLIENT, pem)
    _, body = await token(http, sim, assertion(pem, audience=f"{sim.url}/{TENANT}/oauth2/v2.0/token"))
    headers = {"Authorization": f"Bearer {body['access_token']}"}
    async with http.get(f"{sim.url}/secrets/absent/?api-version=2025-07-01", headers=headers) as response:
        assert response.status == 404
        assert (await response.json())["error"]["code"] == "SecretNotFound"


async def test_msals_discovery_document_names_the_tenants_token_endpoint(
    sim: SimulatedGitHub, http: aiohttp.ClientSession
) -> None:
    async with http.get(f"{sim.url}/{TENANT}/v2.0/.well-known/openid-configuration") as response:
        document = await response.json()
    assert document["token_endpoint"] == f"{sim.url}/{TENANT}/oauth2/v2.0/token"
