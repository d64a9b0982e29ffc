"""The resolver of a pinned redirect hop (docs/github.md, "Transport and errors"): the hop's name gets exactly the
addresses its check found, any other name nothing."""

from __future__ import annotations

import socket

import pytest
from aiohttp.abc import ResolveResult

from arc_scaleset.github._transport import _Pin, _PinnedResolver

FLAGS = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV


def found(host: str, family: socket.AddressFamily) -> ResolveResult:
    return ResolveResult(hostname="api.ghes.example.", host=host, port=443, family=family, proto=0, flags=FLAGS)


CHECKED = (found("2001:db8::5", socket.AF_INET6), found("192.0.2.5", socket.AF_INET))


async def test_the_hops_name_gets_every_checked_address_whatever_its_case_or_trailing_dot() -> None:
    resolver = _PinnedResolver(_Pin(host="api.ghes.example.", addresses=CHECKED))
    for name in ("api.ghes.example.", "API.ghes.example", "api.ghes.example"):
        assert await resolver.resolve(name, 443, family=socket.AF_UNSPEC) == list(CHECKED)
    assert await resolver.resolve("api.ghes.example.", 443, family=socket.AF_INET) == [CHECKED[1]]


@pytest.mark.parametrize(
    ("host", "addresses"),
    [("ghes.example", CHECKED), ("evil.api.ghes.example", CHECKED), ("api.ghes.example.", ())],
    ids=["another name", "a name below it", "a name whose check found nothing"],
)
async def test_anything_else_is_a_failed_look_up(host: str, addresses: tuple[ResolveResult, ...]) -> None:
    resolver = _PinnedResolver(_Pin(host="api.ghes.example.", addresses=addresses))
    with pytest.raises(socket.gaierror, match="the redirect's check found no address to connect to"):
        await resolver.resolve(host, 443, family=socket.AF_UNSPEC)
