"""Mapping error responses and transport failures to typed, one-line errors.

The loopback aiohttp server (:func:`tests.http_serving.serving`) stands in only for odd HTTP responses the real
API server does not produce on demand (a proxy's HTML 502, a 429 with Retry-After); it is not a Kubernetes API.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import orjson
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from arc_scaleset.clock import FakeClock
from arc_scaleset.kube import errors
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.credentials import ConnectionConfig, StaticToken
from arc_scaleset.kube.errors import error_from_status
from arc_scaleset.kube.resources import CONFIG_MAPS
from arc_scaleset_lab.harness.waiting import eventually
from tests.http_serving import serving

SECRET = "very-secret-token"


def _status(code: int, reason: str, message: str, **details: Any) -> bytes:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
    body |= {"reason": reason, "message": message}
    if details:
        body["details"] = details
    return orjson.dumps(body)


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (400, "BadRequest", errors.BadRequest),
        (401, "Unauthorized", errors.Unauthorized),
        (403, "Forbidden", errors.Forbidden),
        (404, "NotFound", errors.NotFound),
        (409, "AlreadyExists", errors.AlreadyExists),
        (409, "Conflict", errors.Conflict),
        (410, "Gone", errors.Gone),
        (410, "Expired", errors.Gone),
        (422, "Invalid", errors.Invalid),
        (429, "TooManyRequests", errors.TooManyRequests),
        (500, "InternalError", errors.ServerError),
        (503, "ServiceUnavailable", errors.ServerError),
        (504, "Timeout", errors.ServerError),
        (405, "MethodNotAllowed", errors.ApiError),
    ],
)
def test_status_reason_selects_the_error_class(code: int, reason: str, expected: type[errors.ApiError]) -> None:
    error = error_from_status(code, _status(code, reason, "something happened"))
    assert type(error) is expected
    assert (error.status, error.reason, error.message) == (code, reason, "something happened")


def test_already_exists_and_conflict_are_distinct_409s() -> None:
    exists = error_from_status(409, _status(409, "AlreadyExists", 'configmaps "a" already exists'))
    conflict = error_from_status(409, _status(409, "Conflict", "the object has been modified"))
    assert isinstance(exists, errors.AlreadyExists)
    assert not isinstance(exists, errors.Conflict)
    assert isinstance(conflict, errors.Conflict)


def test_unknown_409_reason_falls_back_to_conflict() -> None:
    assert isinstance(error_from_status(409, _status(409, "", "")), errors.Conflict)


def test_status_code_in_the_body_wins_for_watch_error_events() -> None:
    error = error_from_status(200, {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"})
    assert isinstance(error, errors.Gone)
    assert error.status == 410


def test_message_is_one_line_with_request_and_server_message() -> None:
    error = error_from_status(
        404, _status(404, "NotFound", 'configmaps "x" not found'), request="GET /api/v1/namespaces/a/configmaps/x"
    )
    assert str(error) == 'GET /api/v1/namespaces/a/configmaps/x: 404 NotFound: configmaps "x" not found'


def test_non_status_bodies_become_a_flattened_message() -> None:
    error = error_from_status(502, b"<html>\n<body>Bad   gateway</body>\n</html>\n")
    assert isinstance(error, errors.ServerError)
    assert error.reason == "BadGateway"
    assert "\n" not in str(error)
    assert "Bad gateway" in error.message


def test_a_token_across_the_cut_of_a_long_error_body_leaves_no_part_of_it_in_the_message() -> None:
    # A proxy's page that echoes the request's credentials: the message is cut at 2000 characters, and a
    # token across the cut, masked after it, would leave its first characters there for logs and conditions.
    token = "ghp_" + "A1b2C3d4E5" * 4
    error = error_from_status(502, f"<html>{'x' * 1980} {token} more</html>".encode())
    assert token[:8] not in str(error)
    assert "[REDACTED]" in error.message


def test_invalid_keeps_the_field_causes() -> None:
    causes = [{"reason": "FieldValueRequired", "field": "spec.replicas", "message": "Required value"}]
    error = error_from_status(422, _status(422, "Invalid", "X is invalid", causes=causes))
    assert isinstance(error, errors.Invalid)
    assert error.details == {"causes": causes}


def test_retry_after_comes_from_the_header_or_the_details() -> None:
    from_header = error_from_status(429, _status(429, "TooManyRequests", "slow down"), retry_after="3")
    from_details = error_from_status(429, _status(429, "TooManyRequests", "slow down", retryAfterSeconds=7))
    assert isinstance(from_header, errors.TooManyRequests)
    assert isinstance(from_details, errors.TooManyRequests)
    assert (from_header.retry_after, from_details.retry_after) == (3.0, 7.0)


def test_transport_errors_are_not_api_errors() -> None:
    assert not issubclass(errors.ConnectionFailed, errors.ApiError)
    assert issubclass(errors.ConnectionFailed, errors.TransportError)
    assert issubclass(errors.RequestTimeout, errors.TransportError)
    assert issubclass(errors.ApiError, errors.KubeError)


def _client(server: str, **options: Any) -> KubeClient:
    return KubeClient(ConnectionConfig(server=server, token_source=StaticToken(SECRET)), **options)


async def test_html_error_page_from_a_proxy_is_one_clear_line() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=502, text="<html>\n<h1>502 Bad Gateway</h1>\n</html>", content_type="text/html")

    async with serving(handler) as (server, _), _client(server, retries=0) as client:
        with pytest.raises(errors.ServerError) as caught:
            await client.get(CONFIG_MAPS, "x", namespace="ns")
    assert str(caught.value) == (
        "GET /api/v1/namespaces/ns/configmaps/x: 502 BadGateway: <html> <h1>502 Bad Gateway</h1> </html>"
    )


async def test_too_many_requests_is_retried_after_the_servers_hint() -> None:
    calls: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        calls.append(request.headers["Authorization"])
        if len(calls) == 1:
            body = _status(429, "TooManyRequests", "too many requests, please try again later")
            return web.Response(status=429, body=body, headers={"Retry-After": "2"}, content_type="application/json")
        return web.json_response({"kind": "ConfigMap", "metadata": {"name": "x"}})

    clock = FakeClock()
    async with serving(handler) as (server, _), _client(server, clock=clock, retries=1) as client:
        started = clock.monotonic()
        task = asyncio.ensure_future(client.get(CONFIG_MAPS, "x", namespace="ns"))
        await eventually(lambda: clock.sleepers > 0, timeout=5)
        await clock.advance(2)
        result = await task
    assert result["metadata"]["name"] == "x"
    assert clock.monotonic() - started == 2
    assert calls == [f"Bearer {SECRET}"] * 2
    assert client.request_counts[("get", "configmaps")] == 2


async def test_non_idempotent_requests_are_not_retried() -> None:
    calls = 0

    async def handler(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        return web.Response(
            status=503, body=_status(503, "ServiceUnavailable", "busy"), content_type="application/json"
        )

    async with serving(handler) as (server, _), _client(server, retries=3) as client:
        with pytest.raises(errors.ServerError, match="503 ServiceUnavailable: busy"):
            await client.create(CONFIG_MAPS, {"metadata": {"name": "x"}}, namespace="ns")
    assert calls == 1


async def test_requests_are_counted_in_the_rest_client_metric() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=404, body=_status(404, "NotFound", "nope"), content_type="application/json")

    registry = CollectorRegistry()
    async with (
        serving(handler) as (server, _),
        _client(server, registry=registry) as client,
        _client(server, registry=registry) as second,
    ):
        with pytest.raises(errors.NotFound):
            await client.get(CONFIG_MAPS, "x", namespace="ns")
        with pytest.raises(errors.NotFound):
            await second.get(CONFIG_MAPS, "x", namespace="ns")
    host = server.removeprefix("http://")
    labels = {"code": "404", "method": "GET", "host": host}
    assert registry.get_sample_value("rest_client_requests_total", labels) == 2


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_unreachable_server_is_one_connection_failed_line() -> None:
    port = _closed_port()
    async with _client(f"https://127.0.0.1:{port}") as client:
        with pytest.raises(errors.ConnectionFailed) as caught:
            await client.get(CONFIG_MAPS, "x", namespace="ns")
    assert str(caught.value) == f"cannot reach https://127.0.0.1:{port}: connection refused"
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


async def test_error_text_never_contains_the_token() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(
            status=401, body=_status(401, "Unauthorized", "Unauthorized"), content_type="application/json"
        )

    async with serving(handler) as (server, _), _client(server) as client:
        with pytest.raises(errors.Unauthorized) as caught:
            await client.get(CONFIG_MAPS, "x", namespace="ns")
    assert SECRET not in str(caught.value)
    assert SECRET not in repr(caught.value)
    assert "credentials" in str(caught.value)
