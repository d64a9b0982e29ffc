"""The scale-set chart passes minRunnersSchedule (not ARC's; docs/capacity.md, "Schedules") to the scale set as
written, and renders none without it."""

from __future__ import annotations

from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset_lab.harness.helm import Helm
from tests.charts.test_scale_set_chart import only, render

WORKING_HOURS = {"days": "Mon-Fri", "start": "08:00", "end": "18:00", "timeZone": "Europe/Berlin", "runners": 3}


async def test_min_runners_schedule_reaches_the_scale_set(helm: Helm) -> None:
    ars = only(
        await render(helm, minRunners=0, maxRunners=5, minRunnersSchedule=[WORKING_HOURS]), "AutoscalingRunnerSet"
    )
    assert ars["spec"]["minRunnersSchedule"] == [WORKING_HOURS]
    AutoscalingRunnerSet.model_validate(ars)  # the CRD types accept what the chart renders


async def test_without_a_schedule_the_scale_set_has_none(helm: Helm) -> None:
    ars = only(await render(helm, minRunners=1, maxRunners=5), "AutoscalingRunnerSet")
    assert "minRunnersSchedule" not in ars["spec"]
