"""HTTP(S) proxy selection with the semantics of Go's ``golang.org/x/net/http/httpproxy`` (what ARC uses).

:meth:`ProxySettings.from_env` reads ``HTTP_PROXY``/``http_proxy``, ``HTTPS_PROXY``/``https_proxy`` and
``NO_PROXY``/``no_proxy`` (upper case first); :meth:`ProxySettings.proxy_for` picks the proxy for one URL:

- the proxy is chosen by the *request's* scheme (https → ``https_proxy``, http → ``http_proxy``);
- ``localhost`` and loopback IPs are never proxied;
- ``no_proxy`` is a comma-separated list of ``*`` (nothing is proxied), IPs, CIDRs, and domain names with an
  optional port: ``example.com`` matches it and its subdomains, ``.example.com`` and ``*.example.com`` only
  its subdomains;
- a proxy URL without a scheme means ``http://``; its user info becomes a ``Proxy-Authorization`` header.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp

_DEFAULT_PORTS = {"http": "80", "https": "443"}


@dataclass(frozen=True, slots=True)
class ProxyChoice:
    """The proxy for one request: its URL without credentials, and the headers for the proxy (credentials)."""

    url: str
    headers: dict[str, str]

    def __repr__(self) -> str:
        return f"ProxyChoice(url={self.url!r}, headers={'***' if self.headers else {}})"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxySettings:
    """Proxy configuration. Proxy URLs may carry credentials, so ``repr`` masks their user info."""

    http_proxy: str = ""
    https_proxy: str = ""
    no_proxy: str = ""
    # Under CGI, HTTP_PROXY may have come from a client's "Proxy:" header (httpoxy): ignore it for http.
    cgi: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ProxySettings:
        def first(*names: str) -> str:
            for name in names:
                if environ.get(name):
                    return environ[name]
            return ""

        return cls(
            http_proxy=first("HTTP_PROXY", "http_proxy"),
            https_proxy=first("HTTPS_PROXY", "https_proxy"),
            no_proxy=first("NO_PROXY", "no_proxy"),
            cgi=bool(environ.get("REQUEST_METHOD")),
        )

    def __repr__(self) -> str:
        return (
            f"ProxySettings(http_proxy={_mask(self.http_proxy)!r}, https_proxy={_mask(self.https_proxy)!r}, "
            f"no_proxy={self.no_proxy!r})"
        )

    def secret_values(self) -> list[str]:
        """The credentials the proxy URLs carry, in every form a text could show them (for redaction)."""
        return [*proxy_url_secrets(self.http_proxy), *proxy_url_secrets(self.https_proxy)]

    def proxy_for(self, url: str) -> ProxyChoice | None:
        """The proxy to use for ``url``, or ``None`` to connect directly."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme == "https":
            proxy = self.https_proxy
        elif scheme == "http" and not self.cgi:
            proxy = self.http_proxy
        else:
            return None
        if not proxy:
            return None
        host = (parts.hostname or "").lower()
        port = str(parts.port) if parts.port is not None else _DEFAULT_PORTS.get(scheme, "")
        if not self._use_proxy(host, port):
            return None
        return _parse_proxy(proxy)

    def _use_proxy(self, host: str, port: str) -> bool:
        if not host:
            return True
        if host == "localhost":
            return False
        ip = _parse_ip(host)
        if ip is not None and ip.is_loopback:
            return False
        for raw in self.no_proxy.split(","):
            entry = raw.strip().lower()
            if not entry:
                continue
            if entry == "*":
                return False
            if "/" in entry:
                try:
                    network = ipaddress.ip_network(entry, strict=False)
                except ValueError:
                    continue
                if ip is not None and ip in network:
                    return False
                continue
            entry_host, entry_port = _split_host_port(entry)
            entry_ip = _parse_ip(entry_host)
            if entry_ip is not None:
                if ip is not None and ip == entry_ip and entry_port in ("", port):
                    return False
                continue
            if entry_port not in ("", port):
                continue
            if entry_host.startswith("*."):
                entry_host = entry_host[1:]
            if entry_host.startswith("."):
                if host.endswith(entry_host):
                    return False
            elif host == entry_host or host.endswith("." + entry_host):
                return False
        return True


def proxy_url_secrets(proxy: str) -> list[str]:
    """The password of ``proxy``'s user information as written (percent-encoded) and decoded, and the
    ``Proxy-Authorization`` value made of it; none without a password."""
    if "://" not in proxy:
        proxy = "http://" + proxy
    try:
        parts = urlsplit(proxy)
        password = parts.password
    except ValueError:
        return []
    if not password:
        return []
    basic = aiohttp.encode_basic_auth(unquote(parts.username or ""), unquote(password))
    return [password, unquote(password), basic.partition(" ")[2]]


def _parse_proxy(proxy: str) -> ProxyChoice:
    if "://" not in proxy:
        proxy = "http://" + proxy
    parts = urlsplit(proxy)
    headers = {}
    if parts.username is not None:
        credentials = aiohttp.encode_basic_auth(unquote(parts.username), unquote(parts.password or ""))
        headers["Proxy-Authorization"] = credentials
    netloc = parts.netloc.rpartition("@")[2]
    return ProxyChoice(url=urlunsplit((parts.scheme, netloc, parts.path, "", "")), headers=headers)


def _split_host_port(entry: str) -> tuple[str, str]:
    if entry.startswith("["):  # [::1]:8080
        host, _, rest = entry[1:].partition("]")
        return host, rest.removeprefix(":")
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, port
    return entry, ""  # a bare IPv6 address or a plain host


def _parse_ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _mask(proxy_url: str) -> str:
    if "@" not in proxy_url:
        return proxy_url
    scheme, sep, rest = proxy_url.partition("://")
    if not sep:
        scheme, rest = "", proxy_url
    return f"{scheme}{sep}***@{rest.rpartition('@')[2]}"
