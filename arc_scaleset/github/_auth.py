"""The authentication chain (docs/github.md): GitHub credentials → registration token → Actions-service admin token.

Private to the package. :class:`AuthChain.admin` returns the Actions-service base URL and admin token,
refreshing them (all steps) when there is none yet or the admin token expires within 60 s. For a GitHub
App, the installation token is cached until 60 s before its own expiry, so an admin refresh does not always
mint a new installation token; a cached installation token that GitHub answers with 401 (revoked before its
expiry: the App was suspended, its key rotated, the installation changed) is dropped, a new one is minted and
the step is repeated once, as ARC fetches a fresh installation token on every refresh (docs/github.md).

A refresh that fails fails for every caller that waited for it: one failure costs one request, not one per
waiter; a call made after the failure was delivered tries again. A step GitHub accepted (2xx) whose answer
cannot be used (not a JSON object, no token, an admin token that is no JWT) is a :class:`TransientError`, as an
unusable session answer is (:mod:`.actions_client`): a proxy's page or a truncated body passes, and a
:class:`~.errors.FatalError` would end the listener. Its detail names the step and asks whether the config URL
is a GitHub URL (a server that is not GitHub answering 200 to everything fails so on every try); it never
quotes the body.

Every credential the chain is given or mints is handed to the transport's redactor with its expiry
(:mod:`._secrets`), so no error text can quote it while it can still be used.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import orjson

from arc_scaleset.clock import Clock
from arc_scaleset.github._response import Response
from arc_scaleset.github._secrets import jwt_expiry
from arc_scaleset.github._transport import HttpTransport
from arc_scaleset.github.config_url import GitHubConfig
from arc_scaleset.github.credentials import Credentials, GitHubApp
from arc_scaleset.github.errors import (
    ActionsError,
    AuthenticationStepFailed,
    RateLimited,
    TransientError,
    Unauthorized,
)
from arc_scaleset.observability.logging import get_logger

_log = get_logger(__name__)

REFRESH_MARGIN = dt.timedelta(seconds=60)
SKEW_TOLERANCE = dt.timedelta(seconds=30)
"""A clock difference with GitHub that App JWTs absorb (they are backdated 60 s), and ``Date`` (1 s resolution,
plus the answer's time on the way) cannot measure much finer: beyond it a refused JWT is re-dated once."""


@dataclass(frozen=True, slots=True)
class AdminConnection:
    """Where the Actions service for this config lives, and the admin token to call it with."""

    url: str
    token: str = field(repr=False)
    expires_at: dt.datetime


@dataclass(frozen=True, slots=True)
class _ExpiringToken:
    token: str = field(repr=False)
    expires_at: dt.datetime


class AuthChain:
    """Obtains and caches the admin connection for one config URL and one set of credentials."""

    def __init__(
        self,
        *,
        config: GitHubConfig,
        credentials: Credentials,
        transport: HttpTransport,
        user_agent: str,
        clock: Clock,
    ) -> None:
        self._config = config
        self._credentials = credentials
        self._transport = transport
        self._user_agent = user_agent
        self._clock = clock
        self._lock = asyncio.Lock()
        self._admin: AdminConnection | None = None
        self._refreshes = 0  # refreshes finished, however they ended
        self._failure: Exception | None = None  # how the last one failed; None when it succeeded
        self._installation_token: _ExpiringToken | None = None
        self._clock_skew = dt.timedelta(0)  # how far GitHub's clock is ahead of ours, once a refusal measured it
        # The configured credentials are kept for the life of the client (no expiry).
        for secret in credentials.secret_values():
            transport.redact.add(secret)

    def _fresh(self, expires_at: dt.datetime) -> bool:
        return expires_at - self._clock.now() > REFRESH_MARGIN

    async def admin(self, *, force: bool = False) -> AdminConnection:
        """The current admin connection, refreshed first when missing, expiring within 60 s, or ``force``d.

        ``force`` is for a 401 from the Actions service: the token was revoked before its ``exp``. A forced
        refresh that another caller already performed meanwhile is not repeated, and one that failed meanwhile
        raises its failure here too (a cancelled one does not count: this caller tries itself).
        """
        stale, refreshes = self._admin, self._refreshes
        async with self._lock:
            current = self._admin
            if current is not None and self._fresh(current.expires_at) and not (force and current is stale):
                return current
            if self._failure is not None and self._refreshes != refreshes:
                raise self._failure
            try:
                self._admin = await self._refresh()
            except Exception as exc:
                self._failure = exc
                self._refreshes += 1
                raise
            self._failure = None
            self._refreshes += 1
            return self._admin

    async def _refresh(self) -> AdminConnection:
        github_token, cached = await self._github_token()
        try:
            registration_token = await self._registration_token(github_token)
        except Unauthorized:
            if not cached:
                raise
            # A cached installation token revoked before its expiry: drop it and mint a new one, once.
            self._installation_token = None
            github_token, _ = await self._github_token()
            registration_token = await self._registration_token(github_token)
        return await self._runner_registration(registration_token)

    async def _github_token(self) -> tuple[str, bool]:
        """The token that authorises the REST calls, and whether it is a cached installation token."""
        credentials = self._credentials
        if not isinstance(credentials, GitHubApp):
            return credentials.token, False
        cached = self._installation_token
        if cached is not None and self._fresh(cached.expires_at):
            return cached.token, True
        url = f"{self._config.api_base_url}/app/installations/{credentials.installation_id}/access_tokens"
        for attempt in (1, 2):
            # Dated by GitHub's clock as last measured (its Date header): GitHub refuses a JWT issued in its
            # future, so a clock more than a minute ahead would otherwise make every JWT fail.
            app_jwt = credentials.jwt(now=self._clock.now() + self._clock_skew)
            self._transport.redact.add(app_jwt, expires_at=jwt_expiry(app_jwt))
            try:
                response = await self._transport.request(
                    "POST",
                    url,
                    headers=self._rest_headers(app_jwt, "application/vnd.github+json"),
                    expected=range(200, 300),  # GitHub answers 201; whatever else it says, the body decides
                )
                break
            except Unauthorized as exc:
                skew = clock_skew(exc.server_date, self._clock.now())
                if attempt == 1 and skew is not None and abs(skew - self._clock_skew) > SKEW_TOLERANCE:
                    # GitHub's clock differs from ours: date the JWT by GitHub's and try once more.
                    self._clock_skew = skew if abs(skew) > SKEW_TOLERANCE else dt.timedelta(0)
                    _log.warning(
                        "this machine's clock differs from GitHub's: App JWTs are dated by GitHub's clock",
                        github_clock_ahead_seconds=round(skew.total_seconds()),
                    )
                    continue
                raise _reworded(
                    exc,
                    f"GitHub rejected the JWT of App {credentials.app_id}: "
                    + _skew_cause(skew, corrected=self._clock_skew),
                ) from None
            except ActionsError as exc:
                raise _step_failure(
                    exc,
                    "installation token",
                    f"GitHub App {credentials.app_id} has no installation {credentials.installation_id} it may "
                    f"use (or {self._config.api_base_url} is not the GitHub API)",
                ) from None
        else:
            raise AssertionError("unreachable: the second attempt returns or raises")
        token = self._expiring_token(response, "installation token")
        self._installation_token = token
        return token.token, False

    async def _registration_token(self, github_token: str) -> str:
        url = self._config.registration_token_url
        try:
            response = await self._transport.request(
                "POST",
                url,
                headers=self._rest_headers(github_token, "application/vnd.github.v3+json"),
                expected=range(200, 300),  # GitHub answers 201; whatever else it says, the body decides
            )
        except Unauthorized as exc:
            raise _reworded(exc, "GitHub rejected the credentials (bad or expired token)") from None
        except ActionsError as exc:
            raise _step_failure(
                exc,
                "registration token",
                f"no runner registration endpoint for {self._config.scope} {self._target()} these credentials may "
                f"use: check that it exists, that the credentials can administer it, and that "
                f"{self._config.api_base_url} is the GitHub API",
            ) from None
        return self._expiring_token(response, "registration token").token

    async def _runner_registration(self, registration_token: str) -> AdminConnection:
        url = f"{self._config.api_base_url}/actions/runner-registration"
        body = orjson.dumps({"url": self._config.url, "runner_event": "register"})
        try:
            response = await self._transport.request(
                "POST",
                url,
                headers={
                    "Authorization": f"RemoteAuth {registration_token}",
                    "Content-Type": "application/json",
                    "User-Agent": self._user_agent,
                },
                body=body,
                expected=range(200, 300),
                # The registration token can take a moment to become valid everywhere: retry auth failures too.
                retry_statuses=(401, 403),
            )
        except ActionsError as exc:
            raise _step_failure(
                exc,
                "runner registration",
                f"GitHub refused to register runners for {self._config.url} with a fresh registration token",
            ) from None
        payload = self._json_object(response, "runner registration")
        admin_url, admin_token = payload.get("url"), payload.get("token")
        if not _text(admin_url) or not _text(admin_token):
            missing = " and no ".join(
                name for name, value in (("url", admin_url), ("token", admin_token)) if not _text(value)
            )
            raise self._unusable(response, f"the runner registration answer has no {missing}")
        expires_at = jwt_expiry(admin_token)
        if expires_at is None:
            raise self._unusable(
                response, "the admin token in the runner registration answer is not a JWT with an exp claim"
            )
        self._transport.redact.add(admin_token, expires_at=expires_at)
        return AdminConnection(url=admin_url, token=admin_token, expires_at=expires_at)

    def _rest_headers(self, bearer: str, content_type: str) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {bearer}",
            "Content-Type": content_type,
            "Accept": "application/vnd.github+json",
            "User-Agent": self._user_agent,
        }

    def _expiring_token(self, response: Response, step: str) -> _ExpiringToken:
        payload = self._json_object(response, step)
        token, expires_at = payload.get("token"), payload.get("expires_at")
        if not _text(token):
            raise self._unusable(response, f"the {step} answer has no token")
        try:
            expiry = dt.datetime.fromisoformat(str(expires_at).replace("Z", "+00:00"))
        except ValueError:
            # Without a readable expiry the token is used once: the next refresh asks again. It is masked for
            # the life of the client, since nobody knows how long GitHub honours it.
            self._transport.redact.add(token)
            return _ExpiringToken(token=token, expires_at=self._clock.now())
        if expiry.tzinfo is None:
            expiry = expiry.replace(tzinfo=dt.UTC)
        self._transport.redact.add(token, expires_at=expiry)
        return _ExpiringToken(token=token, expires_at=expiry)

    def _json_object(self, response: Response, step: str) -> dict[str, Any]:
        try:
            payload = response.json()
        except orjson.JSONDecodeError:
            payload = None
        if not isinstance(payload, dict):
            raise self._unusable(response, f"the {step} answer is not a JSON object")
        return payload

    def _unusable(self, response: Response, problem: str) -> TransientError:
        """A 2xx answer of a step that cannot be used, ``problem`` saying why (never quoting the body): passing,
        unless the config URL names a server that is not GitHub, hence the question (the module docstring)."""
        return TransientError(
            method=response.method,
            url=response.url,
            status=response.status,
            reason=response.reason,
            detail=f"{problem}: is githubConfigUrl {self._config.url} a GitHub URL?",
        )

    def _target(self) -> str:
        config = self._config
        if config.enterprise:
            return config.enterprise
        return f"{config.organization}/{config.repository}" if config.repository else config.organization


def _text(value: object) -> TypeGuard[str]:
    """Whether an answer's field is a non-empty string."""
    return isinstance(value, str) and bool(value)


def clock_skew(server_date: dt.datetime | None, local_now: dt.datetime) -> dt.timedelta | None:
    """How far GitHub's clock (an answer's ``Date`` header) is ahead of ours; ``None`` without the header."""
    return None if server_date is None else server_date - local_now


def _skew_cause(skew: dt.timedelta | None, *, corrected: dt.timedelta) -> str:
    """Why GitHub refused an App JWT, as far as the clocks tell (pure): ``skew`` is what the refusal's ``Date``
    header measured, ``corrected`` the skew the JWT was already dated for."""
    if skew is not None and abs(skew - corrected) > SKEW_TOLERANCE:
        return (
            f"this machine's clock is {_apart(skew)} GitHub's (its Date header), and GitHub refuses a JWT dated "
            "outside its own clock's window: set the clock right (NTP)"
        )
    if abs(corrected) > SKEW_TOLERANCE:
        return (
            f"wrong App ID or private key (the JWT was dated by GitHub's clock, as this machine's is "
            f"{_apart(corrected)} it: the clock is not the cause)"
        )
    return "wrong App ID or private key"


def _apart(skew: dt.timedelta) -> str:
    """``skew`` (GitHub's clock minus ours) in words: "N s ahead of" or "N s behind"."""
    seconds = round(abs(skew.total_seconds()))
    return f"{seconds} s behind" if skew > dt.timedelta(0) else f"{seconds} s ahead of"


def _step_failure(exc: ActionsError, step: str, explanation: str) -> ActionsError:
    """``exc`` from the authentication chain's ``step``: a 404 or a 403 (not a rate limit) becomes
    :class:`AuthenticationStepFailed` with ``explanation``; anything else is returned as it is."""
    if isinstance(exc, RateLimited) or exc.status not in (403, 404):
        return exc
    return AuthenticationStepFailed(
        step=step, detail=f"the {step} step failed: {explanation} ({exc.detail})", **exc.facts()
    )


def _reworded(exc: ActionsError, explanation: str) -> ActionsError:
    """The same error class and facts, with a detail a human can act on (the service's words kept at the end)."""
    return type(exc)(detail=f"{explanation} ({exc.detail})", **exc.facts())
