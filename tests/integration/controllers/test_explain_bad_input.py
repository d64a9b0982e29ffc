"""``arc-scaleset explain`` and ``status`` on a scale set the controller cannot serve: the diagnosis names the
Secret and what GitHub said, and no secret is printed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from arc_scaleset.kube.conditions import get_condition
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.waiting import eventually
from tests.cli import run_cli
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

WRONG_TOKEN = "ghp_not_known_to_github_0123456789"


async def arc(cluster: TestCluster, *args: str) -> tuple[int, str]:
    return await run_cli(cluster.kubeconfig, *args)


async def test_explain_says_the_credentials_were_rejected_and_names_the_secret(
    start_env: EnvFactory, cluster: TestCluster
) -> None:
    async with start_env(secret=False) as env:
        await env.create_secret(data={"github_token": WRONG_TOKEN})
        await env.create_ars()

        async def degraded() -> dict[str, Any] | None:
            condition = get_condition(((await env.ars()).get("status") or {}).get("conditions"), "Degraded")
            return condition if condition and condition["status"] == "True" else None

        await eventually(degraded, "the scale set to be Degraded")
        code, output = await arc(cluster, "explain", "arc-runners", "-n", env.namespace, "-o", "json")
        assert code == 0, output
        (finding,) = json.loads(output)["findings"]
        assert finding["severity"] == "error"
        assert finding["line"].startswith(
            f"no EphemeralRunnerSet: credentials rejected (Secret {env.namespace}/gh-secret: "
        ), finding
        assert WRONG_TOKEN not in output

        code, text = await arc(cluster, "status", "-n", env.namespace)
        assert code == 0, text
        assert "RunnerSet   none" in text
        assert "Degraded=True GitHubAuthenticationFailed" in text
        assert "GitHubAuthenticationFailed" in text.split("Events (newest first")[1]
        assert WRONG_TOKEN not in text


async def test_status_of_a_scale_set_that_does_not_exist_exits_1(start_env: EnvFactory, cluster: TestCluster) -> None:
    async with start_env() as env:
        code, output = await arc(cluster, "status", "no-such-set", "-n", env.namespace)
        assert code == 1
        assert f"AutoscalingRunnerSet {env.namespace}/no-such-set not found" in output
