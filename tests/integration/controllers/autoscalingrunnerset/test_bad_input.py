"""Bad input gets a clear answer: a Warning Event (and a Degraded condition) that says what is wrong, retried
with backoff, no crash, nothing deleted, and every other scale set keeps working."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.errors import Invalid
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster


async def warning(
    env: ControllerHarness, name: str, reason: str, *, namespace: str | None = None
) -> dict[str, Any] | None:
    for event in await env.events(regarding=name, namespace=namespace):
        if event.get("reason") == reason and event.get("type") == "Warning":
            return event
    return None


async def test_a_missing_secret_is_reported_and_heals_once_created_while_other_sets_keep_working(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        await env.create_ars("broken", githubConfigSecret="no-such-secret")
        await env.create_ars("healthy")
        event = await eventually(lambda: warning(env, "broken", "SecretNotFound"), "a SecretNotFound warning")
        assert "no-such-secret" in event["note"]
        assert "does not exist" in event["note"]
        await eventually(lambda: env.running("healthy"), "the healthy scale set to run")
        broken = await env.ars("broken")
        assert "runner-scale-set-id" not in (broken["metadata"].get("annotations") or {})

        await env.create_secret("no-such-secret")
        await eventually(lambda: env.running("broken"), "the broken scale set to heal")


async def test_a_missing_secret_sets_degraded_and_not_ready_conditions(start_env: EnvFactory) -> None:
    async with start_env() as env:
        await env.create_ars("broken", githubConfigSecret="no-such-secret")

        async def degraded() -> dict[str, Any] | None:
            obj = await env.ars("broken")
            condition = get_condition((obj.get("status") or {}).get("conditions"), "Degraded")
            # The pass that adds the finalizer reports Degraded=False before the one that reads the Secret.
            return condition if condition and condition["status"] == "True" else None

        condition = await eventually(degraded, "a Degraded=True condition")
        assert (condition["status"], condition["reason"]) == ("True", "SecretNotFound")
        obj = await env.ars("broken")
        ready = get_condition(obj["status"]["conditions"], "Ready")
        assert ready is not None
        assert ready["status"] == "False"
        assert condition["observedGeneration"] == obj["metadata"]["generation"]


async def test_wrong_credentials_are_reported_as_an_authentication_failure(start_env: EnvFactory) -> None:
    async with start_env(secret=False) as env:
        await env.create_secret(data={"github_token": "ghp_not_known_to_github"})
        await env.create_ars()
        event = await eventually(lambda: warning(env, "arc-runners", "GitHubAuthenticationFailed"),
                                 "a GitHubAuthenticationFailed warning")  # fmt: skip
        assert "ghp_not_known_to_github" not in event["note"]
        assert not env.sim.state.scale_sets


async def test_a_secret_without_credentials_is_reported_as_invalid(start_env: EnvFactory) -> None:
    async with start_env(secret=False) as env:
        await env.create_secret(data={"something": "else"})
        await env.create_ars()
        event = await eventually(lambda: warning(env, "arc-runners", "InvalidSecret"), "an InvalidSecret warning")
        assert "no credentials provided" in event["note"]


async def test_an_invalid_config_url_is_reported_with_what_a_valid_one_looks_like(start_env: EnvFactory) -> None:
    async with start_env() as env:
        await env.create_ars(githubConfigUrl="https://github.com/")
        event = await eventually(lambda: warning(env, "arc-runners", "InvalidGitHubConfigURL"),
                                 "an InvalidGitHubConfigURL warning")  # fmt: skip
        assert "https://github.com/my-org" in event["note"]
        assert await env.get(AUTOSCALING_RUNNER_SETS, "arc-runners") is not None


async def test_min_above_max_is_rejected_by_the_api_server(start_env: EnvFactory) -> None:
    async with start_env() as env:
        with pytest.raises(Invalid, match="minRunners"):
            await env.create_ars(minRunners=5, maxRunners=2)


async def test_a_listener_template_the_api_server_rejects_is_reported_on_the_listener_and_the_scale_set(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        # A sidecar the listener pod policy allows (restricted), which only the API server can refuse.
        hardened = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
                    "seccompProfile": {"type": "RuntimeDefault"}}  # fmt: skip
        sidecar = {"name": "Not_A_Valid_Name", "image": "x", "securityContext": hardened}
        template = {"spec": {"containers": [{"name": "listener"}, sidecar]}}
        await env.create_ars(listenerTemplate=template)
        await env.create_ars("healthy")
        event = await eventually(lambda: warning(env, "arc-runners", "InvalidListenerTemplate"),
                                 "an InvalidListenerTemplate warning on the scale set")  # fmt: skip
        assert "Not_A_Valid_Name" in event["note"]
        await eventually(lambda: env.running("healthy"), "the other scale set to run")
