"""Credentials of the simulated GitHub: PATs, GitHub Apps and the tokens they lead to (docs/github.md).

Chain: PAT or installation token -> registration token (scoped to one config URL) -> admin token (an HS256
JWT with ``exp``, bound to one tenant). Every token expires on the injected clock, so clients must refresh.
Token values never appear in reprs or error messages.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.types import Options

from arc_scaleset.clock import Clock
from arc_scaleset_lab.sim import errors
from arc_scaleset_lab.sim.state import SimConfig

SCOPE_ORG = "admin:org"
SCOPE_REPO = "repo"
SCOPE_ENTERPRISE = "manage_runners:enterprise"
DEFAULT_PAT_SCOPES: frozenset[str] = frozenset({SCOPE_ORG, SCOPE_REPO, SCOPE_ENTERPRISE})

# An app JWT may live at most this long (GitHub allows 10 minutes).
_MAX_APP_JWT_LIFETIME = 600
_CLOCK_SKEW = 60
_ADMIN_CLAIMS_CACHED: Final = 1024
# Token times are checked against the sim's clock, not the machine's: PyJWT checks the signature only.
_SIGNATURE_ONLY: Final[Options] = {"verify_exp": False, "verify_iat": False, "verify_nbf": False}


@dataclass(frozen=True)
class SimApp:
    """A GitHub App registered in the sim. ``private_key_pem`` is set when the sim generated the key."""

    app_id: int
    client_id: str
    installation_ids: frozenset[int]
    public_key_pem: str = field(repr=False)
    private_key_pem: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class _Issued:
    expires_at: dt.datetime
    scopes: frozenset[str] = frozenset()
    scope_path: str = ""  # registration tokens: the config-URL path they were issued for


def required_scope(scope_path: str) -> str:
    """The classic PAT scope GitHub wants for a registration token of this config-URL path."""
    if scope_path.lower().startswith("enterprises/"):
        return SCOPE_ENTERPRISE
    return SCOPE_REPO if "/" in scope_path else SCOPE_ORG


class Credentials:
    """Every credential the sim knows, and the checks its endpoints make."""

    def __init__(self, *, clock: Clock, config: SimConfig) -> None:
        self._clock = clock
        self._config = config
        self._pats: dict[str, frozenset[str]] = {}
        self._apps: dict[str, SimApp] = {}  # by str(app id) and by client id
        self._installation_tokens: dict[str, _Issued] = {}
        self._registration_tokens: dict[str, _Issued] = {}
        self._admin_secret = secrets.token_bytes(32)
        self._admin_claims: dict[str, dict[str, Any]] = {}
        """Admin token -> its verified claims: a client sends the same token with every request, and
        verifying it each time was the simulator's largest cost under load."""
        # Bumped by expire_admin_tokens(): tokens of an older generation are refused.
        self._admin_generation = 0

    def __repr__(self) -> str:
        return f"Credentials(pats={len(self._pats)}, apps={len(self._apps) // 2})"

    # ------------------------------------------------------------ registration of credentials

    def add_token(self, token: str, *, scopes: Iterable[str] = DEFAULT_PAT_SCOPES) -> None:
        self._pats[token] = frozenset(scopes)

    def remove_token(self, token: str) -> None:
        self._pats.pop(token, None)

    def add_app(
        self,
        *,
        app_id: int,
        installation_ids: Iterable[int],
        public_key_pem: str | None = None,
        client_id: str | None = None,
    ) -> SimApp:
        """Register an app. Without ``public_key_pem`` a key pair is generated (returned in the app)."""
        private_pem: str | None = None
        if public_key_pem is None:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            private_pem = key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ).decode()
            public_key_pem = (
                key.public_key()
                .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
                .decode()
            )
        app = SimApp(
            app_id=app_id,
            client_id=client_id or f"Iv1.sim{app_id}",
            installation_ids=frozenset(installation_ids),
            public_key_pem=_public_pem(public_key_pem),
            private_key_pem=private_pem,
        )
        self._apps[str(app_id)] = app
        self._apps[app.client_id] = app
        return app

    # ------------------------------------------------------------ checks and issuing

    def _now(self) -> dt.datetime:
        return self._clock.now()

    def _issue(self, store: dict[str, _Issued], prefix: str, ttl: float, **kwargs: object) -> tuple[str, dt.datetime]:
        token = prefix + secrets.token_urlsafe(30)
        expires = self._now() + dt.timedelta(seconds=ttl)
        store[token] = _Issued(expires_at=expires, **kwargs)  # type: ignore[arg-type]
        return token, expires

    def bearer_scopes(self, token: str | None) -> frozenset[str]:
        """The scopes of a PAT or installation token; 401 "Bad credentials" for anything else."""
        if token is not None and token in self._pats:
            return self._pats[token]
        issued = self._installation_tokens.get(token or "")
        if issued is not None and self._now() < issued.expires_at:
            return issued.scopes
        raise errors.GitHubError(401, "Bad credentials")

    def issue_registration_token(self, bearer: str | None, scope_path: str) -> tuple[str, dt.datetime]:
        scopes = self.bearer_scopes(bearer)
        if required_scope(scope_path) not in scopes:
            raise errors.GitHubError(403, "Resource not accessible by personal access token")
        return self._issue(
            self._registration_tokens,
            "simreg_",
            self._config.registration_token_ttl,
            scope_path=scope_path.strip("/").lower(),
        )

    def redeem_registration_token(self, token: str | None) -> str:
        """The config-URL path a live registration token was issued for; 401 otherwise."""
        issued = self._registration_tokens.get(token or "")
        if issued is None or self._now() >= issued.expires_at:
            raise errors.GitHubError(401, "Bad credentials")
        return issued.scope_path

    def issue_installation_token(self, app_jwt: str | None, installation_id: int) -> tuple[str, dt.datetime]:
        """Verify an RS256 app JWT against the registered key; 401 for a bad JWT, 404 for a foreign install."""
        app = self._verify_app_jwt(app_jwt)
        if installation_id not in app.installation_ids:
            raise errors.GitHubError(404, "Not Found")
        return self._issue(
            self._installation_tokens,
            "ghs_",
            self._config.installation_token_ttl,
            scopes=DEFAULT_PAT_SCOPES,
        )

    def _verify_app_jwt(self, token: str | None) -> SimApp:
        if not token:
            raise errors.GitHubError(401, "A JSON web token could not be decoded")
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
            app = self._apps.get(str(unverified.get("iss")))
            if app is None:
                raise errors.GitHubError(401, "Integration not found")
            claims = jwt.decode(
                token,
                app.public_key_pem,
                algorithms=["RS256"],
                options=_SIGNATURE_ONLY,
            )
        except jwt.PyJWTError:
            raise errors.GitHubError(401, "A JSON web token could not be decoded") from None
        now = self._now().timestamp()
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int | float) or not isinstance(exp, int | float):
            raise errors.GitHubError(401, "'Issued at' and 'Expiration time' claims are required")
        if iat > now + _CLOCK_SKEW:
            raise errors.GitHubError(
                401, "'Issued at' claim ('iat') must be an Integer representing a time in the past"
            )
        if exp <= now:
            raise errors.GitHubError(401, "'Expiration time' claim ('exp') must be a numeric value in the future")
        if exp - iat > _MAX_APP_JWT_LIFETIME:
            raise errors.GitHubError(401, "'Expiration time' claim ('exp') is too far in the future")
        return app

    def issue_admin_token(self, tenant_id: int) -> tuple[str, dt.datetime]:
        now = self._now()
        expires = now + dt.timedelta(seconds=self._config.admin_token_ttl)
        claims = {
            "tid": tenant_id,
            "iat": int(now.timestamp()),
            "exp": int(expires.timestamp()),
            "jti": secrets.token_hex(8),
            "gen": self._admin_generation,
        }
        return jwt.encode(claims, self._admin_secret, algorithm="HS256"), expires

    def check_admin_token(self, token: str | None, tenant_id: int) -> None:
        """401 unless ``token`` is a live admin token of this tenant."""
        if not token:
            raise errors.unauthorized("An admin token is required.")
        claims = self._admin_claims.get(token)
        if claims is None:
            try:
                claims = jwt.decode(
                    token,
                    self._admin_secret,
                    algorithms=["HS256"],
                    options=_SIGNATURE_ONLY,
                )
            except jwt.PyJWTError:
                raise errors.unauthorized("The admin token is invalid.") from None
            if len(self._admin_claims) >= _ADMIN_CLAIMS_CACHED:
                self._admin_claims.clear()
            self._admin_claims[token] = claims
        now = self._now()
        if claims.get("tid") != tenant_id:
            raise errors.unauthorized("The admin token belongs to another tenant.")
        if now.timestamp() >= claims["exp"] or claims.get("gen") != self._admin_generation:
            raise errors.unauthorized("The admin token has expired.")

    def expire_admin_tokens(self) -> None:
        """Every admin token issued so far stops working (fault injection)."""
        self._admin_generation += 1

    def expire_installation_tokens(self) -> None:
        past = self._now() - dt.timedelta(seconds=1)
        for token, issued in self._installation_tokens.items():
            self._installation_tokens[token] = _Issued(past, issued.scopes, issued.scope_path)


def _public_pem(pem: str) -> str:
    """Accept a public key or a private key PEM; keep only the public half."""
    data = pem.encode()
    if b"PRIVATE KEY" in data:
        key = serialization.load_pem_private_key(data, password=None)
        return (
            key.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode()
        )
    serialization.load_pem_public_key(data)
    return pem
