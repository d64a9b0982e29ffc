"""The forecast's feed: job arrivals per scale set, from what the controller's EphemeralRunner cache shows
(docs/capacity.md, "Forecast").

An EphemeralRunner that shows a job (``status.jobId``, or ``jobRequestId`` as ARC's listeners up to 0.12 wrote it:
the listener records each started job on its runner) is one arrival of its scale set, at the time it is seen,
counted once per job. Runner creations are not arrivals: ``minRunners``, ``minRunnersSchedule`` and replacements
of failed runners create runners without a job. The times go to an
:class:`~arc_scaleset.controllers.warmcapacity.forecast.ArrivalHistory` (bounded per scale set); the history is
in memory and lost with the process.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import Iterable
from typing import Final

from arc_scaleset.api.keys import LABEL_SCALE_SET_NAME
from arc_scaleset.api.views import EphemeralRunnerView
from arc_scaleset.clock import Clock
from arc_scaleset.controllers.warmcapacity.forecast import ArrivalHistory
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.views import Object

JOBS_REMEMBERED: Final = 10_000
"""Jobs (by ID) remembered over every scale set, so a runner seen twice with one job counts once."""


def job_of(runner: Object) -> str:
    """The job a runner shows, as a key (``""``: none)."""
    view = EphemeralRunnerView(runner)
    if view.job_id:
        return f"id:{view.job_id}"
    return f"request:{view.job_request_id}" if view.job_request_id > 0 else ""


def job_appeared(old: Object, new: Object) -> bool:
    """An update predicate: the runner shows a job it did not show before."""
    return bool(job_of(new)) and not job_of(old)


class JobArrivals:
    """Records each job arrival once into an :class:`ArrivalHistory` keyed by ``(namespace, scale set)``."""

    def __init__(self, clock: Clock, history: ArrivalHistory | None = None) -> None:
        self.clock = clock
        self.history = history if history is not None else ArrivalHistory()
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()

    def record(self, runner: Object) -> Iterable[Request]:
        """A :data:`~arc_scaleset.kube.controller.MapFunc` that queues nothing (pools that forecast are looked at
        every minute): remember the job ``runner`` shows, if it is new."""
        view = EphemeralRunnerView(runner)
        job = job_of(runner)
        scale_set = view.labels.get(LABEL_SCALE_SET_NAME)
        if not job or not scale_set:
            return ()
        seen = (view.namespace, job)
        if seen in self._seen:
            return ()
        self._seen[seen] = None
        if len(self._seen) > JOBS_REMEMBERED:
            self._seen.popitem(last=False)
        self.history.record((view.namespace, scale_set), self.clock.now())
        return ()

    def arrivals(self, namespace: str, name: str, now: dt.datetime) -> list[dt.datetime]:
        """The scale set's arrival times within the history before ``now``."""
        return self.history.arrivals((namespace, name), now)
