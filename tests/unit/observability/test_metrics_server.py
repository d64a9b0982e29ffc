"""The metrics server serves a private registry and health probes over real HTTP on loopback."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge

from arc_scaleset.observability.logging import register_secret, unregister_secret
from arc_scaleset.observability.metrics_server import MetricsServer, parse_bind_address, serve_metrics

TIMEOUT = aiohttp.ClientTimeout(total=10)


@pytest.fixture
def registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    counter = Counter("gha_started_jobs", "Jobs started.", ["repository"], registry=registry)
    counter.labels(repository="octo/hello").inc(3)
    Gauge("gha_desired_runners", "Desired runners.", registry=registry).set(7)
    return registry


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=TIMEOUT) as client:
        yield client


async def _serve(**options: object) -> MetricsServer:
    server = await serve_metrics(address="127.0.0.1:0", **options)  # type: ignore[arg-type]
    assert server is not None
    return server


async def test_metrics_endpoint_exposes_the_registry(
    registry: CollectorRegistry, session: aiohttp.ClientSession
) -> None:
    server = await _serve(registry=registry)
    try:
        assert server.port > 0
        async with session.get(f"http://127.0.0.1:{server.port}/metrics") as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain")
            body = await response.text()
        assert 'gha_started_jobs_total{repository="octo/hello"} 3.0' in body
        assert "gha_desired_runners 7.0" in body
    finally:
        await server.close()


async def test_metrics_path_is_configurable_and_openmetrics_is_negotiated(
    registry: CollectorRegistry, session: aiohttp.ClientSession
) -> None:
    server = await _serve(registry=registry, path="/custom")
    try:
        assert server.url == f"http://127.0.0.1:{server.port}/custom"
        async with session.get(server.url, headers={"Accept": "application/openmetrics-text; version=1.0.0"}) as rsp:
            assert rsp.status == 200
            assert rsp.headers["Content-Type"].startswith("application/openmetrics-text")
            assert (await rsp.text()).rstrip().endswith("# EOF")
        async with session.get(f"http://127.0.0.1:{server.port}/metrics") as response:
            assert response.status == 404
    finally:
        await server.close()


async def test_probes_answer_ok_when_every_check_passes(
    registry: CollectorRegistry, session: aiohttp.ClientSession
) -> None:
    checks: dict[str, Callable[[], bool | str | None]] = {
        "ping": lambda: None,
        "leader": lambda: True,
        "cache": lambda: "",
    }
    server = await _serve(registry=registry, health_checks=checks)
    try:
        for probe in ("healthz", "readyz"):
            async with session.get(f"http://127.0.0.1:{server.port}/{probe}") as response:
                assert response.status == 200
                assert await response.text() == "ok"
        async with session.get(f"http://127.0.0.1:{server.port}/healthz?verbose") as response:
            assert await response.text() == "[+]ping ok\n[+]leader ok\n[+]cache ok\nhealthz check passed\n"
    finally:
        await server.close()


async def test_probes_answer_500_with_the_failing_checks_reason(
    registry: CollectorRegistry, session: aiohttp.ClientSession
) -> None:
    synced = False

    def cache_synced() -> str | None:
        return None if synced else "informers have not synced"

    server = await _serve(registry=registry, health_checks={"ping": lambda: True, "cache": cache_synced})
    try:
        async with session.get(f"http://127.0.0.1:{server.port}/healthz") as response:
            assert response.status == 500
            body = await response.text()
        assert "[+]ping ok" in body
        assert "[-]cache failed: informers have not synced" in body
        synced = True
        async with session.get(f"http://127.0.0.1:{server.port}/healthz") as response:
            assert response.status == 200
    finally:
        await server.close()


async def test_readiness_can_have_its_own_checks(registry: CollectorRegistry, session: aiohttp.ClientSession) -> None:
    server = await _serve(
        registry=registry, health_checks={"ping": lambda: True}, ready_checks={"leader": lambda: False}
    )
    try:
        async with session.get(f"http://127.0.0.1:{server.port}/healthz") as response:
            assert response.status == 200
        async with session.get(f"http://127.0.0.1:{server.port}/readyz") as response:
            assert response.status == 500
            assert "[-]leader failed: check failed" in await response.text()
    finally:
        await server.close()


async def test_a_raising_check_fails_the_probe_without_leaking_secrets(
    registry: CollectorRegistry, session: aiohttp.ClientSession
) -> None:
    token = "tok-" + secrets.token_hex(12)
    register_secret(token)

    def broken() -> bool:
        raise RuntimeError(f"cannot reach GitHub with {token}")

    server = await _serve(registry=registry, health_checks={"github": broken})
    try:
        async with session.get(f"http://127.0.0.1:{server.port}/healthz") as response:
            assert response.status == 500
            body = await response.text()
        assert "[-]github failed: check raised RuntimeError: cannot reach GitHub with [REDACTED]" in body
        assert token not in body
    finally:
        await server.close()
        unregister_secret(token)


async def test_close_stops_listening(registry: CollectorRegistry, session: aiohttp.ClientSession) -> None:
    server = await _serve(registry=registry)
    url = server.url
    await server.close()
    with pytest.raises(aiohttp.ClientConnectionError):
        async with session.get(url):
            pass
    await server.close()  # a second close is harmless


@pytest.mark.parametrize("address", ["0", "", "  "])
async def test_disabled_address_serves_nothing(registry: CollectorRegistry, address: str) -> None:
    assert await serve_metrics(address=address, registry=registry) is None


async def test_malformed_metrics_path_is_refused(registry: CollectorRegistry) -> None:
    with pytest.raises(ValueError, match="metrics path"):
        await serve_metrics(address="127.0.0.1:0", path="metrics", registry=registry)


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        (":8080", ("", 8080)),
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        ("localhost:0", ("localhost", 0)),
        ("[::1]:9090", ("::1", 9090)),
        ("0.0.0.0:65535", ("0.0.0.0", 65535)),
        ("0", None),
        ("", None),
    ],
)
def test_parse_bind_address_accepts_go_host_port_forms(address: str, expected: tuple[str, int] | None) -> None:
    assert parse_bind_address(address) == expected


@pytest.mark.parametrize("address", ["8080", "host:", ":http", ":65536", ":-1", "::1:8080", "[::1:8080", "[zz]:80"])
def test_parse_bind_address_refuses_malformed_addresses(address: str) -> None:
    with pytest.raises(ValueError, match="invalid bind address"):
        parse_bind_address(address)
