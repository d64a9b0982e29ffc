"""GitHub credentials: a personal access token, or a GitHub App installation.

Which kind a Secret or a listener config gives is decided by the one credential rule,
``arc_scaleset.api.credentials`` (ARC's); :func:`credentials_from_fields` builds what it chose. Both kinds are
frozen values whose ``repr`` and ``str`` never show the secret; :meth:`fingerprint` gives a
sha256 that identifies the credentials (for cache keys) without revealing them. Errors raised here name the
offending key and the problem, never the value.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import orjson

from arc_scaleset.github.errors import GitHubError

# The App's key is held and used by the system OpenSSL (rs256.py, docs/github.md "Credentials"), imported where
# an App needs it: it imports ctypes, which a process that uses a token never needs.
if TYPE_CHECKING:
    from arc_scaleset.github.rs256 import RSAPrivateKey

# The keys of an ARC GitHub config Secret (and of the listener's config.json).
TOKEN_KEY = "github_token"
APP_ID_KEY = "github_app_id"
INSTALLATION_ID_KEY = "github_app_installation_id"
PRIVATE_KEY_KEY = "github_app_private_key"

# A JWT's JOSE header: the only algorithm GitHub accepts for App JWTs.
_JWT_HEADER = b'{"alg":"RS256","typ":"JWT"}'

# GitHub rejects App JWTs that live longer than 10 minutes or are issued in the future; backdating `iat`
# by a minute absorbs clock drift between us and GitHub.
JWT_BACKDATE = dt.timedelta(seconds=60)
JWT_LIFETIME = dt.timedelta(minutes=9)


class InvalidCredentials(GitHubError, ValueError):  # noqa: N818 - reads as the condition it reports
    """The credentials are missing, ambiguous or malformed. The message never contains a secret value."""


@dataclass(frozen=True, slots=True)
class PersonalAccessToken:
    """A classic or fine-grained PAT; sent as ``Authorization: Bearer <token>`` to the REST API."""

    token: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.token:
            raise InvalidCredentials(f"{TOKEN_KEY} is empty")

    def __repr__(self) -> str:
        return "PersonalAccessToken(token='***')"

    __str__ = __repr__

    def fingerprint(self) -> str:
        """A sha256 hex digest identifying this token; equal tokens give equal fingerprints."""
        return _pat_fingerprint(self.token)

    def secret_values(self) -> tuple[str, ...]:
        """The values that must never be shown (for log redaction)."""
        return (self.token,)


@dataclass(frozen=True, slots=True)
class GitHubApp:
    """A GitHub App installation: the App's ID (or client ID), the installation ID and the App's private key.

    Constructing one parses the PEM, so a malformed key fails here, once, with a clear error.
    """

    app_id: str
    installation_id: int
    private_key: str = field(repr=False)
    _key: RSAPrivateKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.app_id:
            raise InvalidCredentials(f"{APP_ID_KEY} is empty")
        if self.installation_id <= 0:
            raise InvalidCredentials(f"{INSTALLATION_ID_KEY} must be a positive integer")
        object.__setattr__(self, "_key", _load_rsa_key(self.private_key))

    def __repr__(self) -> str:
        return f"GitHubApp(app_id={self.app_id!r}, installation_id={self.installation_id}, private_key='***')"

    __str__ = __repr__

    def fingerprint(self) -> str:
        """A sha256 hex digest over the App ID, installation ID and private key."""
        return _app_fingerprint(self.app_id, self.installation_id, self.private_key)

    def secret_values(self) -> tuple[str, ...]:
        """The values that must never be shown (for log redaction)."""
        return (self.private_key,)

    def jwt(self, *, now: dt.datetime) -> str:
        """An RS256 App JWT: ``iat`` = now - 60 s, ``exp`` = iat + 9 min, ``iss`` = the App (client) ID.

        The compact serialisation (RFC 7519): base64url (unpadded) header, claims and signature, joined by dots.
        """
        issued = int((now - JWT_BACKDATE).timestamp())
        claims = {"iat": issued, "exp": issued + int(JWT_LIFETIME.total_seconds()), "iss": self.app_id}
        signing_input = _base64url(_JWT_HEADER) + b"." + _base64url(orjson.dumps(claims))
        return (signing_input + b"." + _base64url(self._key.sign(signing_input))).decode("ascii")


Credentials = PersonalAccessToken | GitHubApp


class CredentialFields(Protocol):
    """The credential fields of a GitHub config Secret or a listener ``config.json``, as chosen by the credential
    rule (``arc_scaleset.api.credentials.AppConfig`` after ``validated()``)."""

    @property
    def github_token(self) -> str: ...

    @property
    def github_app_id(self) -> str: ...

    @property
    def github_app_installation_id(self) -> int: ...

    @property
    def github_app_private_key(self) -> str: ...


def credentials_from_fields(fields: CredentialFields) -> Credentials:
    """The credentials object for fields the credential rule has chosen: a PAT for a token, else a GitHub App.

    The rule itself (which combinations are valid, ARC's messages) lives in ``arc_scaleset.api.credentials``
    and is not applied again here: fields holding both a token and App fields, or neither, were not chosen by
    it and raise :class:`InvalidCredentials`. A malformed App (installation ID, PEM) raises it too.
    """
    if _is_token(fields):
        return PersonalAccessToken(fields.github_token)
    return GitHubApp(fields.github_app_id, fields.github_app_installation_id, fields.github_app_private_key)


def fingerprint_of_fields(fields: CredentialFields) -> str:
    """The :meth:`fingerprint` of ``credentials_from_fields(fields)``, without building the credentials.

    Building a :class:`GitHubApp` parses its RSA key, which costs milliseconds of CPU; a caller that only
    needs to find the pooled client for these fields (every runner deletion does, docs/github.md "Client
    pool") asks for this instead and builds the credentials only when no client has them yet. Fields the
    credential rule did not choose (a token beside App fields, or nothing) raise :class:`InvalidCredentials`
    as :func:`credentials_from_fields` does; a malformed key is found only when the credentials are built.
    """
    if _is_token(fields):
        return _pat_fingerprint(fields.github_token)
    return _app_fingerprint(fields.github_app_id, fields.github_app_installation_id, fields.github_app_private_key)


def _is_token(fields: CredentialFields) -> bool:
    """Whether the rule chose the token (``True``) or the App (``False``); :class:`InvalidCredentials` when the
    fields hold both kinds or neither, which the rule never chooses."""
    has_app_field = bool(fields.github_app_id or fields.github_app_installation_id or fields.github_app_private_key)
    if fields.github_token:
        if has_app_field:
            raise InvalidCredentials("both a token and GitHub App fields given: apply the credential rule first")
        return True
    if not has_app_field:
        raise InvalidCredentials("no credentials given")
    return False


def _pat_fingerprint(token: str) -> str:
    return _digest("pat", token)


def _app_fingerprint(app_id: str, installation_id: int, private_key: str) -> str:
    return _digest("app", app_id, str(installation_id), private_key.strip())


def load_pem_private_key(data: bytes) -> RSAPrivateKey:
    """The RSA private key in PEM ``data``, held by the system OpenSSL (``rs256.load_pem_private_key``, which
    says what it raises), imported on first use (see the imports)."""
    from arc_scaleset.github import rs256

    return rs256.load_pem_private_key(data)


def _load_rsa_key(pem: str) -> RSAPrivateKey:
    from arc_scaleset.github.rs256 import NotAnRSAKey, UnreadableKey

    # `from None` everywhere: rs256's exceptions carry no key material, but the chained context would carry
    # the PEM bytes in a local variable that a rich traceback renderer could print.
    if "-----BEGIN" not in pem:
        raise InvalidCredentials(f"{PRIVATE_KEY_KEY} is not PEM-encoded (no '-----BEGIN' line)")
    try:
        return load_pem_private_key(pem.strip().encode("utf-8"))
    except UnreadableKey:
        raise InvalidCredentials(f"{PRIVATE_KEY_KEY} could not be parsed as an unencrypted PEM private key") from None
    except NotAnRSAKey:
        raise InvalidCredentials(f"{PRIVATE_KEY_KEY} is not an RSA key (GitHub App keys are RSA)") from None


def _base64url(data: bytes) -> bytes:
    """base64url without padding, as JWTs encode each part."""
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def _digest(*parts: str) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        encoded = part.encode("utf-8")
        hasher.update(len(encoded).to_bytes(8, "big"))
        hasher.update(encoded)
    return hasher.hexdigest()
