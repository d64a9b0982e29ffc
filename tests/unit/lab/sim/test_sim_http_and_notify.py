"""The sim's shared HTTP helpers and its change waits, without a server."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import make_mocked_request

from arc_scaleset_lab.sim.http import Dialect, ProtocolRoute, credential, protocol_route
from arc_scaleset_lab.sim.notify import ChangeNotifier


@pytest.mark.parametrize(
    ("header", "scheme", "expected"),
    [
        ("Bearer abc", "Bearer", "abc"),
        ("bearer  abc ", "Bearer", "abc"),
        ("RemoteAuth tok", "RemoteAuth", "tok"),
        ("token ghp_x", "Bearer", None),
        ("Bearer ", "Bearer", None),
        ("", "Bearer", None),
    ],
)
def test_credential_is_the_value_after_a_case_insensitive_scheme(
    header: str, scheme: str, expected: str | None
) -> None:
    request = make_mocked_request("GET", "/", headers={"Authorization": header} if header else {})
    assert credential(request, scheme) == expected


def test_a_tagged_method_carries_its_route_name_and_dialect_when_bound() -> None:
    class Routes:
        @protocol_route("get_thing", Dialect.ACTIONS)
        async def get_thing(self, request: object) -> object:
            raise NotImplementedError

    # The middleware reads the tag from the bound method aiohttp holds as the handler.
    assert Routes().get_thing.sim_protocol_route == ProtocolRoute("get_thing", Dialect.ACTIONS)  # type: ignore[attr-defined]


async def test_poll_until_wakes_on_a_change_and_returns_the_first_truthy_result() -> None:
    changes = ChangeNotifier()
    events: list[int] = []
    checks = 0

    def arrive() -> None:
        events.append(1)
        changes.notify()

    def query() -> list[int]:
        nonlocal checks
        checks += 1
        if checks == 1:  # nothing yet: an event arrives while the poll waits
            asyncio.get_running_loop().call_soon(arrive)
        return list(events)

    assert await changes.poll_until(query, within=30) == [1]
    assert checks == 2


async def test_poll_until_returns_the_falsy_result_when_time_runs_out() -> None:
    assert await ChangeNotifier().poll_until(lambda: [], within=0) == []


async def test_wait_until_raises_timeout_when_the_condition_never_holds() -> None:
    with pytest.raises(TimeoutError):
        await ChangeNotifier().wait_until(lambda: False, within=0)
