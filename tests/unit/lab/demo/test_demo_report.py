"""The demo's HTML report: its data made from the records the demo reads (sim jobs, runners and their pods,
snapshots), and its drawing, a pure function of that data (tests/e2e/test_e2e_demo_cold_nodes.py opens a real
one in Chromium)."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

from arc_scaleset.api.job_timeline import Milestone, Phase
from arc_scaleset.kube.client import KubeClient
from arc_scaleset_lab.demo import report_html
from arc_scaleset_lab.demo.report_data import JobSpan, ReportData, Sample, job_spans, job_waits, sample
from arc_scaleset_lab.demo.report_recorder import ReportRecorder
from arc_scaleset_lab.harness.browser import charts
from arc_scaleset_lab.harness.runner_tracker import RunnerTracker
from arc_scaleset_lab.harness.scale_sets import RunnerView, ScaleSetSnapshot

T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
CHART_KEYS = ["jobs", "waits", "runner-phases", "runner-revisions", "listener"]


def at(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def runner(uid: str, job: str, timeline: dict[Milestone, float]) -> dict[str, Any]:
    return {
        "metadata": {"name": f"runner-{uid}", "uid": uid},
        "status": {"jobId": job, "jobDisplayName": job, "jobTimeline": {m.value: at(s) for m, s in timeline.items()}},
    }


def pod(owner: str, *, created: float, scheduled: float, ready: float) -> dict[str, Any]:
    return {
        "metadata": {"name": f"pod-{owner}", "uid": f"pod-{owner}", "creationTimestamp": at(created),
                     "ownerReferences": [{"kind": "EphemeralRunner", "uid": owner, "controller": True}]},
        "status": {"conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at(scheduled)},
                                  {"type": "Ready", "status": "True", "lastTransitionTime": at(ready)}]},
    }  # fmt: skip


def snapshot(phases: dict[str, int], revision: int, owner: str | None) -> ScaleSetSnapshot:
    runners = tuple(
        RunnerView(
            name=f"r-{phase}-{i}", uid=f"{phase}-{i}", phase=phase, revision=revision, busy=False, deleting=False
        )
        for phase, count in phases.items()
        for i in range(count)
    )
    return ScaleSetSnapshot(None, None, runners, "listener", "Running", owner, 1)


def full_data() -> ReportData:
    jobs = [
        {"displayName": "build", "enqueuedAt": at(0), "startedAt": at(30), "finishedAt": at(40)},
        {"displayName": "test", "enqueuedAt": at(1), "startedAt": at(2), "finishedAt": None},
    ]
    runners = [
        runner("a", "build", {Milestone.QUEUED: 0, Milestone.ACQUIRED: 1, Milestone.STARTED: 30}),
        runner("b", "test", {Milestone.QUEUED: 1, Milestone.STARTED: 2}),
    ]
    pods = [pod("a", created=2, scheduled=25, ready=28)]
    samples = (
        sample(-5, snapshot({"Running": 2}, 1, None)),
        sample(0, snapshot({"Running": 2, "Pending": 1}, 1, "listener-pod")),
        sample(20, snapshot({"Running": 1, "Outdated": 1}, 2, "listener-pod")),
        sample(45, snapshot({"Running": 2}, 2, "listener-pod")),
    )
    return ReportData(
        title="arc-scaleset demo <test>",
        started_at=T0,
        jobs=job_spans(jobs, T0),
        waits=job_waits(runners, pods, T0),
        samples=samples,
        summary=("jobs run: 2/2",),
        events=((0.0, "ready"),),
    )


def test_job_spans_are_seconds_since_the_workload_started_in_enqueue_order() -> None:
    spans = job_spans(
        [
            {"displayName": "late", "enqueuedAt": at(5)},
            {"displayName": "early", "enqueuedAt": at(-1), "startedAt": at(2)},
        ],
        T0,
    )
    assert spans == (JobSpan("early", -1.0, 2.0, None), JobSpan("late", 5.0, None, None))


def test_a_jobs_wait_joins_the_runners_record_with_its_pod_and_adds_up_to_its_queue_to_start() -> None:
    waits = full_data().waits
    assert [w.name for w in waits] == ["build", "test"]
    build = waits[0]
    assert build.queued == 0.0
    assert build.total == 30.0
    assert build.phases[Phase.NODE] == 23.0  # the pod waited from 2 s to 25 s for a node
    assert max(build.phases, key=lambda p: build.phases[p]) is Phase.NODE


def test_a_runner_without_a_started_job_or_a_queued_time_has_no_wait() -> None:
    idle = {"metadata": {"name": "idle", "uid": "i"}, "status": {}}
    unqueued = runner("u", "j", {Milestone.STARTED: 3})
    waiting = runner("w", "k", {Milestone.QUEUED: 3})
    assert job_waits([idle, unqueued, waiting], [], T0) == ()


def test_a_job_started_in_the_second_it_was_queued_is_kept_with_no_phase() -> None:
    (quick,) = job_waits([runner("q", "quick", {Milestone.QUEUED: 4, Milestone.STARTED: 4})], [], T0)
    assert (quick.name, quick.queued, quick.total, dict(quick.phases)) == ("quick", 4.0, 0.0, {})
    page = report_html.render(ReportData(title="quick", started_at=T0, waits=(quick,)))
    (waits,) = [chart for chart in charts(page) if chart.key == "waits"]
    assert (waits.marks, waits.no_data) == (0, False)
    assert "1 job, 0 waited a second or more." in page


def test_job_counts_step_through_waiting_running_and_done() -> None:
    spans = [JobSpan("a", 0, 2, 5), JobSpan("b", 1, None, None)]
    times, counts = report_html.job_counts(spans)
    assert times == (0, 1, 2, 5)
    assert counts == ((1, 0, 0), (2, 0, 0), (1, 1, 0), (1, 0, 1))


def test_intervals_merge_runs_of_one_value_and_leave_out_none() -> None:
    samples = [(0.0, "a"), (1.0, "a"), (2.0, None), (3.0, "b")]
    assert report_html.intervals(samples, 10.0) == [(0.0, 2.0, "a"), (3.0, 10.0, "b")]
    assert report_html.intervals([], 10.0) == []


def test_ticks_are_round_and_cover_the_range() -> None:
    assert report_html.ticks(0, 10, 6) == [0, 2, 4, 6, 8, 10]
    assert report_html.ticks(-3, 47, 6) == [0, 10, 20, 30, 40]
    assert report_html.ticks(5, 5) == [5]


def test_every_chart_of_a_full_run_has_marks_and_none_says_no_data() -> None:
    page = report_html.render(full_data())
    found = charts(page)
    assert [c.key for c in found] == CHART_KEYS
    for chart in found:
        assert chart.marks > 0, chart
        assert not chart.no_data, chart
        assert chart.drawn is None  # only a browser running the page's script sets it


def test_each_phase_of_a_jobs_wait_and_each_revision_is_drawn_and_named() -> None:
    page = report_html.render(full_data())
    build = full_data().waits[0]
    assert page.count("<title>build: ") == len(build.phases) == 5
    for phase, seconds in build.phases.items():
        assert f"<title>build: {seconds:.1f} s {phase.description}</title>" in page
    assert "revision 1" in page
    assert "revision 2" in page
    assert "session held by listener-pod" in page
    assert "2 jobs, 2 waited a second or more. Jobs wait mostly for nodes: 23 s of 30 s at p95 (2 jobs)." in page


def test_the_page_is_self_contained_and_escapes_what_it_shows() -> None:
    page = report_html.render(full_data())
    assert "arc-scaleset demo &lt;test&gt;" in page
    assert "<test>" not in page
    for remote in ("http://", "https://", "//cdn", "<link", "src="):
        assert remote not in page.replace('xmlns="http://www.w3.org/2000/svg"', ""), remote


def test_a_run_with_nothing_recorded_says_no_data_in_every_chart() -> None:
    found = charts(report_html.render(ReportData(title="empty", started_at=T0)))
    assert [c.key for c in found] == CHART_KEYS
    assert all(c.no_data and c.marks == 0 for c in found)


def test_rendering_is_a_pure_function_of_the_data() -> None:
    assert report_html.render(full_data()) == report_html.render(full_data())


def test_samples_keep_the_snapshots_counts() -> None:
    taken = sample(3.0, snapshot({"Running": 2, "Pending": 1}, 4, "owner"))
    assert taken == Sample(3.0, {"Running": 2, "Pending": 1}, {4: 3}, "owner", "Running")


def test_the_recorder_times_its_samples_from_the_workloads_start_and_keeps_a_deleted_runners_job() -> None:
    tracker = RunnerTracker(cast(KubeClient, None), namespace="ns")
    recorder = ReportRecorder(cast(KubeClient, None), namespace="ns", runners=tracker)
    recorder.record(snapshot({"Running": 1}, 1, None), at=T0 - dt.timedelta(seconds=4))
    recorder.started(T0)
    recorder.record(snapshot({"Running": 2}, 1, "owner"), at=T0 + dt.timedelta(seconds=3))
    tracker.latest["b"] = runner("b", "test", {Milestone.QUEUED: 1, Milestone.STARTED: 2})  # as its watch left it
    data = recorder.data(title="t", jobs=[{"displayName": "test", "enqueuedAt": at(1)}], summary=["ok"])
    assert [(s.at, s.session_owner) for s in data.samples] == [(-4.0, None), (3.0, "owner")]
    assert [(w.name, w.queued, w.total) for w in data.waits] == [("test", 1.0, 1.0)]
    assert (data.started_at, data.jobs[0].enqueued, data.summary) == (T0, 1.0, ("ok",))
