"""A job's timeline: milestones from the listener's record and the runner pod, and the wait divided into phases."""

from __future__ import annotations

import datetime as dt
import itertools

from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.api.job_timeline import (
    JobTimeline,
    Milestone,
    Phase,
    PhaseSpan,
    describe,
    listener_milestones,
    percentile,
    phase_spans,
    pod_milestones,
    slowest,
    wait_phases,
)

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def stamp(seconds: float) -> str:
    return at(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_job_that_waits_for_a_new_runner_on_a_new_node_spends_its_wait_in_each_phase() -> None:
    milestones = {
        Milestone.QUEUED: at(0),
        Milestone.ACQUIRED: at(1),
        Milestone.POD_CREATED: at(2),
        Milestone.POD_SCHEDULED: at(43),
        Milestone.POD_RUNNING: at(45),
        Milestone.RUNNER_ONLINE: at(48),
        Milestone.ASSIGNED: at(49),
        Milestone.STARTED: at(50),
    }
    assert wait_phases(milestones) == {
        Phase.ACQUISITION: 1,
        Phase.RUNNER_CREATION: 1,
        Phase.NODE: 41,
        Phase.POD_START: 2,
        Phase.RUNNER_REGISTRATION: 3,
        Phase.ASSIGNMENT: 1,
        Phase.JOB_START: 1,
    }
    assert slowest(wait_phases(milestones)) == (Phase.NODE, 41)
    assert describe(Phase.NODE, 41.2) == "41 s waiting for a node"
    assert describe(Phase.RUNNER_REGISTRATION, 3) == "3 s for the runner to register"


def test_a_warm_runners_pod_milestones_before_the_job_was_queued_take_none_of_its_wait() -> None:
    milestones = {
        Milestone.POD_CREATED: at(-600),
        Milestone.POD_SCHEDULED: at(-599),
        Milestone.POD_RUNNING: at(-598),
        Milestone.RUNNER_ONLINE: at(-590),
        Milestone.QUEUED: at(0),
        Milestone.ACQUIRED: at(1),
        Milestone.ASSIGNED: at(2),
        Milestone.STARTED: at(3),
    }
    assert wait_phases(milestones) == {Phase.ACQUISITION: 1, Phase.ASSIGNMENT: 1, Phase.JOB_START: 1}


def test_a_job_still_waiting_has_the_time_so_far_in_the_phase_it_is_in() -> None:
    milestones = {Milestone.QUEUED: at(0), Milestone.ACQUIRED: at(1), Milestone.POD_CREATED: at(2)}
    assert wait_phases(milestones, now=at(30)) == {Phase.ACQUISITION: 1, Phase.RUNNER_CREATION: 1, Phase.NODE: 28}
    assert wait_phases(milestones) == {}


def test_the_time_before_the_listener_was_offered_the_job_is_githubs() -> None:
    milestones = {Milestone.QUEUED: at(0), Milestone.OFFERED: at(2), Milestone.ACQUIRED: at(3),
                  Milestone.STARTED: at(5)}  # fmt: skip
    assert wait_phases(milestones) == {Phase.OFFER: 2, Phase.ACQUISITION: 1, Phase.JOB_START: 2}
    assert describe(Phase.OFFER, 2) == "2 s for GitHub to offer it to the scale set"


def test_a_missing_milestone_hands_its_time_to_the_next_phase() -> None:
    milestones = {Milestone.QUEUED: at(0), Milestone.POD_SCHEDULED: at(10), Milestone.STARTED: at(12)}
    assert wait_phases(milestones) == {Phase.NODE: 10, Phase.JOB_START: 2}


milestone_times = st.dictionaries(
    st.sampled_from(list(Milestone)), st.integers(min_value=-1000, max_value=1000).map(at), min_size=0
)


@given(milestone_times)
def test_the_phases_add_up_to_the_whole_wait_and_none_is_negative(milestones: dict[Milestone, dt.datetime]) -> None:
    phases = wait_phases(milestones, now=at(2000))
    assert all(seconds > 0 for seconds in phases.values())
    queued = milestones.get(Milestone.QUEUED)
    end = milestones.get(Milestone.STARTED, at(2000))
    if queued is not None and end >= queued:
        assert abs(sum(phases.values()) - (end - queued).total_seconds()) < 1e-6
    else:
        assert phases == {}


def test_the_phases_as_spans_follow_each_other_in_time_from_queued_to_started() -> None:
    milestones = {
        Milestone.POD_CREATED: at(-600),  # a warm runner: its pod's milestones end empty phases
        Milestone.QUEUED: at(0),
        Milestone.OFFERED: at(2),
        Milestone.ACQUIRED: at(3),
        Milestone.ASSIGNED: at(7),
        Milestone.STARTED: at(8),
    }
    assert phase_spans(milestones) == [
        PhaseSpan(Phase.OFFER, at(0), at(2)),
        PhaseSpan(Phase.ACQUISITION, at(2), at(3)),
        PhaseSpan(Phase.ASSIGNMENT, at(3), at(7)),
        PhaseSpan(Phase.JOB_START, at(7), at(8)),
    ]
    assert phase_spans({Milestone.QUEUED: at(0)}) == []
    assert phase_spans({Milestone.QUEUED: at(0)}, now=at(5)) == [PhaseSpan(Phase.OFFER, at(0), at(5))]


@given(milestone_times)
def test_the_spans_are_contiguous_and_sum_to_the_phases(milestones: dict[Milestone, dt.datetime]) -> None:
    spans = phase_spans(milestones, now=at(2000))
    for before, after in itertools.pairwise(spans):
        assert before.end == after.start
    if spans:
        assert spans[0].start == milestones[Milestone.QUEUED]
    totals: dict[Phase, float] = {}
    for span in spans:
        totals[span.phase] = totals.get(span.phase, 0.0) + span.seconds
    assert totals == wait_phases(milestones, now=at(2000))


def test_the_listener_records_what_github_sent_and_when_the_job_started() -> None:
    assert listener_milestones(queued=at(0), acquired=None, assigned=at(5), started=at(6)) == {
        "queued": stamp(0),
        "assigned": stamp(5),
        "started": stamp(6),
    }


def pod(**status: object) -> dict[str, object]:
    return {"metadata": {"name": "r", "creationTimestamp": stamp(2)}, "status": status}


def test_pod_milestones_as_far_as_the_pod_got() -> None:
    pending = pod(conditions=[{"type": "PodScheduled", "status": "False", "lastTransitionTime": stamp(2)}])
    assert pod_milestones(pending) == {Milestone.POD_CREATED: at(2)}
    done = pod(
        conditions=[
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(43)},
            {"type": "Ready", "status": "True", "lastTransitionTime": stamp(48)},
        ],
        containerStatuses=[
            {"name": "sidecar", "state": {"running": {"startedAt": stamp(44)}}},
            {"name": "runner", "state": {"terminated": {"startedAt": stamp(45), "finishedAt": stamp(90)}}},
        ],
    )
    assert pod_milestones(done) == {
        Milestone.POD_CREATED: at(2),
        Milestone.POD_SCHEDULED: at(43),
        Milestone.POD_RUNNING: at(45),
        Milestone.RUNNER_ONLINE: at(48),
        Milestone.FINISHED: at(90),
    }


def test_a_runners_timeline_joins_the_listeners_record_and_the_pod() -> None:
    er = {
        "metadata": {"name": "r"},
        "status": {
            "jobId": "j1",
            "jobRepositoryName": "o/r",
            "jobDisplayName": "build",
            "jobTimeline": {"queued": stamp(0), "started": stamp(50), "bogus": stamp(1), "acquired": "not a time"},
        },
    }
    timeline = JobTimeline.of_runner(er, pod(conditions=[{"type": "PodScheduled", "status": "True",
                                                          "lastTransitionTime": stamp(43)}]))  # fmt: skip
    assert timeline is not None
    assert (timeline.runner, timeline.job_id, timeline.repository, timeline.job) == ("r", "j1", "o/r", "build")
    assert timeline.wait_phases() == {Phase.RUNNER_CREATION: 2, Phase.NODE: 41, Phase.JOB_START: 7}
    assert timeline.run_seconds is None
    done = JobTimeline.of_runner(er, pod(containerStatuses=[
        {"name": "runner", "state": {"terminated": {"startedAt": stamp(45), "finishedAt": stamp(110)}}}]))  # fmt: skip
    assert done is not None
    assert done.run_seconds == 60
    assert JobTimeline.of_runner({"metadata": {"name": "idle"}, "status": {}}, None) is None


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 0.95) == 0
    assert percentile([3.0], 0.95) == 3
    assert percentile(range(1, 21), 0.95) == 19
    assert percentile(range(1, 101), 0.5) == 50
