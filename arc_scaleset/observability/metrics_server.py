"""The HTTP endpoint for Prometheus metrics and the ``/healthz`` / ``/readyz`` probes (aiohttp's HTTP server).

Both processes serve one: the controller on ``--metrics-addr`` (probes on the same listener, or on
``--health-probe-bind-address`` through a second server with an empty registry), the listener on its
config's ``metrics_addr`` / ``metrics_endpoint``. Addresses use Go's ``host:port`` form: ``":8080"`` (all
interfaces), ``"127.0.0.1:8080"``, ``"[::1]:8080"``; ``"0"`` or ``""`` disables the server, as
ARC's ``--metrics-addr=0`` does. Port ``0`` binds a free port (tests read it from :attr:`MetricsServer.port`).

A health check is a plain callable run on every probe request, so it must be cheap and must not block.
It passes by returning ``None``, ``True`` or ``""``; it fails by returning ``False`` or a non-empty reason
string, or by raising. A probe answers 200 ``ok`` when all its checks pass, else 500 with one line per
check (``[+]name ok`` / ``[-]name failed: reason``), in the style of controller-runtime's probes.

The three paths are served by aiohttp's low-level server (its HTTP protocol, parser and responses) with a
dispatch of our own that answers as ``aiohttp.web``'s router did: GET and HEAD on a path, 405 for another
method, 404 elsewhere. ``aiohttp.web`` (applications, routers, sites, file responses, websockets) is never
imported: it added about 1.1 MB to each process (bench/README.md, issue 30).
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from aiohttp.web_request import BaseRequest
from aiohttp.web_response import Response
from aiohttp.web_server import Server
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from arc_scaleset.observability.logging import get_logger, redact

__all__ = ["HealthCheck", "MetricsServer", "parse_bind_address", "serve_metrics", "verdict_check"]

HealthCheck = Callable[[], bool | str | None]
Handler = Callable[[BaseRequest], Awaitable[Response]]

SHUTDOWN_TIMEOUT: Final = 5.0
"""Seconds :meth:`MetricsServer.close` gives in-flight requests (a scrape) to finish."""
_READ_METHODS: Final = frozenset({"GET", "HEAD"})


def verdict_check(verdict: Callable[[], tuple[bool, str]]) -> HealthCheck:
    """A probe check from a health verdict ``(ok, why)``: ``None`` (pass) when ok, else ``why``."""

    def check() -> str | None:
        ok, why = verdict()
        return None if ok else why

    return check


_log = get_logger(__name__)
_NO_CHECKS: Final[Mapping[str, HealthCheck]] = {}


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """``"host:port"`` to ``(host, port)``; ``None`` when the address disables the server (``"0"``, ``""``).

    An empty host (``":8080"``) is returned as ``""``: every interface. IPv6 hosts come bracketed
    (``"[::1]:8080"``) and are returned bare. Raises ``ValueError`` with the reason for anything else.
    """
    text = address.strip()
    if text in ("", "0"):
        return None
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise ValueError(f"invalid bind address {address!r}: expected host:port, :port, or 0 to disable")
    if host.startswith("["):
        if not host.endswith("]"):
            raise ValueError(f"invalid bind address {address!r}: unbalanced brackets around the host")
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError as err:
            raise ValueError(f"invalid bind address {address!r}: {host!r} is not an IPv6 address") from err
    elif ":" in host:
        raise ValueError(f"invalid bind address {address!r}: write an IPv6 host in brackets, as [::1]:8080")
    if not port_text.isascii() or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"invalid bind address {address!r}: port must be a number from 0 to 65535")
    return host, int(port_text)


class MetricsServer:
    """A running metrics/probe server. Stop it with :meth:`close`."""

    def __init__(self, listener: asyncio.Server, server: Server, *, host: str, port: int, path: str) -> None:
        self._listener = listener
        self._server = server
        self.host = host
        self.port = port
        self.path = path

    @property
    def url(self) -> str:
        """The metrics URL, with a loopback host when the server listens on every interface."""
        host = self.host or "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}{self.path}"

    async def close(self) -> None:
        """Stop listening and finish in-flight requests. Safe to call twice."""
        self._listener.close()
        # Requests that arrived before the close have started (their handlers hold them); idle connections go.
        await asyncio.sleep(0)
        self._server.pre_shutdown()
        await self._server.shutdown(SHUTDOWN_TIMEOUT)
        await self._listener.wait_closed()


async def serve_metrics(
    *,
    address: str,
    path: str = "/metrics",
    registry: CollectorRegistry,
    health_checks: Mapping[str, HealthCheck] = _NO_CHECKS,
    ready_checks: Mapping[str, HealthCheck] | None = None,
) -> MetricsServer | None:
    """Serve ``registry`` at ``path`` and the probes at ``/healthz`` and ``/readyz`` on ``address``.

    Returns ``None`` without binding anything when ``address`` disables the server. ``/healthz`` runs
    ``health_checks``; ``/readyz`` runs ``ready_checks``, or the health checks when that is ``None``.
    Raises ``ValueError`` for a malformed address or path, ``OSError`` when the port cannot be bound.
    """
    bind = parse_bind_address(address)
    if bind is None:
        return None
    if not path.startswith("/") or path in ("/healthz", "/readyz"):
        raise ValueError(f"invalid metrics path {path!r}: must start with / and not be a probe path")
    host, port = bind
    readiness = health_checks if ready_checks is None else ready_checks

    async def metrics(request: BaseRequest) -> Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return Response(body=encoder(registry), headers={"Content-Type": content_type})

    routes: dict[str, Handler] = {
        path: metrics,
        "/healthz": _probe_handler("healthz", health_checks),
        "/readyz": _probe_handler("readyz", readiness),
    }
    server = Server(_dispatch(routes), access_log=None)
    listener = await asyncio.get_running_loop().create_server(server, host or None, port)
    bound_port = _bound_port(listener, default=port)
    _log.info("metrics server listening", address=address, port=bound_port, path=path)
    return MetricsServer(listener, server, host=host, port=bound_port, path=path)


def _dispatch(routes: Mapping[str, Handler]) -> Handler:
    """The server's one handler: ``routes[path]`` for GET and HEAD (aiohttp leaves out a HEAD answer's body),
    ``405`` with ``Allow`` for another method on a known path, ``404`` for any other path."""

    async def dispatch(request: BaseRequest) -> Response:
        handler = routes.get(request.path)
        if handler is None:
            return Response(status=404, text="404: Not Found")
        if request.method not in _READ_METHODS:
            return Response(status=405, text="405: Method Not Allowed", headers={"Allow": "GET,HEAD"})
        return await handler(request)

    return dispatch


def _bound_port(listener: asyncio.Server, *, default: int) -> int:
    for socket in listener.sockets:
        sockaddr = socket.getsockname()
        if isinstance(sockaddr, tuple) and len(sockaddr) >= 2 and isinstance(sockaddr[1], int):
            return sockaddr[1]
    return default


def _run_check(check: HealthCheck) -> str | None:
    """``None`` when the check passes, else the reason it fails (never a secret: the text is redacted)."""
    try:
        outcome = check()
    except Exception as err:  # a broken check is a failing check, not a broken probe endpoint
        return redact(f"check raised {type(err).__name__}: {err}")
    if outcome is None or outcome is True or outcome == "":
        return None
    if outcome is False:
        return "check failed"
    return redact(str(outcome))


def _probe_handler(probe: str, checks: Mapping[str, HealthCheck]) -> Handler:
    async def handle(request: BaseRequest) -> Response:
        lines: list[str] = []
        failed = False
        for name, check in checks.items():
            reason = _run_check(check)
            if reason is None:
                lines.append(f"[+]{name} ok")
            else:
                failed = True
                lines.append(f"[-]{name} failed: {reason}")
        if failed:
            lines.append(f"{probe} check failed")
            return Response(status=500, text="\n".join(lines) + "\n")
        if "verbose" in request.query:
            lines.append(f"{probe} check passed")
            return Response(text="\n".join(lines) + "\n")
        return Response(text="ok")

    return handle
