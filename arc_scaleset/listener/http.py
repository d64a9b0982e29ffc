"""The listener's HTTP endpoint: Prometheus metrics on the configured path, ``/healthz`` and ``/readyz``.

Served on ``metrics_addr`` (Go's ``host:port`` form; ``:8080`` means every interface) when metrics are
enabled, and/or on a separate probe address. Each probe answers 200 or 503 with a one-line reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from arc_scaleset.listener.health import Health


def split_address(address: str) -> tuple[str, int]:
    """``(host, port)`` from Go's ``host:port`` (``:8080`` → every interface; ``[::1]:9`` for IPv6)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"invalid listen address {address!r}: expected host:port, e.g. ':8080'")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


@dataclass
class HttpEndpoint:
    """A running endpoint; :attr:`port` is the bound port (useful with port 0)."""

    runner: web.AppRunner
    port: int

    async def stop(self) -> None:
        await self.runner.cleanup()


def _probe(check: Callable[[], tuple[bool, str]]) -> Callable[[web.Request], web.Response]:
    def handler(_: web.Request) -> web.Response:
        ok, reason = check()
        return web.Response(status=200 if ok else 503, text=reason + "\n")

    return handler


async def serve(
    *, address: str, health: Health, registry: CollectorRegistry | None = None, metrics_path: str = "/metrics"
) -> HttpEndpoint:
    """Start serving probes (always) and metrics (when ``registry`` is given) on ``address``."""
    host, port = split_address(address)
    app = web.Application()

    async def healthz(request: web.Request) -> web.Response:
        return _probe(health.live)(request)

    async def readyz(request: web.Request) -> web.Response:
        return _probe(health.ready)(request)

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    if registry is not None:
        metrics_registry = registry

        async def metrics(_: web.Request) -> web.Response:
            body = generate_latest(metrics_registry)
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

        app.router.add_get(metrics_path or "/metrics", metrics)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    return HttpEndpoint(runner=runner, port=int(bound))
