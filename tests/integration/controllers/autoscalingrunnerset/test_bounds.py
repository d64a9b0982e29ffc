"""The AutoscalingRunnerSet's bounds and the consistency of its status (issue 15), against the real control plane:
a scale set above the runner ceiling is refused before anything is made for it, a problem its runner set
reports shows on it, and no watcher ever sees a status that was never true."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.informer import Informer
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    RUNNER_TEMPLATE,
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)
from tests.integration.controllers.task_count import peak_task_count

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


async def condition(env: ControllerHarness, kind: str, *, status: str, reason: str) -> dict[str, Any] | None:
    found = get_condition(((await env.ars()).get("status") or {}).get("conditions"), kind)
    return found if found and (found["status"], found["reason"]) == (status, reason) else None


async def test_min_runners_of_half_a_million_is_refused_with_a_condition_and_nothing_is_made_for_it(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        with peak_task_count() as tasks:
            await env.create_ars(minRunners=500_000)
            degraded = await eventually(
                lambda: condition(env, "Degraded", status="True", reason="RunnersAboveCeiling"),
                "Degraded RunnersAboveCeiling",
            )
        assert "minRunners 500000 is above the controller's ceiling of 10000" in degraded["message"]
        assert "--max-runners-ceiling" in degraded["message"]
        assert await condition(env, "Ready", status="False", reason="RunnersAboveCeiling")
        await env.wait_for_event("RunnersAboveCeiling", regarding="arc-runners")
        assert await env.ers() is None, "no EphemeralRunnerSet for a refused scale set"
        assert await env.listeners() == [], "no listener to ask for half a million runners"
        assert not env.sim.state.scale_sets, "nothing registered on GitHub"
        assert tasks.peak < 300, f"{tasks.peak} tasks at once"

        # Within the ceiling again: the scale set is made as usual.
        await env.kube.patch(AUTOSCALING_RUNNER_SETS, "arc-runners", {"spec": {"minRunners": 2}},
                             namespace=env.namespace)  # fmt: skip
        await eventually(env.running, "Running once minRunners is within the ceiling")


async def test_a_runner_template_the_runner_set_cannot_use_shows_on_the_scale_set(start_env: EnvFactory) -> None:
    async with start_env() as env:
        await env.create_ars()
        await eventually(env.running, "Running")
        # What the EphemeralRunnerSet controller writes when the API server refuses the runner pod (not running
        # here: this test is about the scale set's side).
        refused = {"type": "Degraded", "status": "True", "reason": "InvalidRunnerTemplate",
                   "lastTransitionTime": "2026-01-01T00:00:00Z",
                   "message": "the API server refuses the runner pod: spec.containers[0].volumeMounts[0].name: Not"
                              " found"}  # fmt: skip
        await env.kube.patch(EPHEMERAL_RUNNER_SETS, "arc-runners", {"status": {"conditions": [refused]}},
                             namespace=env.namespace, subresource="status")  # fmt: skip
        degraded = await eventually(
            lambda: condition(env, "Degraded", status="True", reason="InvalidRunnerTemplate"), "the scale set Degraded"
        )
        assert "volumeMounts[0].name" in degraded["message"]
        assert await condition(env, "Ready", status="False", reason="InvalidRunnerTemplate")

        await env.kube.patch(EPHEMERAL_RUNNER_SETS, "arc-runners",
                             {"status": {"conditions": [{**refused, "status": "False", "reason": "AsExpected"}]}},
                             namespace=env.namespace, subresource="status")  # fmt: skip
        await eventually(lambda: condition(env, "Degraded", status="False", reason="AsExpected"), "not Degraded")
        assert not await condition(env, "Ready", status="False", reason="InvalidRunnerTemplate")


async def test_a_watch_across_template_changes_never_sees_pending_at_the_observed_generation(
    start_env: EnvFactory,
) -> None:
    seen: list[tuple[int, int, str]] = []

    def saw(ars: Mapping[str, Any]) -> None:
        status = ars.get("status") or {}
        seen.append((ars["metadata"]["generation"], status.get("observedGeneration", 0), status.get("phase", "")))

    async with start_env() as env:
        watch = Informer(env.kube, AUTOSCALING_RUNNER_SETS, namespace=env.namespace)
        watch.add_handler(on_add=saw, on_update=lambda _, new: saw(new))
        watch.start()
        await watch.wait_synced()
        try:
            await env.create_ars()
            await eventually(env.running, "Running")
            for image in range(2, 8):
                template = copy.deepcopy(RUNNER_TEMPLATE)
                template["spec"]["containers"][0]["image"] = f"ghcr.io/actions/actions-runner:{image}"
                updated = await env.kube.patch(AUTOSCALING_RUNNER_SETS, "arc-runners", {"spec": {"template": template}},
                                               namespace=env.namespace)  # fmt: skip
                generation = updated["metadata"]["generation"]
                await eventually(lambda g=generation: _watched(seen, g), f"generation {generation} applied")
        finally:
            await watch.stop()
    never_true = [state for state in seen if state[0] == state[1] and state[2] == "Pending"]
    assert never_true == [], f"(generation, observedGeneration, phase) states no pass derived: {never_true}"
    assert any(state[2] == "Pending" for state in seen), "each change is Pending until applied"


async def _watched(seen: list[tuple[int, int, str]], generation: int) -> bool:
    return (generation, generation, "Running") in seen


def oversized_template(kib: int = 300) -> dict[str, Any]:
    """The test's runner template with a script of ``kib`` KiB inlined in an environment variable."""
    template = copy.deepcopy(RUNNER_TEMPLATE)
    template["spec"]["containers"][0]["env"] = [{"name": "SETUP_SCRIPT", "value": "echo setup\n" * (kib * 93)}]
    return template


async def test_a_runner_template_above_the_size_bound_is_refused_and_nothing_is_made_or_changed_for_it(
    start_env: EnvFactory,
) -> None:
    # Issue 26, item 9: every runner stores a copy of the template, so a 1 MB template and a few thousand runners
    # filled etcd's quota and the controller's cache.
    async with start_env() as env:
        await env.create_ars(template=oversized_template())
        degraded = await eventually(
            lambda: condition(env, "Degraded", status="True", reason="RunnerTemplateTooLarge"),
            "Degraded RunnerTemplateTooLarge",
        )
        assert re.search(r"spec\.template is 3\d\d\.\d KiB", degraded["message"]), degraded["message"]
        assert "above the controller's bound of 256.0 KiB" in degraded["message"]
        assert "--max-runner-template-bytes" in degraded["message"]
        await env.wait_for_event("RunnerTemplateTooLarge", regarding="arc-runners")
        assert await env.ers() is None, "no EphemeralRunnerSet (and so no runner) carries the template"
        assert await env.listeners() == []
        assert not env.sim.state.scale_sets, "nothing registered on GitHub"

        # Within the bound again: the scale set is made as usual.
        await env.kube.patch(AUTOSCALING_RUNNER_SETS, "arc-runners", {"spec": {"template": RUNNER_TEMPLATE}},
                             namespace=env.namespace)  # fmt: skip
        await eventually(env.running, "Running once the template is within the bound")


async def test_a_running_scale_set_whose_template_grows_above_the_bound_keeps_its_runner_set_and_listener(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        await env.create_ars()
        await eventually(env.running, "Running")
        before = await env.ers()
        assert before is not None
        listeners = [item["metadata"]["uid"] for item in await env.listeners()]
        await env.kube.patch(AUTOSCALING_RUNNER_SETS, "arc-runners", {"spec": {"template": oversized_template()}},
                             namespace=env.namespace)  # fmt: skip
        await eventually(
            lambda: condition(env, "Degraded", status="True", reason="RunnerTemplateTooLarge"),
            "Degraded RunnerTemplateTooLarge",
        )
        after = await env.ers()
        assert after is not None, "nothing is deleted on the strength of bad input"
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        assert after["spec"] == before["spec"], "the runner set keeps the template it had"
        assert [item["metadata"]["uid"] for item in await env.listeners()] == listeners
