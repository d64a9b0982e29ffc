"""What a redirect to a subdomain costs the GitHub transport, against a redirect that stays on the host.

Each request goes to a loopback server that answers 307, either to a path on the same host or to the same path
on a subdomain (``api.<host>``, which this script's event loop resolves to 127.0.0.1: a name the system cannot
look up); the redirected request is answered 200. Requests are sent one after another, over http and over https
(a certificate for the subdomain, localhost and 127.0.0.1), and the mean milliseconds per request are printed.

    PYTHONPATH=$PWD .venv/bin/python bench/bench_redirect_hop.py --requests 300
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import time
from typing import Any

from aiohttp import web

from arc_scaleset.github import TransportOptions
from arc_scaleset.github._transport import HttpTransport
from arc_scaleset_lab.sim.tls import make_server_tls

SUBDOMAIN = "api.localhost"


class _Loop(asyncio.SelectorEventLoop):
    """Resolves :data:`SUBDOMAIN` to loopback; every other name as the system does."""

    async def getaddrinfo(self, host: Any, port: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.rstrip(".") == SUBDOMAIN:
            host = "127.0.0.1"
            kwargs["family"] = socket.AF_INET
        return await super().getaddrinfo(host, port, **kwargs)


async def _serve(tls: bool) -> tuple[web.AppRunner, int, str | None]:
    async def answer(request: web.Request) -> web.StreamResponse:
        if request.path == "/same":
            raise web.HTTPTemporaryRedirect("/done")
        if request.path == "/sub":
            raise web.HTTPTemporaryRedirect(f"{request.scheme}://{SUBDOMAIN}:{request.url.port}/done")
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    context, ca_pem = make_server_tls(SUBDOMAIN) if tls else (None, None)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port, ca_pem


async def _run(requests: int) -> None:
    for tls in (False, True):
        runner, port, ca_pem = await _serve(tls)
        scheme = "https" if tls else "http"
        try:
            for path in ("same", "sub"):
                transport = HttpTransport(TransportOptions(root_ca_pem=ca_pem, retry_max=0))
                url = f"{scheme}://localhost:{port}/{path}"
                await transport.request("GET", url, headers={}, expected={200})  # a warm pool for both
                started = time.perf_counter()
                for _ in range(requests):
                    await transport.request("GET", url, headers={}, expected={200})
                seconds = time.perf_counter() - started
                await transport.aclose()
                hop = "same host" if path == "same" else "subdomain"
                print(f"{scheme:5} redirect to {hop:9}: {seconds / requests * 1000:.2f} ms per request")
        finally:
            await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="requests per case (default: %(default)s)")
    args = parser.parse_args()
    loop = _Loop()
    try:
        loop.run_until_complete(_run(args.requests))
    finally:
        loop.close()


if __name__ == "__main__":
    main()
