"""Following HTTP redirects (docs/github.md "Transport and errors"): Go's method rules, which ARC's client
follows, under a stricter rule of where a redirect may lead and what it may carry.

Private to the package. :func:`next_hop` is the pure decision the transport applies to each answer, always
against the *original* request (never the previous hop, so a chain cannot walk away one step at a time);
:func:`address_refusal` is the pure check of where a followed host's name resolves to.

Why stricter than Go: one controller serves many teams, and a team chooses its ``githubConfigUrl`` (GHES, over
plain http if it likes). Under Go's rules a server of that team could send the controller to any address the
controller can reach (a cloud metadata endpoint, the API server, another team's service) and read the answer
back through the error text. So a redirect is followed only to the original host or a subdomain of it; to a
loopback, link-local or private address only when the original host is one of the same kind; and the
credentials (``Authorization``, ``Cookie``) go only to the same host *and* port.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from yarl import URL

from arc_scaleset.github._response import Response
from arc_scaleset.github.errors import FatalError

MAX_REDIRECTS = 10
"""Redirects followed for one attempt, as Go's HTTP client (ARC's) does; one more is an error."""
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Headers that hold a credential: only a redirect to the same host and port gets them.
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie"})
_BODY_HEADERS = frozenset({"content-type", "content-length"})
_DEFAULT_PORTS = {"http": 80, "https": 443}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressKind(enum.Enum):
    """Where an address leads, for the redirect rule. Only ``PUBLIC`` may be reached from any original host."""

    PUBLIC = "public"
    LOOPBACK = "loopback"
    LINK_LOCAL = "link-local"  # cloud metadata endpoints (169.254.169.254, fd00:ec2::254 is private)
    PRIVATE = "private"


@dataclass(frozen=True, slots=True)
class Hop:
    """The request a redirect asks for. ``resolve`` is the host name whose addresses the transport must check
    with :func:`address_refusal` before sending, and then connect to (a subdomain of the original host, as the
    URL writes it, lower case: a trailing dot makes it an absolute name, which the resolver's search domains do
    not extend); ``None``: nothing to check (the original host itself, or an address literal already
    checked)."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes | None
    resolve: str | None = None


def next_hop(response: Response, *, original: str, headers: Mapping[str, str], body: bytes | None) -> Hop | None:
    """The request that follows ``response`` (pure), or ``None`` when it is not a redirect to follow.

    ``original`` is the URL of the request as the caller made it, before any redirect; ``headers`` and ``body``
    are those of the request ``response`` answers (the original one, or the hop before). Go's method rules:
    301, 302 and 303 turn a request other than GET or HEAD into a GET without a body (303 always); 307 and 308
    repeat it, body and all; a redirect without ``Location`` is the answer. Refused (:class:`FatalError`, never
    retried; the message names the location's scheme and host, never its path, query or user information):

    - a location that is not an http(s) URL with a host, or that carries user information;
    - https to http (the token would be readable on the way);
    - a host other than the original host or a subdomain of it (an address literal has no subdomains, so a
      literal original host is followed only to itself).

    A subdomain is a name whose addresses only the transport can look up: the hop names it in ``resolve``.

    Credentials go only to the original host on the original port (the scheme's default port when none is
    written): another port is another service, which a team may run on the same machine.
    """
    location = response.headers.get("Location")
    if response.status not in _REDIRECTS or not location:
        return None

    def refused(why: str) -> FatalError:
        return FatalError(
            method=response.method, url=response.url, status=response.status, reason=response.reason, detail=why
        )

    origin = URL(original, encoded=True)
    try:
        target = URL(response.url, encoded=True).join(URL(location, encoded=True))
        target_host = _host(target)  # a host that is not ASCII fails here (a UnicodeError is a ValueError)
    except ValueError:
        raise refused("redirected to a location that is not a URL") from None
    # User information is a user name, a password or both: ``http://:pw@host`` has no user but a password, which
    # the HTTP client would still send (and refuse beside our Authorization header with a ValueError).
    userinfo = target.user is not None or target.password is not None
    if target.scheme not in ("http", "https") or not target_host or userinfo:
        # Only the scheme and host are named: a location with user information may hold a password.
        raise refused(f"redirected to an unusable location ({target.scheme or 'no'} scheme, host {target.host!r})")
    if origin.scheme == "https" and target.scheme != "https":
        raise refused(f"redirected to http://{target.host}: refusing to send credentials in cleartext")
    origin_host = _host(origin)
    if not _same_or_subdomain(origin_host, target_host):
        raise refused(f"redirected to another host ({target_host}): only {origin_host} and its subdomains are followed")
    method, hop_body, dropped = response.method, body, set[str]()
    if response.status in (301, 302, 303) and method not in ("GET", "HEAD"):
        method, hop_body = "GET", None
        dropped |= _BODY_HEADERS
    if (target_host, _port(target)) != (origin_host, _port(origin)):
        dropped |= _CREDENTIAL_HEADERS
    hop_headers = {name: value for name, value in headers.items() if name.lower() not in dropped}
    resolve = (target.raw_host or "").lower() if target_host != origin_host and _ip(target_host) is None else None
    return Hop(method=method, url=str(target), headers=hop_headers, body=hop_body, resolve=resolve)


def address_refusal(*, original: Collection[IPAddress], target: Collection[IPAddress]) -> str | None:
    """Why a redirect whose host resolves to ``target`` may not be followed from a request whose host resolves
    to ``original`` (pure); ``None``: it may.

    Every target address must be public or of a kind some original address is: a GHES on a private network
    may send its clients to another private name of its own, a loopback test server to loopback, but a host
    on the internet can never send the controller to an address inside the cluster or to a metadata endpoint.
    """
    allowed = {AddressKind.PUBLIC, *map(address_kind, original)}
    for address in target:
        kind = address_kind(address)
        if kind not in allowed:
            return f"resolves to a {kind.value} address ({address}), and the original host is not one"
    return None


def address_kind(address: IPAddress) -> AddressKind:
    """The kind of ``address`` for the redirect rule; an IPv6 address that carries an IPv4 one to where it is
    delivered counts as that IPv4 address (:func:`_delivered_to`).

    ``PUBLIC`` only for a globally routable address: anything else that is neither loopback nor link-local is
    ``PRIVATE``, not only what Python calls private. The shared address space ``100.64.0.0/10`` (RFC 6598) is
    neither private nor global to Python, and it is where EKS (custom networking) and GKE (non-RFC 1918 ranges)
    put pods and services: an address inside the cluster.
    """
    address = _delivered_to(address)
    if address.is_loopback:
        return AddressKind.LOOPBACK
    if address.is_link_local:
        return AddressKind.LINK_LOCAL
    if (
        address.is_private
        or address.is_reserved
        or address.is_unspecified
        or address.is_multicast
        or not address.is_global
    ):
        return AddressKind.PRIVATE
    return AddressKind.PUBLIC


_NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")


def _delivered_to(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one is delivered to, when it embeds one: IPv4-mapped (``::ffff:10.0.0.1``), 6to4
    (``2002:a00:1::``, sent through a local 6to4 tunnel to 10.0.0.1) and the NAT64 well-known prefix
    (``64:ff9b::a00:1``, translated to 10.0.0.1 by the NAT64 gateway of an IPv6-only cluster, whose DNS64 gives
    every IPv4-only host, GitHub's among them, such an address). Python counts 6to4 addresses global and the NAT64
    prefix reserved whatever they carry; judged by what they carry, a 6to4 or NAT64 address of a private host is
    private, and GitHub's is public. Any other address as it is."""
    if not isinstance(address, ipaddress.IPv6Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64_WELL_KNOWN:
        return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    return address


def literal_address(host: str) -> IPAddress | None:
    """``host`` as an address when it is an address literal (``[::1]`` or ``::1``), else ``None``."""
    return _ip(host.strip("[]"))


def _ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _host(url: URL) -> str:
    """The URL's host, lower case, without a trailing dot (``api.example.`` is ``api.example``)."""
    return (url.host or "").lower().rstrip(".")


def _port(url: URL) -> int | None:
    return url.explicit_port or _DEFAULT_PORTS.get(url.scheme)


def _same_or_subdomain(origin: str, target: str) -> bool:
    """Whether ``target`` is ``origin`` or a subdomain of it. An address literal has no subdomains."""
    if not origin or not target:
        return False
    if target == origin:
        return True
    return _ip(origin) is None and target.endswith("." + origin)
