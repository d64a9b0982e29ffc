"""``arc-scaleset status`` shows a scale set's own listener, never a decoy another team made in its namespace
whose spec names the scale set (issue 26)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.keys import ANNOTATION_AUTOSCALING_RUNNER_SET_UID
from arc_scaleset.kube.client import KubeClient
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
    temporary_namespace,
)
from tests.integration.controllers.test_explain_bad_input import arc

pytestmark = pytest.mark.cluster


@pytest.fixture(name="decoy_namespace")
async def decoy_namespace_fixture(kube: KubeClient) -> AsyncIterator[str]:
    """Another team's namespace, named to be listed before the controller namespace (lists are sorted by key)."""
    async with temporary_namespace(kube, "t-aaa-decoy") as name:
        yield name


async def status_listener(cluster: TestCluster, namespace: str, *flags: str) -> tuple[Any, list[str]]:
    code, output = await arc(cluster, "status", "arc-runners", "-n", namespace, "-o", "json", *flags)
    assert code == 0, output
    doc = json.loads(output)
    return doc["listener"], doc["notes"]


async def test_a_decoy_listener_in_another_namespace_naming_the_scale_set_is_not_shown(
    start_env: EnvFactory, cluster: TestCluster, decoy_namespace: str
) -> None:
    async with start_env() as env:
        ars = await env.create_ars()
        real_name = env.listener_name(ars)
        real = await eventually(lambda: env.listener(real_name), "the scale set's listener")
        decoy = {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "AutoscalingListener",
            "metadata": {"name": "decoy"},
            "spec": real["spec"],
        }
        await env.kube.create(AUTOSCALING_LISTENERS, decoy, namespace=decoy_namespace)

        shown, notes = await status_listener(cluster, env.namespace)
        assert (shown["namespace"], shown["name"]) == (env.controller_namespace, real_name)
        named = f"AutoscalingListener {decoy_namespace}/decoy names this scale set"
        assert any(note.startswith(named) for note in notes), notes

        # A copy carrying the scale set's UID too: the controller namespace given, only the listener there counts.
        uid = ars["metadata"]["uid"]
        await env.kube.patch(AUTOSCALING_LISTENERS, "decoy", {"metadata": {"annotations": {
            ANNOTATION_AUTOSCALING_RUNNER_SET_UID: uid}}}, namespace=decoy_namespace)  # fmt: skip
        shown, _ = await status_listener(cluster, env.namespace, "--controller-namespace", env.controller_namespace)
        assert (shown["namespace"], shown["name"]) == (env.controller_namespace, real_name)
        # Without it, two claimants: neither is shown, both are named.
        shown, notes = await status_listener(cluster, env.namespace)
        assert shown is None or shown["namespace"] is None
        assert any(f"{decoy_namespace}/decoy, {env.controller_namespace}/{real_name} all claim" in n for n in notes)
