"""The window of finished jobs a set keeps (``status.recentJobs``): a finished runner's record, the pod's half of
the timeline added by the runner's done write, and the window bounded by count and age, newest first."""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.api.job_timeline import Milestone, Phase
from arc_scaleset.api.job_window import (
    WindowBounds,
    finished_job,
    merge_window,
    runner_online,
    timeline_completion,
    window_timelines,
)

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
BOUNDS = WindowBounds(max_jobs=3, max_age=600)


def stamp(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def record(runner: str, *, finished: float) -> dict[str, Any]:
    timeline = {"queued": stamp(finished - 60), "started": stamp(finished - 30), "finished": stamp(finished)}
    return {"runner": runner, "jobId": f"job-{runner}", "repository": "octo/app", "job": "build", "timeline": timeline}


def runner(phase: str, timeline: dict[str, str] | None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "jobId": "j1", "jobRepositoryName": "octo/app", "jobDisplayName": "b"}
    if timeline is not None:
        status["jobTimeline"] = timeline
    return {"metadata": {"name": "r1", "namespace": "ns", "uid": "u1"}, "status": status}


def finished_pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "r1", "namespace": "ns", "creationTimestamp": stamp(2)},
        "status": {
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(43)}],
            "containerStatuses": [{"name": "runner", "state": {"terminated": {
                "exitCode": 0, "startedAt": stamp(45), "finishedAt": stamp(120)}}}],
        },
    }  # fmt: skip


def test_the_done_write_adds_the_pods_milestones_to_the_listeners_record_and_nothing_without_one() -> None:
    listener = {"queued": stamp(0), "started": stamp(50)}
    assert timeline_completion(runner("Running", listener), finished_pod()) == {
        "jobTimeline": {"podCreated": stamp(2), "podScheduled": stamp(43), "podRunning": stamp(45),
                        "finished": stamp(120)},
    }  # fmt: skip
    # No job recorded by a listener: the pod's times alone are no job's timeline.
    assert timeline_completion(runner("Running", None), finished_pod()) == {}


def test_a_succeeded_runner_with_a_recorded_timeline_gives_a_record_and_no_other_runner_does() -> None:
    timeline = {"queued": stamp(0), "started": stamp(50), "finished": stamp(120)}
    assert finished_job(runner("Succeeded", timeline)) == {
        "runner": "r1", "jobId": "j1", "repository": "octo/app", "job": "b", "timeline": timeline,
    }  # fmt: skip
    assert finished_job(runner("Running", timeline)) is None
    assert finished_job(runner("Failed", timeline)) is None
    assert finished_job(runner("Succeeded", None)) is None


def test_the_window_is_newest_first_one_record_per_runner_and_bounded_by_count() -> None:
    window = merge_window([record("b", finished=20), record("a", finished=10)], [record("c", finished=30)],
                          now=T0, bounds=BOUNDS)  # fmt: skip
    assert [r["runner"] for r in window] == ["c", "b", "a"]
    window = merge_window(window, [record("d", finished=40), record("b", finished=20)], now=T0, bounds=BOUNDS)
    assert [r["runner"] for r in window] == ["d", "c", "b"]  # a is out: three at most, b once


def test_jobs_older_than_the_window_and_records_without_a_time_are_dropped() -> None:
    now = T0 + dt.timedelta(seconds=1000)
    window = merge_window(
        [record("old", finished=300), {"runner": "no-time", "timeline": {}}, {"runner": ""}, "junk"],  # type: ignore[list-item]
        [record("new", finished=900)],
        now=now,
        bounds=BOUNDS,
    )
    assert [r["runner"] for r in window] == ["new"]  # old ended 700 s ago, beyond 600


def test_jobs_that_ended_in_the_same_second_keep_the_order_they_were_added_in() -> None:
    window = merge_window([], [record("first", finished=10), record("second", finished=10)], now=T0, bounds=BOUNDS)
    assert [r["runner"] for r in window] == ["second", "first"]
    again = merge_window(window, [record("third", finished=10)], now=T0, bounds=BOUNDS)
    assert [r["runner"] for r in again] == ["third", "second", "first"]


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 900)), max_size=30))
def test_any_sequence_of_records_gives_a_bounded_window_of_distinct_recent_runners_newest_first(
    added: list[tuple[str, int]],
) -> None:
    now = T0 + dt.timedelta(seconds=900)
    window: list[dict[str, Any]] = []
    for name, finished in added:
        window = merge_window(window, [record(name, finished=finished)], now=now, bounds=BOUNDS)
    assert len(window) <= BOUNDS.max_jobs
    assert len({r["runner"] for r in window}) == len(window)
    ends = [r["timeline"]["finished"] for r in window]
    assert ends == sorted(ends, reverse=True)
    assert all(end >= stamp(300) for end in ends)


def test_a_windows_timelines_carry_the_job_and_its_phases() -> None:
    kept = record("a", finished=120)
    kept["timeline"]["podScheduled"] = stamp(80)  # queued at 60, started at 90
    (timeline,) = window_timelines([kept], now=T0 + dt.timedelta(seconds=200))
    assert (timeline.runner, timeline.job_id, timeline.repository, timeline.job) == ("a", "job-a", "octo/app", "build")
    assert timeline.milestones[Milestone.FINISHED] == T0 + dt.timedelta(seconds=120)
    assert timeline.wait_phases() == {Phase.NODE: 20, Phase.JOB_START: 10}
    assert timeline.run_seconds == 30
    assert window_timelines(None, now=T0) == []
    assert window_timelines("junk", now=T0) == []


def test_the_runner_goes_online_in_its_ready_write_as_a_finished_pod_no_longer_tells_when() -> None:
    condition = {"type": "Ready", "status": "True", "lastTransitionTime": stamp(48)}
    ready = {"metadata": {"name": "r1", "creationTimestamp": stamp(2)}, "status": {"conditions": [condition]}}
    assert runner_online(ready) == {"jobTimeline": {"runnerOnline": stamp(48)}}
    assert runner_online(finished_pod()) == {}
    # The pod's times alone (an idle runner's runnerOnline) are no job: nothing is completed or kept for them.
    idle = runner("Succeeded", {"runnerOnline": stamp(48)})
    assert timeline_completion(idle, finished_pod()) == {}
    assert finished_job(idle) is None
