"""Gathering the demo's report while it runs (:mod:`arc_scaleset_lab.demo.report_data` says what it holds).

The scenario hands the recorder each snapshot its live view shows; the recorder follows the runner pods with a
watch, so a job's timeline keeps its pod's milestones after the runner and its pod are deleted (the runner's own
last state comes from the scenario's :class:`~arc_scaleset_lab.harness.runner_tracker.RunnerTracker`). At the end
:meth:`ReportRecorder.data` joins them with the simulated GitHub's job records.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.demo.report_data import ReportData, Sample, job_spans, job_waits, sample
from arc_scaleset_lab.harness.following import follow
from arc_scaleset_lab.harness.runner_tracker import RunnerTracker
from arc_scaleset_lab.harness.scale_sets import ScaleSetSnapshot


class ReportRecorder:
    """``asyncio.create_task(recorder.run())`` beside ``runners.run()``; cancel to stop. Call :meth:`record` with
    every snapshot and :meth:`started` when the workload starts (time 0 of the report)."""

    def __init__(self, kube: KubeClient, *, namespace: str, runners: RunnerTracker) -> None:
        self._kube = kube
        self._namespace = namespace
        self._runners = runners
        self._pods: dict[str, dict[str, Any]] = {}
        self._samples: list[tuple[dt.datetime, Sample]] = []  # timed when the workload's start is known
        self.started_at = dt.datetime.now(dt.UTC)

    def started(self, at: dt.datetime | None = None) -> None:
        """The workload started (at ``at``, default now): the report's time 0."""
        self.started_at = at or dt.datetime.now(dt.UTC)

    def record(self, snapshot: ScaleSetSnapshot, at: dt.datetime | None = None) -> None:
        """The scale set as seen at ``at`` (default now); only what the report draws of it is kept."""
        self._samples.append((at or dt.datetime.now(dt.UTC), sample(0.0, snapshot)))

    async def run(self) -> None:
        await follow(self._kube, resources.PODS, namespace=self._namespace, seen=self._pod, what="report recorder")

    def _pod(self, pod: dict[str, Any]) -> None:
        uid = ObjectView(pod).uid
        if uid:
            self._pods[uid] = pod

    def data(
        self,
        *,
        title: str,
        jobs: Iterable[Mapping[str, Any]],
        summary: Iterable[str] = (),
        events: Iterable[tuple[float, str]] = (),
    ) -> ReportData:
        """The report of the run so far; ``jobs``: the sim's job records."""
        start = self.started_at
        return ReportData(
            title=title,
            started_at=start,
            jobs=job_spans(jobs, start),
            waits=job_waits(self._runners.latest.values(), list(self._pods.values()), start),
            samples=tuple(replace(taken, at=(at - start).total_seconds()) for at, taken in self._samples),
            summary=tuple(summary),
            events=tuple(events),
        )
