"""A set's finished jobs on their way into ``status.recentJobs``: written only with a new record, kept across a
write the pacer holds back, merged into the window this process wrote last (not a stale cached copy)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from arc_scaleset.api.job_window import WindowBounds
from arc_scaleset.controllers.ephemeralrunnerset.kept_jobs import KeptJobs, finished_jobs
from arc_scaleset.controllers.runner_classification import RunnerStates, RunnerView

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
NOW = T0 + dt.timedelta(seconds=100)


def record(runner: str, *, finished: float) -> dict[str, Any]:
    stamp = (T0 + dt.timedelta(seconds=finished)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"runner": runner, "jobId": "", "repository": "", "job": "", "timeline": {"finished": stamp}}


def runners(kept: dict[str, Any]) -> list[str]:
    return [r["runner"] for r in kept["recentJobs"]]


def test_a_new_record_is_written_with_the_window_and_then_nothing_more() -> None:
    jobs = KeptJobs(WindowBounds())
    changes = jobs.changes({}, [record("a", finished=10)], now=NOW)
    assert runners(changes) == ["a"]
    jobs.written(changes)
    # The runner is still there on the next passes (the cache may not show the write yet): no write for it.
    assert jobs.changes({}, [record("a", finished=10)], now=NOW) == {}
    assert jobs.changes({"recentJobs": [record("a", finished=10)]}, [record("a", finished=10)], now=NOW) == {}


def test_a_record_held_back_by_the_pacer_is_written_later_though_its_runner_is_gone() -> None:
    jobs = KeptJobs(WindowBounds())
    assert runners(jobs.changes({}, [record("a", finished=10)], now=NOW)) == ["a"]  # not written: held back
    changes = jobs.changes({}, [], now=NOW)
    assert runners(changes) == ["a"]
    jobs.written(changes)
    assert jobs.changes({}, [], now=NOW) == {}


def test_the_window_grows_from_what_this_process_wrote_not_from_a_stale_status() -> None:
    jobs = KeptJobs(WindowBounds(max_jobs=2))
    jobs.written(jobs.changes({}, [record("a", finished=10)], now=NOW))
    changes = jobs.changes({}, [record("b", finished=20)], now=NOW)  # the cache still shows no window
    assert runners(changes) == ["b", "a"]
    jobs.written(changes)
    assert runners(jobs.changes({}, [record("c", finished=30)], now=NOW)) == ["c", "b"]


def test_before_its_first_write_a_process_starts_from_the_window_the_status_shows() -> None:
    jobs = KeptJobs(WindowBounds())
    status = {"recentJobs": [record("old", finished=5)]}
    assert runners(jobs.changes(status, [record("new", finished=10)], now=NOW)) == ["new", "old"]


def test_a_record_too_old_for_the_window_causes_no_write() -> None:
    jobs = KeptJobs(WindowBounds(max_age=60))
    assert jobs.changes({}, [record("stale", finished=10)], now=NOW) == {}  # ended 90 s ago
    assert jobs.changes({}, [], now=NOW) == {}  # and it is not kept


def test_the_records_come_from_the_sets_succeeded_runners_with_a_job_finished_or_deleting() -> None:
    def er(name: str, phase: str) -> dict[str, Any]:
        timeline = {"started": "2026-03-01T12:00:00Z"}
        return {"metadata": {"name": name, "namespace": "ns"},
                "status": {"phase": phase, "jobId": "j", "jobTimeline": timeline}}  # fmt: skip

    phases = {"done": "Succeeded", "leaving": "Succeeded", "failed": "Failed", "gone": "Succeeded"}
    cache = {name: er(name, phase) for name, phase in phases.items()}

    class Cache:
        def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
            return cache.get(name) if name != "gone" else None

        def by_owner(self, uid: str) -> list[dict[str, Any]]:
            return []

    def view(name: str, phase: str = "Succeeded", *, deleting: bool = False) -> RunnerView:
        return RunnerView(name, "ns", deleting=deleting, phase=phase, job_id="j")

    states = RunnerStates(
        finished=[view("done"), view("gone")],  # gone: no longer in the cache
        deleting=[view("leaving", deleting=True)],
        failed=[view("failed", "Failed")],
    )
    assert [r["runner"] for r in finished_jobs(states, Cache())] == ["done", "leaving"]


def test_a_runner_event_keeps_the_job_it_finished_for_the_next_write() -> None:
    jobs = KeptJobs(WindowBounds())
    timeline = {"started": "2026-03-01T12:00:05Z", "finished": "2026-03-01T12:00:10Z"}
    jobs.see({"metadata": {"name": "busy"}, "status": {"phase": "Running", "jobId": "j", "jobTimeline": timeline}})
    assert jobs.changes({}, [], now=NOW) == {}
    jobs.see({"metadata": {"name": "done"}, "status": {"phase": "Succeeded", "jobId": "j", "jobTimeline": timeline}})
    assert runners(jobs.changes({}, [], now=NOW)) == ["done"]
