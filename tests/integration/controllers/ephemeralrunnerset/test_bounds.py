"""What one EphemeralRunnerSet may cost (issue 15), against the real control plane and the simulated GitHub:
a refused scale-up costs one create per pass, a set never holds more runners than the ceiling (nor a task per
missing runner), and a runner template the API server refuses registers nothing on GitHub."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.resources import EVENTS, Resource
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import harness_fixture, runner_template  # noqa: F401 - fixture
from tests.integration.controllers.task_count import peak_task_count

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota", namespaced=True)
CONTROLLER = "ephemeralrunnerset"


def passes(h: ControllerHarness, result: str | None = None) -> float:
    """EphemeralRunnerSet reconciles so far (of one ``result``: success, error, requeue_after...)."""
    assert h.manager is not None
    total = h.manager.metrics.reconcile_total
    results = [result] if result else ["success", "error", "requeue_after", "requeue"]
    return float(sum(total.labels(controller=CONTROLLER, result=r)._value.get() for r in results))


def creates(h: ControllerHarness) -> int:
    """EphemeralRunner creations the controllers' client has sent (successful or not)."""
    return h.kube.request_counts[("create", EPHEMERAL_RUNNERS.plural)]


def registrations(h: ControllerHarness) -> int:
    """JIT registrations the simulated GitHub has answered (or refused) so far."""
    return sum(1 for record in h.sim.requests if record.route == "generate_jit_config")


def degraded(h: ControllerHarness, reason: str) -> Callable[[], Awaitable[dict[str, Any] | None]]:
    async def check() -> dict[str, Any] | None:
        ers = await h.get_ers()
        condition = get_condition((ers.get("status") or {}).get("conditions"), "Degraded")
        return condition if condition and condition["status"] == "True" and condition["reason"] == reason else None

    return check


async def event_reasons(h: ControllerHarness) -> set[str]:
    items = (await h.kube.list(EVENTS, namespace=h.namespace)).items
    return {e.get("reason", "") for e in items if (e.get("regarding") or {}).get("kind") == "EphemeralRunnerSet"}


async def more_passes(h: ControllerHarness, count: int) -> None:
    """Poke the set ``count`` times (a label change) and wait for a pass after each."""
    for i in range(count):
        before = passes(h)
        await h.kube.patch(EPHEMERAL_RUNNER_SETS, "arc", {"metadata": {"labels": {"test/poke": str(i)}}},
                           namespace=h.namespace)  # fmt: skip

        async def advanced(before: float = before) -> bool:
            return passes(h) > before

        await eventually(advanced, what="another EphemeralRunnerSet pass")


async def test_a_scale_up_the_api_server_refuses_costs_one_create_per_pass_not_one_per_missing_runner(
    h: ControllerHarness,
) -> None:
    # A quota of two runners: every further create is refused (403 exceeded quota), as a webhook could. Its
    # status is written here as the quota controller would, so the test need not wait for that controller;
    # the API server's quota admission then counts each admitted runner itself.
    quota = "count/ephemeralrunners.actions.github.com"
    await h.kube.create(RESOURCE_QUOTAS, {"metadata": {"name": "runners"}, "spec": {"hard": {quota: "2"}}},
                        namespace=h.namespace)  # fmt: skip
    await h.kube.patch(RESOURCE_QUOTAS, "runners", {"status": {"hard": {quota: "2"}, "used": {quota: "0"}}},
                       namespace=h.namespace, subresource="status")  # fmt: skip
    await h.start(runner_create_concurrency=20)
    before = creates(h)
    await h.create_ers(replicas=50, patch_id=0)
    await h.wait_runners(lambda rs: len(rs) == 2, what="the two runners the quota allows")
    await eventually(lambda: _at_least(passes(h, "error"), 3), what="three refused scale-up passes")
    manager_passes = h.manager
    await h.stop()

    refused = creates(h) - before - len(await h.runners())
    assert manager_passes is not None
    failed_passes = manager_passes.metrics.reconcile_total.labels(controller=CONTROLLER, result="error")._value.get()
    assert 1 <= refused <= failed_passes, f"{refused} refused creates over {failed_passes} failed passes"


async def test_replicas_far_above_the_ceiling_keep_the_ceiling_and_no_task_per_missing_runner(
    h: ControllerHarness,
) -> None:
    await h.start(max_runners_ceiling=5, runner_create_concurrency=4)
    with peak_task_count() as tasks:
        await h.create_ers(replicas=500_000, patch_id=0)
        await h.wait_running(5)
        condition = await eventually(degraded(h, "ReplicasAboveCeiling"), what="Degraded ReplicasAboveCeiling")
        await more_passes(h, 2)
    assert "500000" in condition["message"]
    assert "--max-runners-ceiling" in condition["message"]
    assert len(await h.runners()) == 5
    assert "ReplicasAboveCeiling" in await event_reasons(h)
    # The manager, its informers, workers and HTTP connections: tens of tasks, never one per runner asked for.
    assert tasks.peak < 300, f"{tasks.peak} tasks at once"


async def test_a_runner_template_the_api_server_refuses_registers_nothing_and_is_a_condition_on_the_set(
    h: ControllerHarness,
) -> None:
    await h.start()
    refused = runner_template()
    refused["spec"]["containers"][0]["volumeMounts"] = [{"name": "work", "mountPath": "/home/runner/_work"}]
    await h.create_ers(replicas=3, patch_id=0, template=refused)

    condition = await eventually(degraded(h, "InvalidRunnerTemplate"), what="Degraded InvalidRunnerTemplate")
    assert "volumeMounts[0].name" in condition["message"], condition["message"]
    await more_passes(h, 3)
    assert registrations(h) == 0, "no runner was registered on GitHub for a pod the API server refuses"
    assert await h.runners() == []
    assert "InvalidRunnerTemplate" in await event_reasons(h)

    # The user fixes the template (a new revision): it is tried again at once, and the runners come.
    fixed = runner_template()
    fixed["spec"]["volumes"] = [{"name": "work", "emptyDir": {}}]
    fixed["spec"]["containers"][0]["volumeMounts"] = copy.deepcopy(refused["spec"]["containers"][0]["volumeMounts"])
    spec = (await h.get_ers())["spec"]["ephemeralRunnerSpec"]
    await h.patch_ers(ephemeralRunnerSpec={**spec, **fixed}, actionableRevision=1)
    await h.wait_running(3)
    condition = await eventually(_degraded_false(h), what="Degraded cleared")
    assert condition["reason"] == "AsExpected"
    assert registrations(h) == 3


def _degraded_false(h: ControllerHarness) -> Callable[[], Awaitable[dict[str, Any] | None]]:
    async def check() -> dict[str, Any] | None:
        ers = await h.get_ers()
        condition = get_condition((ers.get("status") or {}).get("conditions"), "Degraded")
        return condition if condition and condition["status"] == "False" else None

    return check


async def _at_least(value: float, minimum: float) -> bool:
    return value >= minimum


async def test_a_set_made_by_hand_with_a_template_above_the_size_bound_creates_nothing_and_says_so_once(
    h: ControllerHarness,
) -> None:
    # No scale set checked this template (issue 26, item 9): the set's own controller applies the same bound.
    await h.start(max_runner_template_bytes=4096)
    oversized = runner_template()
    oversized["spec"]["containers"][0]["env"] = [{"name": "SETUP_SCRIPT", "value": "echo setup\n" * 800}]
    await h.create_ers(replicas=2, patch_id=0, template=oversized)

    condition = await eventually(degraded(h, "RunnerTemplateTooLarge"), what="Degraded RunnerTemplateTooLarge")
    assert "the runner pod template (metadata and spec of spec.ephemeralRunnerSpec) is" in condition["message"]
    assert "above the controller's bound of 4.0 KiB (4096 bytes) (--max-runner-template-bytes)" in condition["message"]
    dry_runs = h.kube.request_counts[("create", "pods")]
    await more_passes(h, 3)
    assert await h.runners() == []
    assert registrations(h) == 0, "nothing registered on GitHub for a template no runner may carry"
    assert h.kube.request_counts[("create", "pods")] == dry_runs, "the template is not even tried on the API server"
    items = (await h.kube.list(EVENTS, namespace=h.namespace)).items
    warnings = [e for e in items if e.get("reason") == "RunnerTemplateTooLarge"]
    assert len(warnings) == 1, warnings
    assert not warnings[0].get("series"), "one Event for the problem, not one per pass"

    # Within the bound (a new revision): the runners come, and Degraded clears.
    spec = (await h.get_ers())["spec"]["ephemeralRunnerSpec"]
    await h.patch_ers(ephemeralRunnerSpec={**spec, **runner_template()}, actionableRevision=1)
    await h.wait_running(2)
    assert (await eventually(_degraded_false(h), what="Degraded cleared"))["reason"] == "AsExpected"
