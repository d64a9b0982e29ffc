"""A busy runner's job timeline, observed once its job started (docs/observability.md, "Where a job's wait went",
"Traces").

The runner controller holds both halves of a job's timeline in its caches: the listener's record on the
runner's status (``status.jobTimeline``) and the runner's pod. Once the job has started, its wait is complete;
:class:`JobWaits` divides it into phases (:mod:`arc_scaleset.api.job_timeline`) and observes them in
``gha_controller_job_wait_phase_seconds`` and, when tracing is on, exports them as one trace
(:mod:`.job_trace`), once per runner.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

from arc_scaleset.api.job_timeline import JobTimeline, Milestone
from arc_scaleset.controllers.ephemeralrunner.job_trace import job_trace
from arc_scaleset.controllers.metrics import ControllerMetrics, runner_set_labels
from arc_scaleset.kube.views import ObjectView
from arc_scaleset.observability.traces import TraceSink

OBSERVED_KEPT: Final = 10_000
"""Runners whose job's wait was observed, remembered oldest first: a busy runner is gone within hours."""


class JobWaits:
    """Observes each started job's wait once per runner (by UID) in this process: in ``metrics`` (when enabled)
    and as a trace in ``traces`` (when given). A controller restarted while a job runs observes it again."""

    def __init__(self, metrics: ControllerMetrics, traces: TraceSink | None) -> None:
        self._metrics = metrics
        self._traces = traces
        self._observed: OrderedDict[str, None] = OrderedDict()

    def observe(self, er: Mapping[str, Any], pod: Mapping[str, Any]) -> None:
        """Observe the wait of the job on ``er`` (whose pod is ``pod``) once it started; nothing before that, or
        when the listener's record lacks when the job was queued (an older listener)."""
        if not self._metrics.enabled and self._traces is None:
            return
        uid = ObjectView(er).uid
        # Every pass of a busy runner comes here: the UID first, before the timeline is built again.
        if uid in self._observed:
            return
        timeline = JobTimeline.of_runner(er, pod)
        if timeline is None or Milestone.STARTED not in timeline.milestones:
            return
        self._remember(uid)
        labels = runner_set_labels(er)
        phases = timeline.wait_phases()
        if phases:
            self._metrics.observe_job_wait(labels, phases)
        if self._traces is not None and (trace := job_trace(er, timeline, labels)) is not None:
            self._traces.export(trace)

    def _remember(self, uid: str) -> None:
        self._observed[uid] = None
        if len(self._observed) > OBSERVED_KEPT:
            self._observed.popitem(last=False)
