"""The HTTP endpoint for Prometheus metrics and the ``/healthz`` / ``/readyz`` probes (aiohttp).

Both processes serve one: the controller on ``--metrics-addr`` (probes on the same listener, or on
``--health-probe-bind-address`` through a second server with an empty registry), the listener on its
config's ``metrics_addr`` / ``metrics_endpoint``. Addresses use Go's ``host:port`` form: ``":8080"`` (all
interfaces), ``"127.0.0.1:8080"``, ``"[::1]:8080"``; ``"0"`` or ``""`` disables the server, as
ARC's ``--metrics-addr=0`` does. Port ``0`` binds a free port (tests read it from :attr:`MetricsServer.port`).

A health check is a plain callable run on every probe request, so it must be cheap and must not block.
It passes by returning ``None``, ``True`` or ``""``; it fails by returning ``False`` or a non-empty reason
string, or by raising. A probe answers 200 ``ok`` when all its checks pass, else 500 with one line per
check (``[+]name ok`` / ``[-]name failed: reason``), in the style of controller-runtime's probes.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from arc_scaleset.observability.logging import get_logger, redact

__all__ = ["HealthCheck", "MetricsServer", "parse_bind_address", "serve_metrics", "verdict_check"]

HealthCheck = Callable[[], bool | str | None]


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

    def __init__(self, runner: web.AppRunner, *, host: str, port: int, path: str) -> None:
        self._runner = runner
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
        await self._runner.cleanup()


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

    async def metrics(request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encoder(registry), headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_get(path, metrics)
    app.router.add_get("/healthz", _probe_handler("healthz", health_checks))
    app.router.add_get("/readyz", _probe_handler("readyz", readiness))

    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host or None, port)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound_port = _bound_port(runner, default=port)
    _log.info("metrics server listening", address=address, port=bound_port, path=path)
    return MetricsServer(runner, host=host, port=bound_port, path=path)


def _bound_port(runner: web.AppRunner, *, default: int) -> int:
    for sockaddr in runner.addresses:
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


def _probe_handler(
    probe: str, checks: Mapping[str, HealthCheck]
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.Response:
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
            return web.Response(status=500, text="\n".join(lines) + "\n")
        if "verbose" in request.query:
            lines.append(f"{probe} check passed")
            return web.Response(text="\n".join(lines) + "\n")
        return web.Response(text="ok")

    return handle
