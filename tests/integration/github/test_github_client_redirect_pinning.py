"""A redirect to a subdomain connects to exactly the addresses its name was checked against (docs/github.md,
"Transport and errors"): a name that answers its first look-up harmlessly and a later one with an address
inside the cluster (DNS rebinding with a zero TTL) does not lead the hop there.

A resolver of the test's plays DNS for the client's connections and its redirect checks alike; the servers
are real, on loopback addresses of the same port, so where a request lands says which answer it went by.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from arc_scaleset.github import (
    ActionsClient,
    AuthenticationStepFailed,
    FatalError,
    PersonalAccessToken,
    ProxySettings,
    SharedSessions,
    SystemInfo,
    TransientError,
    TransportOptions,
    is_transient,
    parse_config_url,
)
from arc_scaleset_lab.sim.tls import make_server_tls
from tests.http_serving import serving
from tests.integration.github.conftest import PAT, InstantClock

REGISTRATION_TOKEN = "/api/v3/orgs/org/actions/runners/registration-token"


class RebindingResolver(AbstractResolver):
    """DNS as a rebinding server plays it: a name's first look-up gets its first address, every later one its
    second. ``looked_up`` lists the names asked for, in order."""

    def __init__(self, answers: dict[str, tuple[str, str]]) -> None:
        self._answers = answers
        self.looked_up: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        name = host.lower().rstrip(".")
        if name not in self._answers:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} is not known to the test")
        first, later = self._answers[name]
        address = first if name not in self.looked_up else later
        self.looked_up.append(name)
        version = ipaddress.ip_address(address).version
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if version == 6 else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
            )
        ]

    async def close(self) -> None:
        return None


@dataclass
class Landed:
    """What one server was asked: ``(Host header, path)`` per request, and the names TLS clients sent (SNI)."""

    requests: list[tuple[str, str]] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)


@dataclass
class Servers:
    port: int
    checked: Landed
    rebound: Landed
    ca_pem: str | None
    """The CA of the checked server's certificate (the rebound server's is another: a TLS client that reached it
    would fail, but its name is recorded first)."""


@asynccontextmanager
async def two_servers(
    checked: str, rebound: str, *, redirect_to: str, tls_name: str | None = None
) -> AsyncIterator[Servers]:
    """One server on each address, on one port. The one on ``checked`` answers the registration-token request
    with a 307 to ``redirect_to`` (``{port}`` filled in), anything else with 404; the one on ``rebound`` answers
    404. With ``tls_name`` both serve TLS, with a certificate for that name, localhost and 127.0.0.1."""
    landed = {checked: Landed(), rebound: Landed()}
    port = 0
    ca_pems: list[str] = []

    def tls(address: str) -> ssl.SSLContext | None:
        if tls_name is None:
            return None
        context, ca_pem = make_server_tls(tls_name)
        context.sni_callback = lambda _, name, __: landed[address].server_names.append(name)
        ca_pems.append(ca_pem)
        return context

    def handler(address: str) -> web.Handler:
        async def answer(request: web.Request) -> web.StreamResponse:
            landed[address].requests.append((request.host, request.path))
            if address == checked and request.path == REGISTRATION_TOKEN:
                raise web.HTTPTemporaryRedirect(redirect_to.format(port=port))
            return web.json_response({"message": "Not Found"}, status=404)

        return answer

    async with serving(handler(checked), host=checked, ssl_context=tls(checked)) as (base, _):
        port = URL(base).port or 0
        async with serving(handler(rebound), host=rebound, port=port, ssl_context=tls(rebound)):
            yield Servers(port, landed[checked], landed[rebound], ca_pems[0] if ca_pems else None)


def client(
    config_url: str,
    shared: SharedSessions,
    ca_pem: str | None = None,
    proxy: ProxySettings | None = None,
    *,
    request_timeout: float = 10.0,
) -> ActionsClient:
    """A PAT client on ``shared`` sessions (whose resolver plays DNS), making one attempt per request."""
    return ActionsClient(
        parse_config_url(config_url),
        PersonalAccessToken(PAT),
        system_info=SystemInfo(subsystem="contract-test"),
        transport=TransportOptions(request_timeout=request_timeout, retry_max=0, root_ca_pem=ca_pem, proxy=proxy),
        clock=InstantClock(),
        shared_sessions=shared,
    )


@asynccontextmanager
async def sessions(resolver: AbstractResolver) -> AsyncIterator[SharedSessions]:
    shared = SharedSessions(resolver=resolver)
    try:
        yield shared
    finally:
        await shared.aclose()


@pytest.mark.parametrize(("checked", "rebound"), [("127.0.0.1", "127.0.0.2"), ("::1", "127.0.0.1")])
async def test_a_hop_to_a_subdomain_goes_to_the_address_checked_not_to_what_the_name_answers_next(
    checked: str, rebound: str
) -> None:
    resolver = RebindingResolver({"ghes.test": (checked, checked), "api.ghes.test": (checked, rebound)})
    async with (
        sessions(resolver) as shared,
        two_servers(checked, rebound, redirect_to="http://api.ghes.test:{port}/moved") as servers,
        client(f"http://ghes.test:{servers.port}/org", shared) as github,
    ):
        with pytest.raises(AuthenticationStepFailed):
            await github.get_runner_group_by_name("Default")
    port = servers.port
    assert servers.checked.requests == [(f"ghes.test:{port}", REGISTRATION_TOKEN), (f"api.ghes.test:{port}", "/moved")]
    assert servers.rebound.requests == []
    assert resolver.looked_up.count("api.ghes.test") == 1, "looked up for the check, never again for the connection"


async def test_a_pinned_hop_leaves_no_connection_behind_for_a_later_request_that_looks_the_name_up_itself() -> None:
    """The pool is not bypassed the other way round either: a client whose own config URL names the subdomain
    connects where its own look-up says (here the second answer), not over the hop's connection."""
    resolver = RebindingResolver({"ghes.test": ("127.0.0.1",) * 2, "api.ghes.test": ("127.0.0.1", "127.0.0.2")})
    async with (
        sessions(resolver) as shared,
        two_servers("127.0.0.1", "127.0.0.2", redirect_to="http://api.ghes.test:{port}/moved") as servers,
    ):
        async with client(f"http://ghes.test:{servers.port}/org", shared) as github:
            with pytest.raises(AuthenticationStepFailed):
                await github.get_runner_group_by_name("Default")
        async with client(f"http://api.ghes.test:{servers.port}/org", shared) as github:
            with pytest.raises(AuthenticationStepFailed):
                await github.get_runner_group_by_name("Default")
    assert servers.checked.requests[-1] == (f"api.ghes.test:{servers.port}", "/moved")
    assert servers.rebound.requests == [(f"api.ghes.test:{servers.port}", REGISTRATION_TOKEN)]


async def test_a_hop_to_a_subdomain_resolving_to_the_metadata_endpoint_is_refused_before_anything_is_sent() -> None:
    resolver = RebindingResolver({"ghes.test": ("127.0.0.1",) * 2, "meta.ghes.test": ("169.254.169.254",) * 2})
    async with (
        sessions(resolver) as shared,
        two_servers("127.0.0.1", "127.0.0.2", redirect_to="http://meta.ghes.test:{port}/moved") as servers,
        client(f"http://ghes.test:{servers.port}/org", shared) as github,
    ):
        with pytest.raises(FatalError) as caught:
            await github.get_runner_group_by_name("Default")
    assert "redirected to meta.ghes.test, which resolves to a link-local address (169.254.169.254)" in str(caught.value)
    assert not is_transient(caught.value)
    assert servers.checked.requests == [(f"ghes.test:{servers.port}", REGISTRATION_TOKEN)]


async def test_a_hop_to_a_subdomain_resolving_into_the_shared_address_space_of_pod_networks_is_refused() -> None:
    # 100.64.0.0/10 is where EKS (custom networking) and GKE put pods and services: inside the cluster, though
    # Python does not call it private. The original host here is loopback, so only loopback or public may follow.
    resolver = RebindingResolver({"ghes.test": ("127.0.0.1",) * 2, "pods.ghes.test": ("100.64.0.10",) * 2})
    async with (
        sessions(resolver) as shared,
        two_servers("127.0.0.1", "127.0.0.2", redirect_to="http://pods.ghes.test:{port}/moved") as servers,
        client(f"http://ghes.test:{servers.port}/org", shared, request_timeout=3.0) as github,
    ):
        with pytest.raises(FatalError) as caught:
            await github.get_runner_group_by_name("Default")
    assert "redirected to pods.ghes.test, which resolves to a private address (100.64.0.10)" in str(caught.value)
    assert not is_transient(caught.value)
    assert servers.checked.requests == [(f"ghes.test:{servers.port}", REGISTRATION_TOKEN)]


async def test_a_pinned_https_hop_sends_the_name_and_gets_its_certificate_checked_for_it() -> None:
    resolver = RebindingResolver({"localhost": ("127.0.0.1",) * 2, "api.localhost": ("127.0.0.1", "127.0.0.2")})
    async with (
        sessions(resolver) as shared,
        two_servers(
            "127.0.0.1", "127.0.0.2", redirect_to="https://api.localhost:{port}/moved", tls_name="api.localhost"
        ) as servers,
        client(f"https://localhost:{servers.port}/org", shared, servers.ca_pem) as github,
    ):
        with pytest.raises(AuthenticationStepFailed):
            await github.get_runner_group_by_name("Default")
    port = servers.port
    assert servers.checked.requests == [(f"localhost:{port}", REGISTRATION_TOKEN), (f"api.localhost:{port}", "/moved")]
    assert servers.checked.server_names == ["localhost", "api.localhost"]
    assert servers.rebound.requests == servers.rebound.server_names == []


async def test_a_pinned_https_hop_to_a_name_the_certificate_lacks_fails_though_it_covers_the_address() -> None:
    """The certificate names localhost, 127.0.0.1 and api.localhost: other.localhost, pinned to 127.0.0.1, must
    fail, or TLS would be checking the address the hop connected to instead of the name it asked for."""
    resolver = RebindingResolver({"localhost": ("127.0.0.1",) * 2, "other.localhost": ("127.0.0.1",) * 2})
    async with (
        sessions(resolver) as shared,
        two_servers(
            "127.0.0.1", "127.0.0.2", redirect_to="https://other.localhost:{port}/moved", tls_name="api.localhost"
        ) as servers,
        client(f"https://localhost:{servers.port}/org", shared, servers.ca_pem) as github,
    ):
        with pytest.raises(FatalError, match="TLS certificate verification failed") as caught:
            await github.get_runner_group_by_name("Default")
    assert not is_transient(caught.value)
    assert servers.checked.server_names == ["localhost", "other.localhost"]
    assert servers.checked.requests == [(f"localhost:{servers.port}", REGISTRATION_TOKEN)]


async def test_sent_directly_a_hop_to_a_subdomain_that_cannot_be_looked_up_fails_like_an_unreachable_host() -> None:
    resolver = RebindingResolver({"ghes.test": ("127.0.0.1",) * 2})
    async with (
        sessions(resolver) as shared,
        two_servers("127.0.0.1", "127.0.0.2", redirect_to="http://api.ghes.test:{port}/moved") as servers,
        client(f"http://ghes.test:{servers.port}/org", shared) as github,
    ):
        with pytest.raises(TransientError, match="the redirect's check found no address to connect to"):
            await github.get_runner_group_by_name("Default")
    assert servers.checked.requests == [(f"ghes.test:{servers.port}", REGISTRATION_TOKEN)]
    assert servers.rebound.requests == []


class HangingResolver(RebindingResolver):
    """DNS that never answers for the names in ``hangs`` (a resolver stuck on an unreachable name server)."""

    def __init__(self, answers: dict[str, tuple[str, str]], *, hangs: set[str]) -> None:
        super().__init__(answers)
        self._hangs = hangs

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host.lower().rstrip(".") in self._hangs:
            await asyncio.Event().wait()
        return await super().resolve(host, port, family)


async def test_a_hop_whose_name_never_resolves_fails_within_the_request_timeout_instead_of_hanging() -> None:
    resolver = HangingResolver({"ghes.test": ("127.0.0.1",) * 2}, hangs={"api.ghes.test"})
    async with (
        sessions(resolver) as shared,
        two_servers("127.0.0.1", "127.0.0.2", redirect_to="http://api.ghes.test:{port}/moved") as servers,
        client(f"http://ghes.test:{servers.port}/org", shared, request_timeout=0.5) as github,
    ):
        with pytest.raises(TransientError, match="the redirect's check found no address to connect to"):
            # The bound only keeps a regression from hanging the suite; the client gives up after 0.5 s.
            await asyncio.wait_for(github.get_runner_group_by_name("Default"), timeout=60)
    assert servers.rebound.requests == []


async def test_through_a_proxy_the_hop_is_not_pinned_and_the_proxy_resolves_the_name() -> None:
    """The controller cannot look the subdomain up (only the proxy can, as behind many corporate proxies): the
    check finds no address to refuse, and the hop goes to the proxy by name."""
    arrived: list[tuple[str, str]] = []

    async def proxy_and_ghes(request: web.Request) -> web.StreamResponse:
        arrived.append((request.host, request.path))
        if request.path == REGISTRATION_TOKEN:
            raise web.HTTPTemporaryRedirect("http://api.ghes.test/moved")
        return web.json_response({"message": "Not Found"}, status=404)

    resolver = RebindingResolver({"ghes.test": ("127.0.0.1",) * 2})
    async with (
        sessions(resolver) as shared,
        serving(proxy_and_ghes) as (proxy, _),
        client("http://ghes.test/org", shared, proxy=ProxySettings(http_proxy=proxy)) as github,
    ):
        with pytest.raises(AuthenticationStepFailed):
            await github.get_runner_group_by_name("Default")
    assert arrived == [("ghes.test", REGISTRATION_TOKEN), ("api.ghes.test", "/moved")]
