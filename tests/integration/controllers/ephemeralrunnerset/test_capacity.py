"""Capacity truth on the EphemeralRunnerSet, against the real control plane (docs/capacity.md): a runner pod the
real scheduler cannot place for longer than the bound lowers what the set advertises and sets
``CapacityLimited``; a ResourceQuota lowers it to what it admits."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from arc_scaleset.api.keys import CONDITION_CAPACITY_LIMITED
from arc_scaleset.controllers.ephemeralrunnerset.capacity import REASON_QUOTA, REASON_UNSCHEDULABLE
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.resources import EVENTS, RESOURCE_QUOTAS
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import harness_fixture, runner_template  # noqa: F401 - fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


def limited(h: ControllerHarness, reason: str, capacity: int) -> Callable[[], Awaitable[dict[str, Any] | None]]:
    """The set's ``CapacityLimited`` condition once it is True for ``reason`` and it advertises ``capacity``."""

    async def check() -> dict[str, Any] | None:
        status = (await h.get_ers()).get("status") or {}
        condition = get_condition(status.get("conditions"), CONDITION_CAPACITY_LIMITED)
        if status.get("advertisedCapacity") != capacity or condition is None:
            return None
        return condition if (condition["status"], condition["reason"]) == ("True", reason) else None

    return check


async def warnings(h: ControllerHarness) -> set[str]:
    items = (await h.kube.list(EVENTS, namespace=h.namespace)).items
    return {e.get("reason", "") for e in items if (e.get("regarding") or {}).get("kind") == "EphemeralRunnerSet"}


async def test_a_runner_unschedulable_past_the_bound_lowers_the_capacity_and_sets_the_condition(
    h: ControllerHarness,
) -> None:
    await h.start(unschedulable_runner_bound=2.0)
    nowhere = runner_template()
    nowhere["spec"]["nodeSelector"] = {"arc-scaleset.dev/no-such-pool": "true"}  # the scheduler finds no node
    await h.create_ers(replicas=2, patch_id=0, template=nowhere)

    condition = await eventually(
        limited(h, REASON_UNSCHEDULABLE, 0), what="CapacityLimited RunnersUnschedulable", timeout=60
    )
    assert "found no node" in condition["message"]
    assert REASON_UNSCHEDULABLE in await warnings(h)


async def test_a_set_without_limits_advertises_the_ceiling_and_says_so(h: ControllerHarness) -> None:
    await h.start(max_runners_ceiling=7)
    await h.create_ers(replicas=1, patch_id=0)

    async def as_expected() -> bool:
        status = (await h.get_ers()).get("status") or {}
        condition = get_condition(status.get("conditions"), CONDITION_CAPACITY_LIMITED) or {}
        return status.get("advertisedCapacity") == 7 and condition.get("status") == "False"

    await eventually(as_expected, what="advertisedCapacity 7, CapacityLimited False")


async def test_a_pod_quota_lowers_the_capacity_to_what_it_admits(h: ControllerHarness) -> None:
    await h.kube.create(RESOURCE_QUOTAS, {"metadata": {"name": "runners"}, "spec": {"hard": {"pods": "3"}}},
                        namespace=h.namespace)  # fmt: skip
    await h.start()
    await h.create_ers(replicas=1, patch_id=0)

    condition = await eventually(limited(h, REASON_QUOTA, 3), what="CapacityLimited by the pods quota", timeout=60)
    assert "ResourceQuota runners (pods)" in condition["message"]
