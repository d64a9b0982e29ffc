"""A simulated Azure identity endpoint and Key Vault secrets API, served by the simulated GitHub (issue 17).

What the official SDKs (azure-identity, azure-keyvault-secrets) send, answered as Azure answers it:

- **Identity** (``AZURE_AUTHORITY_HOST`` = the sim's URL): ``GET /{tenant}/v2.0/.well-known/openid-configuration``
  (MSAL's discovery) and ``POST /{tenant}/oauth2/v2.0/token`` with ``grant_type=client_credentials`` and a
  ``client_assertion``: a JWT signed with the registered certificate's key. The assertion's signature is
  verified against that certificate (found by its ``x5t#S256`` or ``x5t`` header), and its ``aud`` (this token
  URL), ``iss``/``sub`` (the client ID) and lifetime checked; a wrong certificate gets Azure's
  ``invalid_client`` answer (AADSTS700027), an unknown client ``unauthorized_client`` (AADSTS700016).
- **Key Vault** (the vault URL = the sim's URL): ``GET /secrets/{name}[/{version}]?api-version=...``. A request
  without a valid bearer token gets 401 with Key Vault's challenge (``WWW-Authenticate: Bearer
  authorization="<authority>/<tenant>", resource="https://vault.azure.net"``); an unknown secret 404
  ``SecretNotFound``.
- **Admin** (``/_sim/azure/...``): register a client certificate, set (rotate) or delete a secret, read the
  counters (token grants, secret reads) that tests assert the controller's caching with.

The challenge names Azure's real resource, whose domain the sim's loopback URL is not under: clients must turn
off the SDK's challenge-resource check (``ARC_SCALESET_KEY_VAULT_VERIFY_CHALLENGE_RESOURCE=false``).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import re
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

import jwt
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from arc_scaleset_lab.sim.address import SimAddress
from arc_scaleset_lab.sim.http import json_response

VAULT_RESOURCE: Final = "https://vault.azure.net"
TOKEN_LIFETIME_SECONDS: Final = 3600
_SECRET_NAME = re.compile(r"[0-9a-zA-Z-]{1,127}")
_JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def make_client_certificate(client_id: str) -> str:
    """A self-signed certificate and its RSA key, as one PEM (what ``certificatePath`` points at)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"arc-scaleset lab client {client_id}")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=2))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return certificate.public_bytes(serialization.Encoding.PEM).decode() + key_pem.decode()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


@dataclass
class _Version:
    version: str
    value: str
    created: int


@dataclass
class SimAzure:
    """The simulated tenant(s), registered clients, vault secrets and issued tokens."""

    address: SimAddress
    clients: dict[tuple[str, str], x509.Certificate] = field(default_factory=dict)
    secrets: dict[str, list[_Version]] = field(default_factory=dict)
    tokens: dict[str, tuple[str, str, float]] = field(default_factory=dict)
    vault_tenant: str = ""
    token_grants: int = 0
    token_refusals: int = 0
    secret_reads: int = 0
    secret_reads_by_name: dict[str, int] = field(default_factory=dict)
    throttle_retry_after: int | None = None
    """When set, every secret read is throttled: 429 ``Throttled`` with this ``Retry-After`` (a vault over its
    request limit); the Azure SDK retries such an answer after the wait it names."""

    # -- state ----------------------------------------------------------------------------------------

    def register_client(self, tenant_id: str, client_id: str, certificate_pem: str) -> None:
        """Let ``client_id`` of ``tenant_id`` authenticate with this certificate (replacing any other); the
        vault belongs to that tenant."""
        self.clients[(tenant_id, client_id)] = x509.load_pem_x509_certificate(certificate_pem.encode())
        self.vault_tenant = tenant_id

    def set_secret(self, name: str, value: str) -> str:
        """Add a new version of secret ``name`` (creating it); returns the version ID."""
        version = _Version(uuid.uuid4().hex, value, int(time.time()))
        self.secrets.setdefault(name, []).append(version)
        return version.version

    def delete_secret(self, name: str) -> bool:
        return self.secrets.pop(name, None) is not None

    # -- routes ---------------------------------------------------------------------------------------

    def register(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/{tenant}/v2.0/.well-known/openid-configuration", self.openid_configuration)
        r.add_post("/{tenant}/oauth2/v2.0/token", self.token)
        r.add_get("/secrets/{name}", self.get_secret)
        r.add_get("/secrets/{name}/", self.get_secret)
        r.add_get("/secrets/{name}/{version}", self.get_secret)
        r.add_post("/_sim/azure/clients", self.admin_register_client)
        r.add_put("/_sim/azure/secrets/{name}", self.admin_set_secret)
        r.add_delete("/_sim/azure/secrets/{name}", self.admin_delete_secret)
        r.add_get("/_sim/azure/stats", self.admin_stats)

    def _authority(self, tenant: str) -> str:
        return f"{self.address.url}/{tenant}"

    async def openid_configuration(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        authority = self._authority(tenant)
        return json_response(
            {
                "token_endpoint": f"{authority}/oauth2/v2.0/token",
                "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt"],
                "jwks_uri": f"{authority}/discovery/v2.0/keys",
                "issuer": f"{authority}/v2.0",
                "authorization_endpoint": f"{authority}/oauth2/v2.0/authorize",
                "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
                "tenant_region_scope": "EU",
            }
        )

    async def token(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        form = await request.post()
        fields = {key: str(value) for key, value in form.items()}
        if fields.get("grant_type") != "client_credentials":
            return self._token_error(
                400, "unsupported_grant_type", 70003, "The app requested an unsupported grant type."
            )
        if fields.get("client_assertion_type") != _JWT_BEARER or "client_assertion" not in fields:
            return self._token_error(
                400,
                "invalid_request",
                900144,
                "The request body must contain the following parameter: 'client_assertion'.",
            )
        client_id = fields.get("client_id", "")
        certificate = self.clients.get((tenant, client_id))
        if certificate is None:
            return self._token_error(
                400,
                "unauthorized_client",
                700016,
                f"Application with identifier '{client_id}' was not found in the directory '{tenant}'.",
            )
        problem = self._assertion_problem(fields["client_assertion"], certificate, tenant, client_id, request)
        if problem is not None:
            return self._token_error(401, "invalid_client", 700027, problem)
        scope = fields.get("scope", "")
        if scope != f"{VAULT_RESOURCE}/.default":
            return self._token_error(400, "invalid_scope", 70011, f"The provided value for scope {scope} is not valid.")
        token = secrets.token_urlsafe(32)
        self.tokens[token] = (tenant, client_id, time.time() + TOKEN_LIFETIME_SECONDS)
        self.token_grants += 1
        return json_response(
            {
                "token_type": "Bearer",
                "expires_in": TOKEN_LIFETIME_SECONDS,
                "ext_expires_in": TOKEN_LIFETIME_SECONDS,
                "access_token": token,
            }
        )

    def _assertion_problem(
        self, assertion: str, certificate: x509.Certificate, tenant: str, client_id: str, request: web.Request
    ) -> str | None:
        try:
            header = jwt.get_unverified_header(assertion)
        except jwt.InvalidTokenError:
            return "AADSTS50027: JWT token is invalid or malformed."
        der = certificate.public_bytes(serialization.Encoding.DER)
        thumbprints = {
            header.get("x5t#S256"): hashlib.sha256(der).digest(),
            header.get("x5t"): hashlib.sha1(der).digest(),
        }
        presented = [(given, expected) for given, expected in thumbprints.items() if isinstance(given, str) and given]
        if not presented or any(given.rstrip("=") != _b64url(expected) for given, expected in presented):
            return (
                "AADSTS700027: The certificate with identifier used to sign the client assertion is not registered"
                f" on application {client_id}."
            )
        audience = f"{self.address.url}/{tenant}/oauth2/v2.0/token"
        try:
            claims = jwt.decode(
                assertion,
                key=certificate.public_key(),  # type: ignore[arg-type]
                algorithms=["PS256", "RS256"],
                audience=audience,
                issuer=client_id,
                options={"require": ["exp", "nbf", "aud", "iss", "sub"]},
            )
        except jwt.InvalidSignatureError:
            return "AADSTS700027: Client assertion contains an invalid signature."
        except jwt.InvalidTokenError as exc:
            return f"AADSTS700027: Client assertion failed validation: {exc}."
        if claims.get("sub") != client_id:
            return "AADSTS700023: Client assertion subject does not match the client ID."
        return None

    def _token_error(self, status: int, error: str, code: int, description: str) -> web.Response:
        self.token_refusals += 1
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        return json_response(
            {
                "error": error,
                "error_description": f"{description}\r\nTrace ID: {uuid.uuid4()}\r\nTimestamp: {now}",
                "error_codes": [code],
                "timestamp": now,
                "trace_id": str(uuid.uuid4()),
                "correlation_id": str(uuid.uuid4()),
            },
            status=status,
        )

    async def get_secret(self, request: web.Request) -> web.Response:
        if "api-version" not in request.query:
            return _vault_error(400, "BadParameter", "The api-version query parameter is required.")
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        grant = self.tokens.get(token)
        if grant is None or grant[2] < time.time() or grant[0] != self.vault_tenant:
            challenge = f'Bearer authorization="{self._authority(self.vault_tenant)}", resource="{VAULT_RESOURCE}"'
            return _vault_error(
                401,
                "Unauthorized",
                "AKV10000: Request is missing a Bearer or PoP token.",
                headers={"WWW-Authenticate": challenge},
            )
        name = request.match_info["name"]
        if _SECRET_NAME.fullmatch(name) is None:
            return _vault_error(400, "BadParameter", "The request URI contains an invalid name: " + name)
        self.secret_reads += 1
        self.secret_reads_by_name[name] = self.secret_reads_by_name.get(name, 0) + 1
        if self.throttle_retry_after is not None:
            return _vault_error(
                429,
                "Throttled",
                "Request was not processed because too many requests were received.",
                headers={"Retry-After": str(self.throttle_retry_after)},
            )
        versions = self.secrets.get(name, [])
        wanted = request.match_info.get("version", "")
        if wanted:
            found = next((v for v in versions if v.version == wanted), None)
        else:
            found = versions[-1] if versions else None
        if found is None:
            return _vault_error(
                404,
                "SecretNotFound",
                f"A secret with (name/id) {name}{'/' + wanted if wanted else ''} was not found in this key vault. If"
                " you recently deleted this secret you may be able to recover it using the correct recovery command.",
            )
        return json_response(
            {
                "value": found.value,
                "id": f"{self.address.url}/secrets/{name}/{found.version}",
                "attributes": {
                    "enabled": True,
                    "created": found.created,
                    "updated": found.created,
                    "recoveryLevel": "Recoverable+Purgeable",
                    "recoverableDays": 90,
                },
                "tags": {},
            }
        )

    # -- admin ----------------------------------------------------------------------------------------

    async def admin_register_client(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        self.register_client(str(body["tenantId"]), str(body["clientId"]), str(body["certificatePem"]))
        return web.Response(status=204)

    async def admin_set_secret(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        version = self.set_secret(request.match_info["name"], str(body["value"]))
        return json_response({"version": version})

    async def admin_delete_secret(self, request: web.Request) -> web.Response:
        if not self.delete_secret(request.match_info["name"]):
            return json_response({"message": "no such secret"}, status=404)
        return web.Response(status=204)

    async def admin_stats(self, request: web.Request) -> web.Response:
        return json_response(
            {
                "tokenGrants": self.token_grants,
                "tokenRefusals": self.token_refusals,
                "secretReads": self.secret_reads,
                "secretReadsByName": dict(self.secret_reads_by_name),
            }
        )


def _vault_error(status: int, code: str, message: str, *, headers: dict[str, str] | None = None) -> web.Response:
    return json_response({"error": {"code": code, "message": message}}, status=status, headers=headers)
