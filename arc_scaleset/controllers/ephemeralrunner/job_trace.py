"""A started job's wait as one trace (docs/observability.md, "Traces"); pure.

The trace's root span, :data:`ROOT_SPAN`, runs from when GitHub queued the job to when it started; under it, one
span per phase of :func:`~arc_scaleset.api.job_timeline.phase_spans`, named after the phase, in time order, each
ending where the next begins, so the children add up to the root. Attributes use ARC's metric label names for
what ARC labels a job with (``name``/``namespace`` of the scale set, ``enterprise``, ``organization`` and
``repository`` of the job, ``job_name``, ``job_workflow_ref``), and this project's for the rest (``runner``,
``job_id``, ``workflow_run_id``, ``phase``); a value not known is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from arc_scaleset.api.job_timeline import JobTimeline, Milestone, phase_spans
from arc_scaleset.kube.views import ObjectView
from arc_scaleset.observability.traces import AttributeValue, SpanRecord, TraceRecord

ROOT_SPAN: Final = "job_wait"
PHASE_ATTRIBUTE: Final = "phase"


def job_trace(er: Mapping[str, Any], timeline: JobTimeline, scale_set: Mapping[str, str]) -> TraceRecord | None:
    """The trace of the wait of the job on runner ``er`` (its ``timeline``; ``scale_set``: the scale set's metric
    labels), ``None`` until the job started or when its timeline lacks when it was queued.

    A job that started within the second it was queued (the milestones are kept to the second) is still one
    trace: a root of no length without phases.
    """
    queued, started = timeline.milestones.get(Milestone.QUEUED), timeline.milestones.get(Milestone.STARTED)
    if queued is None or started is None:
        return None
    attributes = job_attributes(er, timeline, scale_set)
    children = tuple(
        SpanRecord(span.phase.value, span.start, span.end, {**attributes, PHASE_ATTRIBUTE: span.phase.value})
        for span in phase_spans(timeline.milestones)
    )
    return TraceRecord(root=SpanRecord(ROOT_SPAN, queued, max(started, queued), attributes), children=children)


def job_attributes(
    er: Mapping[str, Any], timeline: JobTimeline, scale_set: Mapping[str, str]
) -> dict[str, AttributeValue]:
    """The attributes every span of the job's trace carries (empty values left out)."""
    status = ObjectView(er).status
    owner, _, _ = timeline.repository.partition("/")
    found: dict[str, AttributeValue] = {
        "name": scale_set.get("name", ""),
        "namespace": scale_set.get("namespace", ""),
        "enterprise": scale_set.get("enterprise", ""),
        "organization": owner or scale_set.get("organization", ""),
        "repository": timeline.repository,
        "job_name": timeline.job,
        "job_workflow_ref": str(status.get("jobWorkflowRef") or ""),
        "runner": timeline.runner,
        "job_id": timeline.job_id,
    }
    run_id = status.get("workflowRunId")
    if isinstance(run_id, int) and not isinstance(run_id, bool):
        found["workflow_run_id"] = run_id
    return {key: value for key, value in found.items() if value not in ("", 0)}
