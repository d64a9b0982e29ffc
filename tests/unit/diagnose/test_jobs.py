"""``arc-scaleset jobs`` and explain's job-wait line on built snapshots: where each job's wait went, the phase
the window's jobs waited in most at p95, and nothing to say without jobs."""

from __future__ import annotations

import datetime as dt
from typing import Any

from arc_scaleset.diagnose.jobs import jobs_document, render_jobs
from arc_scaleset.diagnose.rules import explain
from arc_scaleset.diagnose.snapshot import Snapshot

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


def stamp(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def runner(name: str, *, queued: float, started: float | None, job: str = "build") -> dict[str, Any]:
    timeline = {"queued": stamp(queued), "acquired": stamp(queued + 1)}
    if started is not None:
        timeline["started"] = stamp(started)
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "status": {"phase": "Running", "jobId": f"job-{name}", "jobRepositoryName": "octo/app",
                   "jobDisplayName": job, "jobTimeline": timeline},
    }  # fmt: skip


def pod(name: str, *, created: float, scheduled: float | None, ready: float | None = None) -> dict[str, Any]:
    conditions = []
    if scheduled is not None:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(scheduled)})
    if ready is not None:
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": stamp(ready)})
    return {
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": stamp(created),
                     "ownerReferences": [{"uid": f"uid-{name}", "controller": True}]},
        "status": {"conditions": conditions},
    }  # fmt: skip


def snapshot(runners: list[dict[str, Any]], pods: list[dict[str, Any]], *, now: float = 100) -> Snapshot:
    scale_set = {"metadata": {"name": "arc", "namespace": "ns", "uid": "u"}, "spec": {}, "status": {}}
    return Snapshot(taken_at=T0 + dt.timedelta(seconds=now), scale_set=scale_set, runners=runners, runner_pods=pods)


def cold_nodes() -> Snapshot:
    # Two jobs that waited for a node (41 s and 30 s), one still waiting for one (since 60 s), one warm start.
    return snapshot(
        [
            runner("r1", queued=0, started=50),
            runner("r2", queued=10, started=48),
            runner("r3", queued=40, started=None),
            runner("r4", queued=90, started=93),
            {"metadata": {"name": "idle", "namespace": "ns", "uid": "uid-idle"}, "status": {"phase": "Running"}},
        ],
        [
            pod("r1", created=2, scheduled=43, ready=48),
            pod("r2", created=12, scheduled=42, ready=46),
            pod("r3", created=42, scheduled=None),
            pod("r4", created=-300, scheduled=-299, ready=-290),
        ],
    )


def test_each_job_says_where_its_wait_went_longest_wait_first() -> None:
    doc = jobs_document(cold_nodes())
    assert [job["runner"] for job in doc["jobs"]] == ["r3", "r1", "r2", "r4"]
    r1 = doc["jobs"][1]
    assert r1["waitSeconds"] == 50
    assert r1["runSeconds"] is None  # still running
    assert r1["phases"] == {"acquisition": 1, "runner_creation": 1, "node": 41, "runner_registration": 5,
                            "job_start": 2}  # fmt: skip
    assert r1["summary"] == "41 s waiting for a node"
    r3 = doc["jobs"][0]
    assert (r3["started"], r3["phases"]["node"]) == (False, 58)
    assert doc["jobs"][3]["summary"] == "2 s for the job to start on its runner"


def test_the_slowest_phase_of_the_window_is_said_at_p95() -> None:
    top = jobs_document(cold_nodes())["slowestPhase"]
    assert top["phase"] == "node"
    assert top["line"] == "jobs wait mostly for nodes: 58 s of 60 s at p95 (4 jobs)"


def test_the_text_screen_has_one_line_per_job_and_the_slowest_phase() -> None:
    screen = render_jobs(cold_nodes()).splitlines()
    assert screen[0] == "ns/arc: 4 jobs"
    assert screen[1] == "  r3  octo/app build: waiting for 60 s, 58 s waiting for a node"
    assert screen[2] == "  r1  octo/app build: started after 50 s, 41 s waiting for a node"
    assert screen[-1] == "  jobs wait mostly for nodes: 58 s of 60 s at p95 (4 jobs)"


def test_explain_says_where_jobs_wait_after_its_other_findings() -> None:
    lines = [finding.line for finding in explain(cold_nodes())]
    assert lines[-1] == "jobs wait mostly for nodes: 58 s of 60 s at p95 (4 jobs)"


def test_short_waits_and_no_jobs_are_not_worth_a_line() -> None:
    warm = snapshot([runner("r4", queued=90, started=93)], [pod("r4", created=-300, scheduled=-299)])
    assert "job_wait" not in {finding.rule for finding in explain(warm)}
    empty = snapshot([], [])
    assert jobs_document(empty) == {"namespace": "ns", "name": "arc", "jobs": [], "slowestPhase": None}
    assert render_jobs(empty) == "ns/arc: 0 jobs"


def kept(name: str, *, queued: float, scheduled: float, started: float, finished: float) -> dict[str, Any]:
    """A finished job as its runner set keeps it once the runner is gone (``status.recentJobs``)."""
    timeline = {"queued": stamp(queued), "podCreated": stamp(queued + 1), "podScheduled": stamp(scheduled),
                "started": stamp(started), "finished": stamp(finished)}  # fmt: skip
    return {"runner": name, "jobId": f"job-{name}", "repository": "octo/app", "job": "test", "timeline": timeline}


def test_finished_jobs_the_runner_set_keeps_are_listed_with_their_phases_after_their_runners_are_gone() -> None:
    base = snapshot([runner("r1", queued=0, started=50)], [pod("r1", created=2, scheduled=43, ready=48)])
    window = [kept("gone", queued=10, scheduled=45, started=50, finished=80),
              kept("r1", queued=0, scheduled=43, started=50, finished=99)]  # fmt: skip
    base.runner_sets = [{"metadata": {"name": "arc-x", "namespace": "ns"}, "status": {"recentJobs": window}}]

    doc = jobs_document(base)
    # r1 is still held: it is listed once, from the runner; the gone runner's job from the window.
    assert [job["runner"] for job in doc["jobs"]] == ["r1", "gone"]
    gone = doc["jobs"][1]
    assert (gone["started"], gone["finished"], gone["runSeconds"]) == (True, True, 30)
    assert gone["phases"] == {"runner_creation": 1, "node": 34, "job_start": 5}
    assert doc["jobs"][0]["finished"] is False
    assert (
        render_jobs(base).splitlines()[2] == "  gone  octo/app test: done, started after 40 s, 34 s waiting for a node"
    )
