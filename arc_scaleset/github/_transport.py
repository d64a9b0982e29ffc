"""One HTTP exchange with retries: TLS, proxy, timeouts, bounded jittered backoff, and typed errors.

Private to the package. :class:`HttpTransport` sends a request and either returns a response whose status
the caller expects or raises an :class:`~arc_scaleset.github.errors.ActionsError` subclass. Policy (docs/github.md;
go-retryablehttp semantics, with a cap so that no caller waits on GitHub for long):

- connection errors and timeouts: retried, except TLS certificate-verification failures (fatal);
- 5xx except 501: retried; 429 and 403-with-``x-ratelimit-remaining: 0``: retried after ``Retry-After`` /
  ``x-ratelimit-reset`` when that wait is at most ``rate_limit_wait_max``, otherwise raised at once as
  :class:`RateLimited` so the caller can come back later instead of blocking; a 503 asking for a longer wait
  than that is raised at once too (a :class:`TransientError`); no wait is read as longer than an hour
  (:data:`MAX_RETRY_AFTER`);
- waits between attempts: ``retry_wait_min * 2**n`` capped at ``retry_wait_max``, plus up to 10 % jitter, on
  the injected clock; at most ``retry_max`` retries, then the last failure is raised;
- redirects: Go's method rules (:func:`next_hop`), at most :data:`MAX_REDIRECTS` per attempt, only to the
  original host or a subdomain that resolves to no internal address the original does not
  (:func:`address_refusal`), and then, sent directly, to exactly the addresses checked (:class:`_PinnedResolver`:
  a name that resolves anew for the connection could be rebound inside the cluster), credentials only to the
  same host and port, never from https to http (:class:`FatalError`); the body of an answer a redirect led to
  never reaches an error;
- a response body larger than ``max_response_bytes`` (10 MiB) is not read further: :class:`ResponseTooLarge`,
  never retried (a proxy or a misbehaving service must not make the process hold an unbounded body);
- error details are scrubbed of every secret the client holds (:mod:`._secrets`) before they are clipped, so a
  secret cut by the clip cannot leave its first half behind.

At debug level every attempt logs ``github request start`` and ``github request end`` (method, path without
the query, outcome, seconds, and whether the connection was new or reused from the pool): enough to tell a
request that hung from a caller that never sent one. Headers, bodies and queries are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import email.utils
import functools
import random
import re
import socket
import ssl
import time
from collections.abc import AsyncIterator, Collection, Mapping
from types import SimpleNamespace
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp
import orjson
from aiohttp.abc import AbstractResolver, ResolveResult
from multidict import CIMultiDictProxy
from yarl import URL

from arc_scaleset.backoff import Backoff
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.github._redirects import (
    MAX_REDIRECTS,
    Hop,
    IPAddress,
    address_refusal,
    literal_address,
    next_hop,
)
from arc_scaleset.github._response import Response
from arc_scaleset.github._secrets import Redactor
from arc_scaleset.github.errors import (
    ActionsError,
    FatalError,
    JobStillRunning,
    NotFound,
    RateLimited,
    ResponseTooLarge,
    RunnerExists,
    RunnerNotFound,
    SessionConflict,
    TransientError,
    Unauthorized,
)
from arc_scaleset.github.proxy import ProxySettings
from arc_scaleset.github.transport_options import TransportOptions
from arc_scaleset.observability.logging import get_logger

_log = get_logger(__name__)

UTF8_BOM = b"\xef\xbb\xbf"
_MAX_DETAIL = 500
# An error body is scrubbed before it is clipped to _MAX_DETAIL; scrubbing a bounded prefix keeps that cheap
# for a huge body while leaving far more than any secret's length beyond the clip.
_MAX_SCRUBBED = 64 * 1024
_READ_CHUNK = 64 * 1024


def build_ssl_context(root_ca_pem: str | None) -> ssl.SSLContext | bool:
    """What to verify GitHub's certificate with (``TCPConnector(ssl=...)``): the system's trust store, plus
    ``root_ca_pem`` when given. Raises ``ValueError`` for a bad PEM.

    Without an extra CA this is ``True``: aiohttp's own verified default context, which it builds from the
    system trust store when it is imported. A context of our own would load the same store a second time
    (0.7 to 2.5 MB of memory, depending on the store: issue 20)."""
    if root_ca_pem and root_ca_pem.strip():
        return _context_with_root_ca(root_ca_pem)
    return True


@functools.lru_cache(maxsize=64)
def _context_with_root_ca(root_ca_pem: str) -> ssl.SSLContext:
    # One context per distinct CA, shared by every client (never modified after it is built): loading the
    # system trust store takes tens of milliseconds, and a client is built per scale set and credential.
    context = ssl.create_default_context()
    try:
        context.load_verify_locations(cadata=root_ca_pem)
    except (ssl.SSLError, ValueError) as exc:
        raise ValueError(f"the root CA is not a valid PEM certificate bundle ({exc.__class__.__name__})") from None
    return context


MAX_RETRY_AFTER: Final = 3600.0
"""The longest wait an answer is read to ask for: GitHub's rate-limit window is an hour, so a longer
``Retry-After`` or ``x-ratelimit-reset`` (or one too large for a float, read as infinity) is no wait a caller
should take; it would park a listener's poll or session for years, or for ever."""


def retry_after_seconds(headers: Mapping[str, str], *, now: float) -> float | None:
    """Seconds to wait according to ``Retry-After`` (seconds or HTTP date) or ``x-ratelimit-reset`` (epoch), at
    most :data:`MAX_RETRY_AFTER`."""
    value = headers.get("Retry-After")
    if value:
        value = value.strip()
        if value.isdigit():
            return min(float(value), MAX_RETRY_AFTER)
        try:
            moment = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            moment = None
        if moment is not None:
            return min(max(0.0, moment.timestamp() - now), MAX_RETRY_AFTER)
    reset = headers.get("x-ratelimit-reset")
    if reset and reset.strip().isdigit():
        return min(max(0.0, float(reset) - now), MAX_RETRY_AFTER)
    return None


def is_rate_limited(status: int, headers: Mapping[str, str]) -> bool:
    """429, GitHub's primary rate limit (403 with ``x-ratelimit-remaining: 0``) or a secondary one (403 with
    ``Retry-After``)."""
    if status == 429:
        return True
    return status == 403 and (headers.get("x-ratelimit-remaining", "").strip() == "0" or "Retry-After" in headers)


def is_retryable_status(status: int) -> bool:
    return status == 0 or (status >= 500 and status != 501)


_TYPE_NAME_ERRORS: dict[str, type[ActionsError]] = {
    "AgentExistsException": RunnerExists,
    "AgentNotFoundException": RunnerNotFound,
    "JobStillRunningException": JobStillRunning,
    "TaskAgentSessionConflictException": SessionConflict,
}


def error_for_response(
    *,
    method: str,
    url: str,
    status: int,
    reason: str,
    headers: Mapping[str, str],
    body: bytes,
    now: float,
    scrub: Redactor | None = None,
    overrides: Mapping[int, type[ActionsError]] | None = None,
    prefix: str = "",
    redirected: bool = False,
) -> ActionsError:
    """The typed error for a response the caller did not expect (pure: status, headers and body in, error out).

    Order: the service's exception ``typeName`` (RunnerExists, RunnerNotFound, JobStillRunning, any
    ``...NotFoundException`` → NotFound) wins over the status; then ``overrides``; then the status class.

    The detail quotes the body only where GitHub or the service wrote it: a JSON answer (by its content type)
    from the URL the caller asked for, and then only its ``typeName`` and ``message``. Of any other answer (one
    a redirect led to, ``redirected``; text, HTML, a JSON value that is not an error object) the detail names
    the content type and the length, never the body: whatever a server sent the controller to would
    otherwise be read back to the team through a condition or an Event (docs/github.md).
    """
    type_name, detail = _describe_body(headers, body, redirected=redirected)
    if scrub is not None:
        detail = scrub(detail)
    detail = _clip(detail)
    if prefix:
        detail = f"{prefix}: {detail}"
    common: dict[str, Any] = {
        "method": method,
        "url": url,
        "status": status,
        "reason": reason,
        "detail": detail,
        "activity_id": _header_id(headers, "ActivityId"),
        "github_request_id": _header_id(headers, "X-GitHub-Request-Id"),
        "type_name": type_name,
        "server_date": _server_date(headers),
    }
    cls: type[ActionsError]
    if type_name and any(known in type_name for known in _TYPE_NAME_ERRORS):
        cls = next(err for known, err in _TYPE_NAME_ERRORS.items() if known in type_name)
    elif type_name and type_name.endswith("NotFoundException"):
        cls = NotFound
    elif overrides and status in overrides:
        cls = overrides[status]
    elif is_rate_limited(status, headers):
        return RateLimited(retry_after=retry_after_seconds(headers, now=now), **common)
    elif status == 404:
        cls = NotFound
    elif status == 401:
        cls = Unauthorized
    elif is_retryable_status(status):
        cls = TransientError
    else:
        cls = FatalError
    return cls(**common)


# What of a server's own words may stand in an error: an exception type name or a request ID is an identifier.
_IDENTIFIER = re.compile(r"[A-Za-z0-9_.:+-]{1,128}")
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9!#$&^_.+-]{1,64}/[A-Za-z0-9!#$&^_.+-]{1,64}")


def _describe_body(headers: Mapping[str, str], body: bytes, *, redirected: bool) -> tuple[str | None, str]:
    """The service's exception name, if any, and the error text (unclipped: it is scrubbed first)."""
    if not body.strip():
        return None, "unknown error"
    media_type = headers.get("Content-Type", "").partition(";")[0].strip().lower()
    payload: Any = None
    parsed = True
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        parsed = False
    error_object = payload if isinstance(payload, dict) else {}
    raw_type = error_object.get("typeName") or error_object.get("$type")
    type_name = str(raw_type) if raw_type and _IDENTIFIER.fullmatch(str(raw_type)) else None
    message = str(error_object.get("message") or error_object.get("Message") or "")
    if redirected or "json" not in media_type or not (type_name or message):
        if "json" in media_type and not parsed and not redirected:
            return None, "failed to unmarshal error response body"
        return type_name, _unshown(media_type, len(body), redirected=redirected)
    if type_name:
        return type_name, f"{type_name}: {message[:_MAX_SCRUBBED]}"
    return None, message[:_MAX_SCRUBBED]


def _unshown(media_type: str, length: int, *, redirected: bool) -> str:
    """What an error says of a body it does not show: the content type (when it is one) and the length."""
    kind = media_type if _MEDIA_TYPE.fullmatch(media_type) else "no readable content type"
    origin = "an answer a redirect led to" if redirected else "not a JSON error object"
    return f"the body is not shown ({origin}: {kind}, {length} bytes)"


def _header_id(headers: Mapping[str, str], name: str) -> str | None:
    """A request-ID header, when it is an identifier (a server may put anything in a header)."""
    value = headers.get(name)
    return value if value and _IDENTIFIER.fullmatch(value) else None


def _server_date(headers: Mapping[str, str]) -> dt.datetime | None:
    """The answer's ``Date`` header (the server's clock), ``None`` when absent or unreadable."""
    value = headers.get("Date")
    if not value:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_DETAIL else text[:_MAX_DETAIL] + "..."


class SharedSessions:
    """HTTP connection pools shared by the clients of one process (a shared listener's members; docs/listener.md,
    "Shared listener (process)"): one aiohttp session per way of verifying the server (the system trust store, or
    one extra root CA), so clients whose transport options are equal reuse each other's idle connections.

    What a shared session holds carries no client's identity: credentials travel in each request's headers, a
    proxy is chosen per request (and a tunnel's connection is pooled by proxy), and the sessions keep no cookies
    (the service sets none that matter; ARC's Go client keeps none either). There is no cap on connections: every
    client's long poll holds one for up to a minute, and a cap would make one client's call wait behind others'
    polls. Close it once, after every client that uses it (a client's ``aclose`` leaves it open).
    """

    def __init__(self, *, resolver: AbstractResolver | None = None) -> None:
        """``resolver`` answers the look-ups of the sessions' connections and the clients' redirect checks (the
        system's resolver, through a thread, when ``None``; a test's own resolver plays DNS). A resolver given
        here is the caller's to close."""
        self._sessions: dict[int, tuple[ssl.SSLContext | bool, aiohttp.ClientSession]] = {}
        self._resolver = resolver

    def __len__(self) -> int:
        return len(self._sessions)

    def resolver(self) -> AbstractResolver:
        """The resolver of every session here (built on first use: the system's needs the running loop)."""
        if self._resolver is None:
            self._resolver = aiohttp.ThreadedResolver()
        return self._resolver

    def session(self, verify: ssl.SSLContext | bool) -> aiohttp.ClientSession:
        """The session for ``verify`` (:func:`build_ssl_context`'s answer: ``True`` or a cached context per CA)."""
        # Contexts are compared by identity: build_ssl_context returns one context per distinct CA.
        found = self._sessions.get(id(verify))
        if found is None or found[1].closed:
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=verify, limit=0, resolver=self.resolver()),
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
                raise_for_status=False,
                trace_configs=[_connection_trace()],
            )
            found = self._sessions[id(verify)] = (verify, session)  # the context is held so its id stays its own
        return found[1]

    async def aclose(self) -> None:
        sessions = [session for _, session in self._sessions.values()]
        self._sessions.clear()
        for session in sessions:
            await session.close()


class HttpTransport:
    """Sends requests for one client: one aiohttp session (created lazily, inside the running loop), or the one
    ``shared`` gives for its way of verifying the server."""

    def __init__(
        self,
        options: TransportOptions,
        *,
        clock: Clock = REAL_CLOCK,
        rng: random.Random | None = None,
        shared: SharedSessions | None = None,
    ) -> None:
        """``rng`` draws the jitter of the waits between attempts. Raises ``ValueError`` when
        ``options.root_ca_pem`` is not a PEM certificate bundle."""
        self.options = options
        self._ssl = build_ssl_context(options.root_ca_pem)
        self._proxy = options.proxy or ProxySettings()
        self.clock = clock
        self._rng = rng or random.Random()
        self.redact = Redactor(clock=clock)
        for secret in self._proxy.secret_values():
            # A proxy that refuses the request may echo its credentials (e.g. Proxy-Authorization).
            self.redact.add(secret)
        self._shared = shared
        self._session: aiohttp.ClientSession | None = None
        self._own_resolver: AbstractResolver | None = None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client_session(self) -> aiohttp.ClientSession:
        if self._shared is not None:
            return self._shared.session(self._ssl)
        if self._session is None or self._session.closed:
            # trust_env=False: the proxy comes from ProxySettings only, so tests and callers control it.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl, resolver=self._resolver()),
                trust_env=False,
                raise_for_status=False,
                trace_configs=[_connection_trace()],
            )
        return self._session

    def _resolver(self) -> AbstractResolver:
        """What every look-up of this transport asks, its connections' and its redirect checks' alike: the
        shared sessions' resolver, or one of its own."""
        if self._shared is not None:
            return self._shared.resolver()
        if self._own_resolver is None:
            self._own_resolver = aiohttp.ThreadedResolver()
        return self._own_resolver

    @contextlib.asynccontextmanager
    async def _session_for(self, pin: _Pin | None, *, proxied: bool) -> AsyncIterator[aiohttp.ClientSession]:
        """The session a request goes out on: the client's, or, for a hop whose addresses were checked (``pin``)
        and that goes directly, a session of its own whose connector knows only those addresses, closed after
        the hop.

        A session of its own because a connector's resolver is the connector's, not a request's; and so the hop's
        connection never enters the client's pool, where a later request for that name (the config URL of
        another scale set may name it) would be handed a connection to addresses it did not look up. The price
        is a new connection per hop to a subdomain (GitHub's redirects stay on the host). Through a proxy
        nothing is pinned: the proxy resolves the name (docs/github.md)."""
        if pin is None or proxied:
            yield self._client_session()
            return
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._ssl, resolver=_PinnedResolver(pin), use_dns_cache=False),
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
            raise_for_status=False,
            trace_configs=[_connection_trace()],
        )
        try:
            yield session
        finally:
            await session.close()

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None = None,
        expected: Collection[int],
        time_limit: float | None = None,
        retry_statuses: Collection[int] = (),
        overrides: Mapping[int, type[ActionsError]] | None = None,
    ) -> Response:
        """Send until a status in ``expected`` comes back, retrying what the policy allows; else raise.

        ``url`` must already be encoded exactly as it should go on the wire. ``retry_statuses`` adds
        statuses to retry (e.g. 401/403 for the runner-registration exchange).
        """
        backoff = Backoff(base=self.options.retry_wait_min, cap=self.options.retry_wait_max, jitter=0.1, rng=self._rng)
        attempts = self.options.retry_max + 1
        for attempt in range(1, attempts + 1):
            last = attempt == attempts
            try:
                response = await self._send_following(method, url, headers=headers, body=body, time_limit=time_limit)
            except aiohttp.ClientConnectorCertificateError as exc:
                raise FatalError(
                    method=method, url=url, detail=f"TLS certificate verification failed: {self.redact(_cause(exc))}"
                ) from None
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                if last:
                    raise TransientError(
                        method=method,
                        url=url,
                        detail=f"giving up after {attempt} attempt(s): {self.redact(_cause(exc))}",
                    ) from None
                await self.clock.sleep(backoff.next_delay())
                continue
            if response.status in expected:
                return response

            now = self.clock.now().timestamp()
            retryable = (
                is_retryable_status(response.status)
                or is_rate_limited(response.status, response.headers)
                or response.status in retry_statuses
            )
            wait = retry_after_seconds(response.headers, now=now) if response.status in (429, 503, 403) else None
            if wait is not None and wait > self.options.rate_limit_wait_max:
                # Waiting here would park a reconcile worker or a listener for long: hand the wait to the caller.
                # Whatever the status: a 503 may ask for a wait too, and it was sat out here however long.
                last = True
            if not retryable or last:
                prefix = f"giving up after {attempt} attempt(s)" if retryable and attempt > 1 else ""
                raise error_for_response(
                    method=method,
                    url=url,
                    status=response.status,
                    reason=response.reason,
                    headers=response.headers,
                    body=response.body,
                    now=now,
                    scrub=self.redact,
                    overrides=overrides,
                    prefix=prefix,
                    redirected=response.redirected,
                )
            delay = backoff.next_delay()
            if wait is not None:
                # Never sooner than the backoff: "Retry-After: 0", or a reset time our clock has already passed,
                # would have every retry sent at once.
                delay = max(delay, wait)
            await self.clock.sleep(delay)
        raise AssertionError("unreachable: the last attempt always returns or raises")

    async def _send_following(
        self, method: str, url: str, *, headers: Mapping[str, str], body: bytes | None, time_limit: float | None
    ) -> Response:
        """:meth:`_send_once`, following redirects (:func:`next_hop`, always against the original request):
        GitHub answers 301 or 307 for a renamed repository; its clients are to follow. The answer of a hop is
        marked ``redirected``."""
        original, hop_method, hop_url, hop_headers, hop_body = url, method, url, headers, body
        pin: _Pin | None = None
        for hops in range(MAX_REDIRECTS + 1):
            response = await self._send_once(
                hop_method, hop_url, headers=hop_headers, body=hop_body, time_limit=time_limit, pin=pin
            )
            if hops:
                response = dataclasses.replace(response, redirected=True)
            # The hop's own headers and body: a 303 turned it into a GET without a body, and credentials a hop
            # lost are never given back further on.
            hop = next_hop(response, original=original, headers=hop_headers, body=hop_body)
            if hop is None:
                return response
            pin = None if hop.resolve is None else await self._checked(response, original, hop)
            _log.debug(
                "github request redirected",
                status=response.status,
                path=urlsplit(hop_url).path,
                to=urlsplit(hop.url).path,
            )
            hop_method, hop_url, hop_headers, hop_body = hop.method, hop.url, hop.headers, hop.body
        raise FatalError(method=method, url=url, detail=f"stopped after {MAX_REDIRECTS} redirects")

    async def _checked(self, response: Response, original: str, hop: Hop) -> _Pin:
        """The addresses of ``hop.resolve`` (a subdomain of the original host) that the hop may connect to: all
        it resolves to, unless one is of a kind the original host's addresses are not (:func:`address_refusal`;
        :class:`FatalError`).

        The hop then connects to exactly these (:meth:`_session_for`), so a name whose addresses change after
        this look-up (DNS rebinding with a zero TTL) does not lead it elsewhere. A name that cannot be looked up
        has none: sent directly, the hop fails like any unreachable host; through a proxy, the proxy resolves it.
        """
        host = hop.resolve or ""
        # Only answers that are addresses: a host name in an answer would be looked up again by the connection.
        found = [
            result
            for result in await self._look_up(host, URL(hop.url, encoded=True).port or 0)
            if _ip_of(result) is not None
        ]
        original_host = URL(original, encoded=True).raw_host or ""
        literal = literal_address(original_host)
        original_addresses = {literal} if literal is not None else _ips(await self._look_up(original_host, 0))
        why = address_refusal(original=original_addresses, target=_ips(found))
        if why is not None:
            raise FatalError(
                method=response.method,
                url=response.url,
                status=response.status,
                reason=response.reason,
                detail=f"redirected to {host.rstrip('.')}, which {why}",
            )
        return _Pin(host=host, addresses=tuple(found))

    async def _look_up(self, host: str, port: int) -> list[ResolveResult]:
        """What the transport's resolver answers for ``host`` within the request timeout (nothing when it cannot
        answer, or does not in time: a resolver that hangs must not hold the request past its own deadline)."""
        try:
            async with asyncio.timeout(self.options.request_timeout):
                return await self._resolver().resolve(host, port, family=socket.AF_UNSPEC)
        except (OSError, UnicodeError, TimeoutError):
            return []

    async def _send_once(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None,
        time_limit: float | None,
        pin: _Pin | None = None,
    ) -> Response:
        """One request, without following a redirect; ``pin``: the only addresses it may connect to."""
        choice = self._proxy.proxy_for(url)
        headers = dict(headers)
        if choice is not None and choice.headers and url.startswith("http://"):
            # A plain-HTTP request goes to the proxy as-is (absolute form): aiohttp sends `proxy_headers` only
            # on a CONNECT tunnel, so the proxy credentials must ride on the request itself.
            headers.update(choice.headers)
        # One deadline for connect + headers + body, so a server that trickles a body cannot hold us.
        total = time_limit if time_limit is not None else self.options.request_timeout
        client_timeout = aiohttp.ClientTimeout(total=total)
        # Path only: a query or a header may carry a token, and the path names what was asked for.
        path = urlsplit(url).path
        trace = SimpleNamespace(connection="none")
        started = time.monotonic()
        _log.debug("github request start", method=method, path=path, proxied=choice is not None)
        outcome = "error"
        try:
            async with (
                self._session_for(pin, proxied=choice is not None) as session,
                session.request(
                    method,
                    URL(url, encoded=True),  # the query is already encoded in the service's canonical form
                    headers=headers,
                    data=body,
                    timeout=client_timeout,
                    proxy=choice.url if choice else None,
                    proxy_headers=choice.headers if choice else None,
                    allow_redirects=False,
                    trace_request_ctx=trace,
                ) as raw,
            ):
                outcome = str(raw.status)
                payload = await self._read_body(raw, method, url)
                resp_headers: CIMultiDictProxy[str] = raw.headers
                return Response(
                    method=method,
                    url=url,
                    status=raw.status,
                    reason=raw.reason or "",
                    headers=resp_headers,
                    body=payload.removeprefix(UTF8_BOM),
                )
        except BaseException as exc:
            # The class only: an exception's text can carry the request's URL with its query.
            outcome = "timed out" if isinstance(exc, TimeoutError) else exc.__class__.__name__
            raise
        finally:
            _log.debug(
                "github request end",
                method=method,
                path=path,
                outcome=outcome,
                connection=trace.connection,
                seconds=round(time.monotonic() - started, 3),
            )

    async def _read_body(self, raw: aiohttp.ClientResponse, method: str, url: str) -> bytes:
        """The (decompressed) body, refused as soon as it is known to exceed ``max_response_bytes``."""
        limit = self.options.max_response_bytes
        declared = raw.content_length
        if declared is not None and declared > limit:
            raise _too_large(raw, method, url, limit)
        chunks: list[bytes] = []
        size = 0
        async for chunk in raw.content.iter_chunked(_READ_CHUNK):
            size += len(chunk)
            if size > limit:
                raise _too_large(raw, method, url, limit)
            chunks.append(chunk)
        return b"".join(chunks)


@dataclasses.dataclass(frozen=True, slots=True)
class _Pin:
    """A redirect hop's host name and the addresses it was checked against (:meth:`HttpTransport._checked`)."""

    host: str
    addresses: tuple[ResolveResult, ...]


class _PinnedResolver(AbstractResolver):
    """The resolver of one pinned hop's connection: it answers the hop's host name with the addresses that were
    checked, every one (so the connection may still fall back from one to the next, IPv6 or IPv4), and refuses
    any other name. The URL keeps the name, so TLS still sends it (SNI) and verifies the certificate for it, and
    the ``Host`` header still carries it."""

    def __init__(self, pin: _Pin) -> None:
        self._pin = pin

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = [
            address
            for address in self._pin.addresses
            if family == socket.AF_UNSPEC or address["family"] == family  # the connector asks for any family
        ]
        if _same_name(host, self._pin.host) and found:
            return found
        raise socket.gaierror(socket.EAI_NONAME, f"{host}: the redirect's check found no address to connect to")

    async def close(self) -> None:
        return None


def _same_name(one: str, other: str) -> bool:
    return one.lower().rstrip(".") == other.lower().rstrip(".")


def _ips(found: Collection[ResolveResult]) -> set[IPAddress]:
    """The addresses of a resolver's answer."""
    addresses = (_ip_of(result) for result in found)
    return {address for address in addresses if address is not None}


def _ip_of(result: ResolveResult) -> IPAddress | None:
    """The address of one answer (an IPv6 scope ID, ``%eth0``, is not part of it); ``None``: not an address."""
    return literal_address(result["host"].partition("%")[0])


def _connection_trace() -> aiohttp.TraceConfig:
    """Records on each request's ``trace_request_ctx`` whether it got a new or a pooled connection (for the
    debug log: a request that hangs on a pooled connection and one that hangs connecting are different bugs)."""

    async def reused(_: aiohttp.ClientSession, ctx: SimpleNamespace, __: Any) -> None:
        if isinstance(ctx.trace_request_ctx, SimpleNamespace):
            ctx.trace_request_ctx.connection = "reused"

    async def created(_: aiohttp.ClientSession, ctx: SimpleNamespace, __: Any) -> None:
        if isinstance(ctx.trace_request_ctx, SimpleNamespace):
            ctx.trace_request_ctx.connection = "new"

    trace = aiohttp.TraceConfig()
    trace.on_connection_reuseconn.append(reused)
    trace.on_connection_create_end.append(created)
    return trace


def _too_large(raw: aiohttp.ClientResponse, method: str, url: str, limit: int) -> ResponseTooLarge:
    return ResponseTooLarge(
        method=method,
        url=url,
        status=raw.status,
        reason=raw.reason or "",
        detail=f"the response body exceeds the client's limit of {limit} bytes; it was not read",
        limit=limit,
    )


def _cause(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "timed out"
    text = str(exc) or exc.__class__.__name__
    return f"{exc.__class__.__name__}: {text}" if text != exc.__class__.__name__ else text
