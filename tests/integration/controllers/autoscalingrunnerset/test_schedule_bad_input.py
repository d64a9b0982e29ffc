"""A bad minRunnersSchedule gets a clear answer: a time that is not HH:MM is refused by the API server at
apply; a day or time zone it cannot judge is reported by the controller (InvalidSpec: a Warning Event and a
Degraded condition naming the window and the field), nothing is registered or created, and fixing it heals."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.errors import Invalid
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

GOOD = {"days": "Mon-Fri", "start": "08:00", "end": "18:00", "timeZone": "Europe/Berlin", "runners": 2}


async def test_a_time_that_is_not_hh_mm_is_refused_at_apply(start_env: EnvFactory) -> None:
    async with start_env() as env:
        with pytest.raises(Invalid, match=r"minRunnersSchedule\[0\]\.start"):
            await env.create_ars(minRunnersSchedule=[{**GOOD, "start": "8am"}])


async def test_an_unknown_time_zone_is_reported_naming_the_window_and_heals_when_fixed(start_env: EnvFactory) -> None:
    async with start_env() as env:
        await env.create_ars(minRunnersSchedule=[GOOD, {**GOOD, "timeZone": "Europe/Berlim"}])

        async def degraded() -> dict[str, Any] | None:
            obj = await env.ars()
            condition = get_condition((obj.get("status") or {}).get("conditions"), "Degraded")
            return condition if condition and condition["reason"] == "InvalidSpec" else None

        condition = await eventually(degraded, "a Degraded InvalidSpec condition")
        assert "spec.minRunnersSchedule.1.timeZone" in condition["message"]
        assert "'Europe/Berlim' is not an IANA time zone name" in condition["message"]
        events = [e for e in await env.events(regarding="arc-runners") if e.get("reason") == "InvalidSpec"]
        assert events
        assert events[0]["type"] == "Warning"
        assert not env.sim.state.scale_sets  # nothing registered on the strength of bad input
        assert await env.ers() is None

        await env.kube.patch(
            AUTOSCALING_RUNNER_SETS, "arc-runners", {"spec": {"minRunnersSchedule": [GOOD]}}, namespace=env.namespace
        )
        await eventually(lambda: env.running("arc-runners"), "the scale set to run once the window is fixed")
