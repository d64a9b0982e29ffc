"""A proxy's password never reaches a client's error text, however the proxy echoes it (issue 26): the client
masks the credentials of its own proxy URLs. A loopback server plays the proxy."""

from __future__ import annotations

import secrets

import pytest
from aiohttp import web

from arc_scaleset.github import ActionsError, ProxySettings
from tests.http_serving import serving
from tests.integration.github.conftest import client_for


async def test_a_proxy_that_echoes_its_credentials_gets_them_masked_in_the_error() -> None:
    password = "pr0xy-" + secrets.token_hex(8)  # shaped like no known credential: only the client can know it
    echoed: list[str] = []

    async def proxy(request: web.Request) -> web.StreamResponse:
        header = request.headers.get("Proxy-Authorization", "")
        echoed.append(header)
        message = f"user ops with password {password} may not reach {request.url.host}; you sent {header.split()[-1]}"
        return web.json_response({"message": message}, status=403)

    async with serving(proxy) as (proxy_base, _):
        # The GitHub host is not on loopback (loopback is never proxied); the proxy answers for it.
        settings = ProxySettings(http_proxy=proxy_base.replace("http://", f"http://ops:{password}@"))
        async with client_for("http://ghes.example", proxy=settings, retry_max=0) as client:
            with pytest.raises(ActionsError) as caught:
                await client.get_runner_group_by_name("Default")
    assert echoed, "the request went through the proxy with its credentials"
    text = str(caught.value)
    assert "user ops with password [REDACTED]" in text
    assert password not in text
    assert echoed[0].split()[-1] not in text
