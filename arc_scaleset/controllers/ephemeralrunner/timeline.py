"""A busy runner's job timeline, observed once its job started (docs/observability.md, "Where a job's wait went").

The runner controller holds both halves of a job's timeline in its caches: the listener's record on the
runner's status (``status.jobTimeline``) and the runner's pod. Once the job has started, its wait is complete;
:func:`observe_job_wait` divides it into phases (:mod:`arc_scaleset.api.job_timeline`) and observes them in
``gha_controller_job_wait_phase_seconds``, once per runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arc_scaleset.api.job_timeline import JobTimeline, Milestone
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.metrics import runner_set_labels
from arc_scaleset.kube.views import ObjectView


def observe_job_wait(ctx: ControllerContext, er: Mapping[str, Any], pod: Mapping[str, Any]) -> None:
    """Observe the wait of the job on ``er`` (whose pod is ``pod``) once it started; nothing before that, or
    when the listener's record lacks when the job was queued (an older listener)."""
    if not ctx.metrics.enabled:
        return
    timeline = JobTimeline.of_runner(er, pod)
    if timeline is None or Milestone.STARTED not in timeline.milestones:
        return
    phases = timeline.wait_phases()
    if phases:
        ctx.metrics.observe_job_wait(runner_set_labels(er), ObjectView(er).uid, phases)
