"""Leader election decisions (pure): when a candidate may take the Lease, and what it writes."""

from __future__ import annotations

import datetime as dt

import pytest

from arc_scaleset.kube.leader_election import (
    LeaderElectionConfig,
    LeaseRecord,
    Observation,
    default_identity,
    may_acquire,
    may_renew_unread,
    next_record,
    observe,
    released_record,
)

T0 = dt.datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)


def held_by(holder: str, *, renewed: dt.datetime = T0, duration: int | None = 15, transitions: int = 3) -> LeaseRecord:
    return LeaseRecord(holder, duration, T0, renewed, transitions)


def test_a_free_lease_may_be_taken_at_once() -> None:
    for record in (LeaseRecord(), released_record(held_by("old"), now=T0)):
        assert may_acquire(Observation(record, 100.0), identity="me", now=100.0)


def test_the_holder_may_always_renew() -> None:
    assert may_acquire(Observation(held_by("me"), 100.0), identity="me", now=100.0)


def test_a_held_lease_is_taken_over_only_after_it_was_unchanged_for_its_duration_on_our_clock() -> None:
    seen = Observation(held_by("other"), observed_at=100.0)
    assert not may_acquire(seen, identity="me", now=100.0)
    assert not may_acquire(seen, identity="me", now=114.999)
    assert may_acquire(seen, identity="me", now=115.0)


def test_a_holder_known_dead_may_be_replaced_at_once_but_not_one_that_replaced_it() -> None:
    seen = Observation(held_by("peer"), observed_at=100.0)
    assert may_acquire(seen, identity="me", now=100.0, dead_holder="peer")
    assert not may_acquire(Observation(held_by("third"), 100.0), identity="me", now=100.0, dead_holder="peer")


def test_the_holders_declared_duration_wins_over_the_default() -> None:
    seen = Observation(held_by("other", duration=60), observed_at=0.0)
    assert not may_acquire(seen, identity="me", now=30.0, default_lease_duration=15.0)
    assert may_acquire(seen, identity="me", now=60.0, default_lease_duration=15.0)
    no_duration = Observation(held_by("other", duration=None), observed_at=0.0)
    assert may_acquire(no_duration, identity="me", now=15.0, default_lease_duration=15.0)


def test_a_renewal_restarts_the_candidates_clock_and_an_unchanged_record_does_not() -> None:
    first = observe(None, held_by("other"), now=100.0)
    same = observe(first, held_by("other"), now=110.0)
    assert same.observed_at == 100.0, "an unchanged record keeps the time it was first seen"
    renewed = observe(same, held_by("other", renewed=T0 + dt.timedelta(seconds=2)), now=112.0)
    assert renewed.observed_at == 112.0
    assert not may_acquire(renewed, identity="me", now=120.0)
    assert may_acquire(renewed, identity="me", now=127.0)


def test_the_candidate_never_trusts_the_holders_wall_clock() -> None:
    # A renewTime far in the past (skewed clock, or a long-dead holder) does not shorten the wait:
    # only a record left unchanged for a full duration, timed locally, makes it expire.
    ancient = held_by("other", renewed=T0 - dt.timedelta(days=365))
    seen = observe(None, ancient, now=500.0)
    assert not may_acquire(seen, identity="me", now=500.0)
    assert may_acquire(seen, identity="me", now=515.0)


def test_a_new_lease_starts_with_zero_transitions() -> None:
    record = next_record(None, identity="me", now=T0, lease_duration_seconds=15)
    assert record == LeaseRecord("me", 15, T0, T0, 0)


def test_a_renewal_keeps_acquire_time_and_transitions() -> None:
    later = T0 + dt.timedelta(seconds=2)
    record = next_record(held_by("me", transitions=4), identity="me", now=later, lease_duration_seconds=15)
    assert record == LeaseRecord("me", 15, T0, later, 4)


def test_a_takeover_counts_a_transition_and_sets_acquire_time() -> None:
    later = T0 + dt.timedelta(seconds=20)
    record = next_record(held_by("other", transitions=4), identity="me", now=later, lease_duration_seconds=15)
    assert record == LeaseRecord("me", 15, later, later, 5)


def test_taking_a_released_lease_counts_a_transition() -> None:
    released = released_record(held_by("other", transitions=4), now=T0)
    assert released.holder_identity == ""
    assert released.lease_duration_seconds == 1
    assert released.lease_transitions == 4
    record = next_record(released, identity="me", now=T0, lease_duration_seconds=15)
    assert record.lease_transitions == 5


def test_records_round_trip_through_a_lease_spec_with_microsecond_times() -> None:
    record = held_by("me")
    spec = record.to_spec()
    assert spec["renewTime"] == "2026-01-01T12:00:00.123456Z"
    assert spec["leaseDurationSeconds"] == 15
    assert LeaseRecord.from_lease({"spec": spec}) == record
    assert LeaseRecord.from_lease({}) == LeaseRecord()


def test_the_configuration_refuses_timings_that_cannot_work() -> None:
    LeaderElectionConfig("x", lease_duration=3, renew_deadline=2, retry_period=0.5)
    with pytest.raises(ValueError, match="lease_duration"):
        LeaderElectionConfig("x", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="renew_deadline"):
        LeaderElectionConfig("x", lease_duration=15, renew_deadline=2, retry_period=2)
    assert LeaderElectionConfig("x", lease_duration=2.5, renew_deadline=2, retry_period=1).lease_duration_seconds == 3


def test_identities_are_unique_per_process_and_name_the_host() -> None:
    import socket

    first, second = default_identity(), default_identity()
    assert first != second
    assert first.startswith(socket.gethostname() + "_")


def test_a_leader_renews_without_reading_only_its_own_record_while_it_is_valid_on_its_clock() -> None:
    mine = Observation(held_by("me", duration=15), observed_at=100.0)
    assert may_renew_unread(mine, identity="me", now=114.9)
    assert not may_renew_unread(mine, identity="me", now=115.0), "past its duration it reads the Lease first"
    assert not may_renew_unread(Observation(held_by("other"), 100.0), identity="me", now=100.0)
    assert not may_renew_unread(Observation(LeaseRecord(), 100.0), identity="me", now=100.0)
    no_duration = Observation(held_by("me", duration=None), observed_at=100.0)
    assert may_renew_unread(no_duration, identity="me", now=109.0, default_lease_duration=10.0)
    assert not may_renew_unread(no_duration, identity="me", now=110.0, default_lease_duration=10.0)
