"""A credential echoed back by GitHub or a proxy never reaches an error, a status condition, an Event or a log
line, however many secrets the client has handled since.

The scale set's PAT here is shaped like no known credential, so only the client's own memory of it (and the
process-wide registry the controller feeds) can mask it. The controller's pooled client first registers 200
JIT runners, each a secret of its own; the earlier client kept only the last 64 secrets, so by then it had
forgotten the PAT.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from arc_scaleset.github import ActionsError
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.observability.logging import configure_logging
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim.faults import FaultRule
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

PAT = "plain-looking-pat-" + "4e9b1d7c3a6f0e2d8b5c"
SECRET_NAME = "gh-secret"


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """Everything the process logs during the test, as the controller would write it (JSON, debug)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    buffer = io.StringIO()
    configure_logging(level="debug", fmt="json", stream=buffer)
    yield buffer
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    structlog.reset_defaults()


async def _degraded(env: ControllerHarness) -> dict[str, Any] | None:
    obj = await env.ars()
    condition = get_condition((obj.get("status") or {}).get("conditions"), "Degraded")
    return condition if condition and condition["reason"] == "GitHubRequestFailed" else None


async def _warning(env: ControllerHarness) -> dict[str, Any] | None:
    for event in await env.events(regarding="arc-runners"):
        if event.get("reason") == "GitHubRequestFailed" and event.get("type") == "Warning":
            return event
    return None


async def test_an_echoed_pat_is_masked_in_the_error_the_condition_the_event_and_the_log_after_200_jit_runners(
    start_env: EnvFactory, log_output: io.StringIO
) -> None:
    async with start_env(secret=False) as env:
        env.sim.credentials.add_token(PAT)
        await env.create_secret(SECRET_NAME, {"github_token": PAT})
        # The very client the controller uses for this scale set (same namespace, URL and Secret).
        client = await env.ctx.github.client_for(
            namespace=env.namespace, config_url=env.config_url, secret_name=SECRET_NAME
        )
        warm_up = await client.create_runner_scale_set(name="warm-up", runner_group_id=1)
        for number in range(200):
            await client.generate_jit_runner_config(warm_up.id, name=f"runner-{number}")

        # From now on every call is answered by a "proxy" that quotes the credentials it was sent.
        env.sim.faults.add(FaultRule(route="*", status=400, count=None, message=f"rejected credentials {PAT}"))
        with pytest.raises(ActionsError) as caught:
            await client.get_runner_group_by_name("Default")
        assert "rejected credentials" in str(caught.value)
        assert PAT not in str(caught.value)

        await env.create_ars()
        condition = await eventually(lambda: _degraded(env), "a Degraded condition from the GitHub failure")
        event = await eventually(lambda: _warning(env), "a GitHubRequestFailed Warning Event")

    assert "rejected credentials" in condition["message"]
    assert PAT not in condition["message"]
    assert "rejected credentials" in event["note"]
    assert PAT not in event["note"]
    logged = log_output.getvalue()
    assert "rejected credentials" in logged
    assert PAT not in logged
