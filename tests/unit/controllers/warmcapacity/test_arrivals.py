"""The forecast's feed (docs/capacity.md, "Forecast"): one arrival per job a runner shows, at the time it is seen;
runners without a job (``minRunners``, schedules, replacements) are no arrival."""

from __future__ import annotations

import datetime as dt
from typing import Any

from arc_scaleset.api.keys import LABEL_SCALE_SET_NAME
from arc_scaleset.clock import FakeClock
from arc_scaleset.controllers.warmcapacity.arrivals import JobArrivals, job_appeared

START = dt.datetime(2026, 1, 15, 9, 0, tzinfo=dt.UTC)


def runner(name: str, *, scale_set: str = "linux", namespace: str = "team-a", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": {LABEL_SCALE_SET_NAME: scale_set},
        },
        "status": status,
    }


def test_a_runner_without_a_job_is_no_arrival() -> None:
    arrivals = JobArrivals(FakeClock(start=START))
    assert list(arrivals.record(runner("r1"))) == []
    assert arrivals.arrivals("team-a", "linux", START + dt.timedelta(minutes=1)) == []


async def test_each_job_is_one_arrival_at_the_time_it_is_seen_once() -> None:
    clock = FakeClock(start=START)
    arrivals = JobArrivals(clock)
    arrivals.record(runner("r1", jobId="job-1"))
    arrivals.record(runner("r1", jobId="job-1"))  # the same runner again: an update, a resync
    await clock.advance(120)
    arrivals.record(runner("r2", jobRequestId=7))  # as ARC's listeners up to 0.12 wrote it
    arrivals.record(runner("r3", namespace="team-b", jobId="job-3"))
    now = START + dt.timedelta(minutes=5)
    assert arrivals.arrivals("team-a", "linux", now) == [START, START + dt.timedelta(minutes=2)]
    assert arrivals.arrivals("team-b", "linux", now) == [START + dt.timedelta(minutes=2)]


def test_an_update_counts_only_when_the_job_appears() -> None:
    idle, busy = runner("r1"), runner("r1", jobId="job-1")
    assert job_appeared(idle, busy)
    assert not job_appeared(busy, busy)
    assert not job_appeared(idle, idle)
