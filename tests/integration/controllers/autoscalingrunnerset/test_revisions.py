"""Spec changes on a live AutoscalingRunnerSet (docs/revisions.md): revision bumps only on real runner-spec changes,
observedGeneration/Pending, listener recreation only for listener-relevant fields, metadata merged without
loops, and re-registration only when the scale set is definitively gone."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.listener_state import ListenerPhase
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim import FaultRule
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    RUNNER_TEMPLATE,
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster


async def patch_spec(env: ControllerHarness, spec: dict[str, Any]) -> int:
    """Patch the ARS spec; returns the new generation."""
    updated = await env.kube.patch(AUTOSCALING_RUNNER_SETS, "arc-runners", {"spec": spec}, namespace=env.namespace)
    return int(updated["metadata"]["generation"])


async def caught_up(env: ControllerHarness, generation: int) -> dict[str, Any] | None:
    obj = await env.running()
    return obj if obj is not None and obj["status"]["observedGeneration"] >= generation else None


def reconciles(env: ControllerHarness, controller: str = "autoscalingrunnerset") -> float:
    total = 0.0
    for result in ("success", "requeue_after", "error"):
        total += env.manager.metrics.reconcile_total.labels(controller=controller, result=result)._value.get()
    return total


async def more_reconciles(env: ControllerHarness, count: int) -> None:
    """Trigger ``count`` further ARS reconciles (annotation changes do not bump the generation) and wait."""
    for i in range(count):
        before = reconciles(env)
        await env.kube.patch(AUTOSCALING_RUNNER_SETS, "arc-runners",
                             {"metadata": {"annotations": {"test/poke": str(i)}}}, namespace=env.namespace)  # fmt: skip

        async def advanced(before: float = before) -> bool:
            return reconciles(env) > before

        await eventually(advanced, "another reconcile")


async def test_a_real_template_change_bumps_the_revision_once(start_env: EnvFactory) -> None:
    async with start_env() as env:
        await env.create_ars()
        await eventually(env.running, "Running")
        template = copy.deepcopy(RUNNER_TEMPLATE)
        template["spec"]["containers"][0]["image"] = "ghcr.io/actions/actions-runner:2"
        generation = await patch_spec(env, {"template": template})
        await eventually(lambda: caught_up(env, generation), "observedGeneration to catch up")
        ers = await env.ers()
        assert ers is not None
        assert ers["spec"]["actionableRevision"] == 1
        assert ers["spec"]["ephemeralRunnerSpec"]["spec"]["containers"][0]["image"].endswith(":2")
        await more_reconciles(env, 3)
        ers = await env.ers()
        assert ers is not None
        assert ers["spec"]["actionableRevision"] == 1
        await env.wait_for_event("RevisionBumped", regarding="arc-runners")


async def test_semantically_equal_template_edits_never_bump_the_revision(start_env: EnvFactory) -> None:
    async with start_env() as env:
        template = copy.deepcopy(RUNNER_TEMPLATE)
        template["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
        await env.create_ars(template=template)
        await eventually(env.running, "Running")
        ers_before = await env.ers()
        assert ers_before is not None

        variant = copy.deepcopy(template)
        container = variant["spec"]["containers"][0]
        container["env"] = []
        container["resources"] = {"limits": {"memory": "1024Mi", "cpu": "1000m"}}
        variant["metadata"] = {}
        generation = await patch_spec(env, {"template": variant})
        await eventually(lambda: caught_up(env, generation), "observedGeneration to catch up")
        await more_reconciles(env, 5)
        ers = await env.ers()
        assert ers is not None
        assert ers["spec"]["actionableRevision"] == 0
        assert ers["metadata"]["resourceVersion"] == ers_before["metadata"]["resourceVersion"]


async def test_min_max_change_recreates_the_listener_and_a_template_change_does_not(start_env: EnvFactory) -> None:
    async with start_env() as env:
        await env.create_ars(minRunners=0, maxRunners=3)
        ars = await eventually(env.running, "Running")
        name = env.listener_name(ars)
        first = await env.listener(name)
        assert first is not None

        template = copy.deepcopy(RUNNER_TEMPLATE)
        template["spec"]["containers"][0]["image"] = "other:1"
        generation = await patch_spec(env, {"template": template})
        await eventually(lambda: caught_up(env, generation), "the template change to be applied")
        same = await env.listener(name)
        assert same is not None
        assert same["metadata"]["uid"] == first["metadata"]["uid"]

        generation = await patch_spec(env, {"maxRunners": 7})
        await eventually(lambda: caught_up(env, generation), "the max change to be applied")

        async def recreated() -> dict[str, Any] | None:
            listener = await env.listener(name)
            uid_changed = listener is not None and listener["metadata"]["uid"] != first["metadata"]["uid"]
            return listener if uid_changed else None

        listener = await eventually(recreated, "the listener to be recreated")
        assert listener["spec"]["maxRunners"] == 7
        await env.wait_for_event("ListenerRecreating", regarding="arc-runners")


async def test_a_label_added_to_the_runner_set_by_someone_else_survives_without_a_patch_loop(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        await env.create_ars()
        await eventually(env.running, "Running")
        labelled = await env.kube.patch(EPHEMERAL_RUNNER_SETS, "arc-runners",
                                        {"metadata": {"labels": {"cost-center.example.com/team": "42"}}},
                                        namespace=env.namespace)  # fmt: skip
        await more_reconciles(env, 5)
        ers = await env.ers()
        assert ers is not None
        assert ers["metadata"]["labels"]["cost-center.example.com/team"] == "42"
        assert ers["metadata"]["resourceVersion"] == labelled["metadata"]["resourceVersion"]


async def test_a_spec_change_is_pending_until_applied_then_running_with_the_new_generation(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        await env.create_ars()
        ars = await eventually(env.running, "Running")
        scale_set_id = int(ars["metadata"]["annotations"]["runner-scale-set-id"])
        # GitHub fails while the change is applied: the pass cannot complete, so the set stays Pending.
        env.sim.faults.add(FaultRule(route="get_scale_set", status=503, count=None))
        generation = await patch_spec(env, {"maxRunners": 4})

        async def pending() -> dict[str, Any] | None:
            obj = await env.ars()
            status = obj.get("status") or {}
            return obj if status.get("phase") == "Pending" else None

        obj = await eventually(pending, "phase Pending")
        assert obj["status"]["observedGeneration"] < generation
        env.sim.faults.clear()
        obj = await eventually(lambda: caught_up(env, generation), "Running at the new generation")
        assert obj["metadata"]["annotations"]["runner-scale-set-id"] == str(scale_set_id)
        assert len(env.sim.state.scale_sets) == 1


async def test_a_scale_set_deleted_on_github_is_registered_again_and_the_new_id_reaches_the_children(
    start_env: EnvFactory,
) -> None:
    async with start_env(scale_set_verify_interval=1.0) as env:
        await env.create_ars()
        ars = await eventually(env.running, "Running")
        old_id = int(ars["metadata"]["annotations"]["runner-scale-set-id"])
        name = env.listener_name(ars)
        env.sim.state.delete_scale_set(None, old_id)

        async def reregistered() -> dict[str, Any] | None:
            obj = await env.ars()
            new_id = int(obj["metadata"]["annotations"].get("runner-scale-set-id") or 0)
            return obj if new_id and new_id != old_id else None

        obj = await eventually(reregistered, "a new scale set id")
        new_id = int(obj["metadata"]["annotations"]["runner-scale-set-id"])
        assert [s.id for s in env.sim.state.scale_sets.values()] == [new_id]

        async def children_updated() -> bool:
            ers = await env.ers()
            listener = await env.listener(name)
            return (
                ers is not None
                and ers["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] == new_id
                and ers["spec"]["actionableRevision"] == 1
                and listener is not None
                and listener["spec"]["runnerScaleSetId"] == new_id
            )

        await eventually(children_updated, "the runner set and listener to use the new id")
        await env.wait_for_event("ScaleSetReRegistered", regarding="arc-runners")


async def test_a_github_server_error_never_re_registers_the_scale_set(start_env: EnvFactory) -> None:
    async with start_env(scale_set_verify_interval=0.5) as env:
        await env.create_ars()
        ars = await eventually(env.running, "Running")
        scale_set_id = ars["metadata"]["annotations"]["runner-scale-set-id"]
        env.sim.faults.add(FaultRule(route="get_scale_set", status=503, count=None))

        async def degraded() -> bool:
            return "GitHubUnavailable" in await env.event_reasons(regarding="arc-runners")

        await eventually(degraded, "a GitHubUnavailable warning")
        await more_reconciles(env, 3)
        env.sim.faults.clear()
        obj = await env.ars()
        assert obj["metadata"]["annotations"]["runner-scale-set-id"] == scale_set_id
        assert [str(s.id) for s in env.sim.state.scale_sets.values()] == [scale_set_id]


async def test_listener_scaling_the_runner_set_never_rewrites_the_scale_set(start_env: EnvFactory) -> None:
    """Each job makes the listener patch the ERS; the ARS controller sees every patch (it owns the ERS) but
    has nothing to write: no status churn per job."""
    async with start_env() as env:
        await env.create_ars()
        await eventually(env.running, "Running")

        # No listener process runs here: say what a polling listener says, so the scale set's Ready condition
        # settles (it follows the listener's health) before the writes are counted.
        async def listener_pod() -> dict[str, Any] | None:
            listeners = await env.listeners()
            return await env.listener_pod(listeners[0]["metadata"]["name"]) if listeners else None

        await eventually(listener_pod, "the listener pod")
        await env.report_listener_state(ListenerPhase.POLLING)

        async def ready() -> dict[str, Any] | None:
            obj = await env.ars()
            conditions = (obj.get("status") or {}).get("conditions") or []
            return obj if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) else None

        await eventually(ready, "the scale set Ready with a polling listener")
        settled = await env.ars()
        for patch_id in range(1, 6):
            before = reconciles(env)
            await env.kube.patch(EPHEMERAL_RUNNER_SETS, "arc-runners", {"spec": {"replicas": patch_id % 3,
                                 "patchID": patch_id}}, namespace=env.namespace)  # fmt: skip

            async def advanced(before: float = before) -> bool:
                return reconciles(env) > before

            await eventually(advanced, "the ARS to reconcile after the ERS patch")
        after = await env.ars()
        # Its runner counts follow the runners the patches made (paced writes); nothing else is rewritten.
        assert after["metadata"]["generation"] == settled["metadata"]["generation"]
        assert after["metadata"].get("annotations") == settled["metadata"].get("annotations")
        assert after["status"]["phase"] == settled["status"]["phase"]
        assert after["status"].get("conditions") == settled["status"].get("conditions")
