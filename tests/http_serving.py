"""A throwaway HTTP server on loopback for the tests that need odd answers over real HTTP: one aiohttp handler
answering every request, in the unit and the integration suites alike (no Kubernetes, no simulator)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def serving(
    handler: Handler, *, host: str = "127.0.0.1", port: int = 0, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[str, list[str]]]:
    """``(base URL, paths requested)`` of a server on ``host`` (an address; loopback unless told) and ``port`` (any
    free one unless told), answering every request with ``handler``; over TLS with ``ssl_context``."""
    seen: list[str] = []

    async def record(request: web.Request) -> web.StreamResponse:
        seen.append(request.path)
        return await handler(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        yield f"{'https' if ssl_context else 'http'}://{netloc}", seen
    finally:
        await runner.cleanup()
