"""Following HTTP redirects as Go's HTTP client, ARC's, does (docs/github.md "Transport and errors").

Private to the package: :func:`next_hop` is the pure decision the transport applies to each answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from yarl import URL

from arc_scaleset.github._response import Response
from arc_scaleset.github.errors import FatalError

MAX_REDIRECTS = 10
"""Redirects followed for one attempt, as Go's HTTP client (ARC's) does; one more is an error."""
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Headers that hold a credential: only a redirect to the same host, or to one of its subdomains, gets them.
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie"})
_BODY_HEADERS = frozenset({"content-type", "content-length"})


@dataclass(frozen=True, slots=True)
class Hop:
    """The request a redirect asks for."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes | None


def next_hop(response: Response, *, headers: Mapping[str, str], body: bytes | None) -> Hop | None:
    """The request that follows ``response`` (pure), or ``None`` when it is not a redirect to follow.

    Go's rules, which ARC's client follows: 301, 302 and 303 turn a request other than GET or HEAD into a GET
    without a body (303 always); 307 and 308 repeat it, body and all; a redirect without ``Location`` is the
    answer. Credentials go only to the same host (any port) or a subdomain of it, and never from https to
    http, which is refused (:class:`FatalError`): sent in cleartext, the token would be readable on the way.
    """
    location = response.headers.get("Location")
    if response.status not in _REDIRECTS or not location:
        return None

    def refused(why: str) -> FatalError:
        return FatalError(
            method=response.method, url=response.url, status=response.status, reason=response.reason, detail=why
        )

    origin = URL(response.url, encoded=True)
    try:
        target = origin.join(URL(location, encoded=True))
    except ValueError:
        raise refused("redirected to a location that is not a URL") from None
    if target.scheme not in ("http", "https") or not target.host or target.user is not None:
        # Only the scheme and host are named: a location with user information may hold a password.
        raise refused(f"redirected to an unusable location ({target.scheme or 'no'} scheme, host {target.host!r})")
    if origin.scheme == "https" and target.scheme != "https":
        raise refused(f"redirected to http://{target.host}: refusing to send credentials in cleartext")
    method, hop_body, dropped = response.method, body, set[str]()
    if response.status in (301, 302, 303) and method not in ("GET", "HEAD"):
        method, hop_body = "GET", None
        dropped |= _BODY_HEADERS
    if not _same_site(origin, target):
        dropped |= _CREDENTIAL_HEADERS
    hop_headers = {name: value for name, value in headers.items() if name.lower() not in dropped}
    return Hop(method=method, url=str(target), headers=hop_headers, body=hop_body)


def _same_site(origin: URL, target: URL) -> bool:
    """Whether ``target`` may receive ``origin``'s credentials: the same host or a subdomain of it, whatever the
    port (Go's rule)."""
    if not origin.host or not target.host:
        return False
    return target.host == origin.host or target.host.endswith("." + origin.host)
