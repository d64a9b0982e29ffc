"""Issue 26 item 4 through the AutoscalingRunnerSet controller on the real control plane: a GHES host (plain
http, as a team may configure) answers 303 to the cloud metadata endpoint. The redirect is refused, and
nothing of the metadata answer reaches the scale set's condition or its Warning Event: the team that owns the
scale set reads both.

The metadata endpoint is played by a loopback server that the scale set names as its http proxy: whatever the
controller does, no request leaves this machine (before the fix, the controller followed the redirect through
the "proxy" and put the answer in the condition)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from arc_scaleset.kube.conditions import get_condition
from arc_scaleset_lab.harness.waiting import eventually
from tests.http_serving import serving
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

METADATA = "http://169.254.169.254/latest/meta-data/iam/security-credentials/node-role"
SECRET_ACCESS_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"
METADATA_ANSWER = f'{{"Code": "Success", "AccessKeyId": "ASIAEXAMPLE", "SecretAccessKey": "{SECRET_ACCESS_KEY}"}}'


@pytest.fixture
async def metadata_requests() -> AsyncIterator[tuple[str, list[str]]]:
    """``(proxy URL, requests it got)``: the loopback server playing the metadata endpoint, as a proxy."""

    async def answer(_: web.Request) -> web.StreamResponse:
        return web.Response(text=METADATA_ANSWER, content_type="text/plain")

    async with serving(answer) as (base, seen):
        yield base, seen


async def _condition(env: ControllerHarness) -> dict[str, Any] | None:
    condition = get_condition(((await env.ars()).get("status") or {}).get("conditions"), "Degraded")
    return condition if condition and condition.get("status") == "True" else None


async def _warning(env: ControllerHarness) -> dict[str, Any] | None:
    events = await env.events(regarding="arc-runners")
    return next((e for e in events if e.get("type") == "Warning" and e.get("action") == "CallGitHub"), None)


async def test_a_see_other_to_the_metadata_endpoint_is_refused_and_its_answer_reaches_no_condition_or_event(
    start_env: EnvFactory, metadata_requests: tuple[str, list[str]]
) -> None:
    proxy, seen = metadata_requests

    async def ghes(_: web.Request) -> web.StreamResponse:
        raise web.HTTPSeeOther(METADATA)

    async with serving(ghes) as (ghes_base, _), start_env() as env:
        await env.create_ars(githubConfigUrl=f"{ghes_base}/org", proxy={"http": {"url": proxy}})
        condition = await eventually(lambda: _condition(env), "Degraded from the GitHub call", timeout=60)
        event = await eventually(lambda: _warning(env), "a Warning Event from the GitHub call", timeout=60)

    assert "redirected to another host (169.254.169.254)" in condition["message"]
    assert "redirected to another host (169.254.169.254)" in event["note"]
    for text in (condition["message"], event["note"]):
        for part in (SECRET_ACCESS_KEY, "SecretAccessKey", "ASIAEXAMPLE", "security-credentials"):
            assert part not in text
    assert seen == [], "the metadata endpoint was never asked"
