"""One set's finished jobs on their way into its ``status.recentJobs`` (:mod:`arc_scaleset.api.job_window`).

A runner that finished its job is deleted within a pass or two, and its record with it. :class:`KeptJobs` (in the
set's memory slot) holds the records seen until a status write carried them: those of the runners' events
(:meth:`KeptJobs.see`; a delete event still has the runner the cache no longer holds) and those a pass finds in
the cache (:func:`finished_jobs`; after a restart, before any event). So a write the counts' pacer held back
(:mod:`.counts`) still carries a job whose runner is gone by then.

No write of its own: :meth:`KeptJobs.changes` adds ``recentJobs`` to the pass's status write only when a record
is new. With the runner counts in status a runner's finish changes them anyway, and the record rides that write;
without them (the default) the new record is that write's one reason, and the finished-runner marker rides it. The
window the new records are merged into is the one this process wrote last, or, before its first write, the one
the set's status shows (the controller is the window's only writer, and the cache may not show its last write
yet: a window merged from a stale copy would drop its newest records).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from arc_scaleset.api.job_window import RECENT_JOBS, WindowBounds, finished_job, merge_window
from arc_scaleset.api.keys import EphemeralRunnerPhase
from arc_scaleset.controllers.ephemeralrunnerset.runner_index import RunnerSource
from arc_scaleset.controllers.runner_classification import RunnerStates


def finished_jobs(states: RunnerStates, runners: RunnerSource) -> Iterator[dict[str, Any]]:
    """The records of the jobs the set's Succeeded runners finished, their objects read from ``runners`` (the
    cache): finished ones and deleting ones (a runner deletes itself right after its job)."""
    for runner in (*states.finished, *states.deleting):
        if runner.phase == EphemeralRunnerPhase.SUCCEEDED and runner.has_job:
            obj = runners.get(runner.namespace, runner.name)
            if obj is not None and (record := finished_job(obj)) is not None:
                yield record


class KeptJobs:
    """The records seen and not yet written, and the window this process wrote last, of one set."""

    def __init__(self, bounds: WindowBounds) -> None:
        self.bounds = bounds
        self._seen: dict[str, dict[str, Any]] = {}
        self._written: list[dict[str, Any]] = []

    def see(self, runner: Mapping[str, Any]) -> None:
        """Keep the record of the job ``runner`` finished, if it did (:func:`finished_job`)."""
        if (record := finished_job(runner)) is not None:
            self._seen[str(record["runner"])] = record

    def changes(
        self, status: Mapping[str, Any], finished: Iterable[Mapping[str, Any]], *, now: dt.datetime
    ) -> dict[str, Any]:
        """``{"recentJobs": window}`` when a record of ``finished`` (or one an earlier pass saw) changes the window,
        else ``{}``; the records are kept until :meth:`written`. A record already kept, or too old for the window,
        changes nothing: the window is never rewritten for its own sake (its trimming rides a new record)."""
        for record in finished:
            self._seen[str(record["runner"])] = dict(record)
        if not self._seen:
            return {}
        shown = status.get(RECENT_JOBS)
        known = self._written or (shown if isinstance(shown, list) else [])
        window = merge_window(known, self._seen.values(), now=now, bounds=self.bounds)
        if window == merge_window(known, (), now=now, bounds=self.bounds):
            self._seen.clear()
            return {}
        return {RECENT_JOBS: window}

    def written(self, changes: Mapping[str, Any]) -> None:
        """A status write of ``changes`` succeeded: the window it carried (if any) is what this set holds now."""
        if RECENT_JOBS in changes:
            self._written = list(changes[RECENT_JOBS])
            self._seen.clear()
