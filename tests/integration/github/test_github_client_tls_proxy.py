"""Custom root CA and HTTP proxy (with credentials and no_proxy) against the simulated service."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest

from arc_scaleset.github import (
    ActionsClient,
    FatalError,
    PersonalAccessToken,
    ProxySettings,
    SystemInfo,
    TransportOptions,
)
from arc_scaleset.github.config_url import parse_config_url
from tests.integration.github.conftest import PAT, InstantClock, SimFactory, make_client


async def test_a_custom_root_ca_makes_the_https_service_trusted(start_sim: SimFactory) -> None:
    clock = InstantClock()
    async with start_sim(tls=True) as sim:
        assert sim.url.startswith("https://")
        async with make_client(sim, clock=clock, root_ca_pem=sim.ca_pem) as client:
            assert (await client.get_runner_group_by_name("Default")).id == 1


async def test_an_untrusted_certificate_is_fatal_and_not_retried(start_sim: SimFactory) -> None:
    clock = InstantClock()
    async with start_sim(tls=True) as sim, make_client(sim, clock=clock) as client:
        with pytest.raises(FatalError, match="TLS certificate verification failed"):
            await client.get_runner_group_by_name("Default")
    assert clock.sleeps == []


def test_a_root_ca_that_is_not_pem_is_rejected_at_construction() -> None:
    config = parse_config_url("https://github.com/org")
    with pytest.raises(ValueError, match="root CA is not a valid PEM"):
        ActionsClient(
            config,
            PersonalAccessToken(PAT),
            system_info=SystemInfo(),
            transport=TransportOptions(root_ca_pem="not a certificate"),
        )


class ForwardProxy:
    """A tiny HTTP forward proxy: one request per connection, any host sent to 127.0.0.1, heads recorded."""

    def __init__(self) -> None:
        self.heads: list[str] = []
        self.port = 0

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[ForwardProxy]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        async with server:
            yield self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            self.heads.append(head)
            request_line, *header_lines = head.split("\r\n")
            method, target, version = request_line.split(" ")
            url = urlsplit(target)
            kept = [
                line
                for line in header_lines
                if line and not line.lower().startswith(("proxy-authorization:", "connection:"))
            ]
            origin = url.path + (f"?{url.query}" if url.query else "")
            upstream_head = "\r\n".join([f"{method} {origin} {version}", *kept, "Connection: close", "", ""])
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", url.port)
            up_writer.write(upstream_head.encode("latin-1"))
            length = next(
                (int(line.split(":", 1)[1]) for line in kept if line.lower().startswith("content-length:")), 0
            )
            if length:
                up_writer.write(await reader.readexactly(length))
            await up_writer.drain()
            writer.write(await up_reader.read())
            await writer.drain()
            up_writer.close()
        finally:
            writer.close()


async def test_rest_calls_go_through_the_proxy_with_credentials_and_loopback_bypasses_it(
    start_sim: SimFactory,
) -> None:
    clock = InstantClock()
    proxy = ForwardProxy()
    async with start_sim() as sim, proxy.running():
        port = urlsplit(sim.url).port
        # A non-loopback name, so the GitHub REST calls are proxied; the sim's tenant URL is 127.0.0.1,
        # which (like Go's httpproxy) is never proxied.
        config = parse_config_url(f"http://github.proxy.test:{port}/org")
        settings = ProxySettings.from_env(
            {"http_proxy": f"http://user:pa%3Ass@127.0.0.1:{proxy.port}", "no_proxy": "other.example"}
        )
        async with ActionsClient(
            config,
            PersonalAccessToken(PAT),
            system_info=SystemInfo(),
            transport=TransportOptions(proxy=settings),
            clock=clock,
        ) as client:
            assert (await client.get_runner_group_by_name("Default")).id == 1
    request_lines = [head.split("\r\n", 1)[0] for head in proxy.heads]
    assert request_lines == [
        f"POST http://github.proxy.test:{port}/api/v3/orgs/org/actions/runners/registration-token HTTP/1.1",
        f"POST http://github.proxy.test:{port}/api/v3/actions/runner-registration HTTP/1.1",
    ]
    expected_auth = "Proxy-Authorization: Basic " + base64.b64encode(b"user:pa:ss").decode()
    assert all(expected_auth in head for head in proxy.heads)


async def test_no_proxy_sends_the_request_directly(start_sim: SimFactory) -> None:
    clock = InstantClock()
    proxy = ForwardProxy()
    async with start_sim() as sim, proxy.running():
        port = urlsplit(sim.url).port
        settings = ProxySettings(http_proxy=f"http://127.0.0.1:{proxy.port}", no_proxy="*")
        async with make_client(sim, clock=clock, proxy=settings) as client:
            assert (await client.get_runner_group_by_name("Default")).id == 1
        assert port
    assert proxy.heads == []
