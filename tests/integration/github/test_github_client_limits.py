"""A response body too large to be an answer (a misbehaving proxy, a wrong URL serving a file) is refused with a
typed error after at most the client's limit has been read, and never retried; one that never ends (a byte now and
then) is given up at the request timeout, like a server that does not answer.

A small aiohttp server on loopback plays GitHub; it answers the first request of the authentication chain.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from aiohttp import web

from arc_scaleset.github import AuthenticationStepFailed, FatalError, ResponseTooLarge, TransientError, is_transient
from tests.http_serving import serving
from tests.integration.github.conftest import client_for

MIB = 1024 * 1024


async def declared_eleven_mib(_: web.Request) -> web.StreamResponse:
    return web.Response(status=201, body=b"x" * (11 * MIB), content_type="application/json")


async def streamed_without_length(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(status=201)
    response.enable_chunked_encoding()
    await response.prepare(request)
    chunk = b"y" * MIB
    for _ in range(11):
        await response.write(chunk)
    await response.write_eof()
    return response


async def test_a_body_declared_larger_than_10_mib_is_refused_unread_and_not_retried() -> None:
    async with serving(declared_eleven_mib) as (base, seen), client_for(base) as client:
        with pytest.raises(ResponseTooLarge) as caught:
            await client.get_runner_group_by_name("Default")
    error = caught.value
    assert isinstance(error, FatalError)
    assert not is_transient(error)
    assert (error.limit, error.status) == (10 * MIB, 201)
    assert "exceeds the client's limit of 10485760 bytes" in str(error)
    assert seen == ["/api/v3/orgs/org/actions/runners/registration-token"]


async def test_a_streamed_body_is_cut_off_once_it_passes_the_limit() -> None:
    async with serving(streamed_without_length) as (base, seen), client_for(base, max_response_bytes=2 * MIB) as client:
        with pytest.raises(ResponseTooLarge) as caught:
            await client.get_runner_group_by_name("Default")
    assert caught.value.limit == 2 * MIB
    assert len(seen) == 1


async def test_a_body_within_the_limit_is_read_whole() -> None:
    async def nine_mib_not_found(_: web.Request) -> web.StreamResponse:
        return web.json_response({"message": "no such org", "padding": "x" * (9 * MIB)}, status=404)

    async with serving(nine_mib_not_found) as (base, _), client_for(base) as client:
        with pytest.raises(AuthenticationStepFailed, match="no such org"):
            await client.get_runner_group_by_name("Default")


async def test_a_body_that_trickles_forever_is_given_up_at_the_request_timeout_and_retried_a_bounded_number() -> None:
    # Headers at once, then a byte every 50 ms that never ends the body: a timeout per read would never fire. The
    # request timeout covers the whole exchange, body included.
    done = asyncio.Event()

    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=201)
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b'{"token": "')
        with contextlib.suppress(ConnectionError):
            while not done.is_set():
                await response.write(b"x")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), 0.05)
        return response

    async with serving(trickle) as (base, seen):
        async with client_for(base, request_timeout=0.3, retry_max=2) as client:
            with pytest.raises(TransientError, match=r"giving up after 3 attempt\(s\): timed out"):
                await client.get_runner_group_by_name("Default")
        done.set()
    assert len(seen) == 3
