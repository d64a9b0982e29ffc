"""The EphemeralRunner controller's read-your-own-writes memory: its slot in the controller's ObjectMemory."""

from __future__ import annotations

import functools

from arc_scaleset.clock import FakeClock
from arc_scaleset.controllers.ephemeralrunner.memory import RunnerMemory, apply_merge_patch
from arc_scaleset.controllers.reconcile_pass import ObjectMemory
from arc_scaleset.kube.controller import Request

KEY = Request("ns", "arc-runner-abcde")


def _memory(clock: FakeClock | None = None, pod_wait: float = 5.0) -> ObjectMemory[RunnerMemory]:
    return ObjectMemory(functools.partial(RunnerMemory, clock=clock or FakeClock(), pod_wait=pod_wait))


def test_merge_patch_merges_maps_and_removes_nulls() -> None:
    base = {"phase": "Pending", "failures": {"a": "t1"}, "reason": "x"}
    assert apply_merge_patch(base, {"failures": {"b": "t2"}, "reason": None, "ready": False}) == {
        "phase": "Pending",
        "failures": {"a": "t1", "b": "t2"},
        "ready": False,
    }


def test_own_status_write_is_overlaid_only_while_the_cache_holds_the_version_it_was_based_on() -> None:
    runner = _memory().slot(KEY, "uid-1")
    runner.wrote_status("10", {"runnerId": 7, "phase": "Pending"})
    runner.wrote_status("10", {"failures": {"p1": "t"}})
    assert runner.status("10", {}) == {"runnerId": 7, "phase": "Pending", "failures": {"p1": "t"}}
    # A later version came through the watch: it is the truth, even if someone else changed our fields.
    assert runner.status("11", {"phase": "Failed"}) == {"phase": "Failed"}
    assert runner.status("10", {}) == {}


def test_memory_of_a_runner_does_not_apply_to_a_new_runner_of_the_same_name() -> None:
    memory = _memory()
    memory.slot(KEY, "uid-1").wrote_status("10", {"runnerId": 7})
    assert memory.slot(KEY, "uid-1").first_registration()
    assert not memory.slot(KEY, "uid-1").first_registration()
    assert memory.slot(KEY, "uid-2").status("10", {}) == {}
    assert memory.slot(KEY, "uid-2").first_registration()


async def test_created_pod_is_awaited_until_the_cache_shows_it_or_the_wait_ends() -> None:
    clock = FakeClock()
    runner = _memory(clock, pod_wait=5.0).slot(KEY, "uid-1")
    runner.created_pod()
    await clock.advance(2.0)
    assert runner.awaiting_pod(cached=False) == 3.0
    assert runner.awaiting_pod(cached=True) == 0.0
    assert runner.awaiting_pod(cached=False) == 0.0  # seen once: a later absence is real
    runner.created_pod()
    await clock.advance(5.0)
    assert runner.awaiting_pod(cached=False) == 0.0


async def test_deferred_status_is_overlaid_until_written_and_comes_due_after_its_delay() -> None:
    clock = FakeClock()
    runner = _memory(clock).slot(KEY, "uid-1")
    runner.defer_status({"runnerId": 7, "phase": "Pending"}, for_seconds=5.0)
    # Unlike a written change, a held-back one survives newer cached versions: nothing can show it yet.
    assert runner.status("11", {"jobId": "j"}) == {"jobId": "j", "runnerId": 7, "phase": "Pending"}
    await clock.advance(2.0)
    runner.defer_status({"runnerName": "r"}, for_seconds=5.0)  # the first deadline stays
    assert runner.deferred_status() == ({"runnerId": 7, "phase": "Pending", "runnerName": "r"}, 3.0)
    await clock.advance(3.0)
    assert runner.deferred_status()[1] == 0.0
    runner.deferred_written()
    assert runner.deferred_status() == ({}, 0.0)
    assert runner.status("12", {}) == {}


def test_deferred_status_does_not_apply_to_a_new_runner_of_the_same_name() -> None:
    memory = _memory()
    memory.slot(KEY, "uid-1").defer_status({"runnerId": 7}, for_seconds=5.0)
    assert memory.slot(KEY, "uid-2").status("1", {}) == {}
    assert memory.slot(KEY, "uid-2").deferred_status() == ({}, 0.0)


def test_forget_drops_everything_about_a_runner() -> None:
    memory = _memory()
    memory.slot(KEY, "uid-1").secret_unconfirmed = True
    assert memory.slot(KEY, "uid-1").secret_unconfirmed
    memory.forget(KEY)
    assert len(memory) == 0
    assert not memory.slot(KEY, "uid-1").secret_unconfirmed


async def test_held_status_is_due_when_the_token_would_be_there_whatever_its_earlier_deadline() -> None:
    clock = FakeClock()
    runner = _memory(clock).slot(KEY, "uid-1")
    assert runner.held_for() == 0.0
    runner.defer_status({"runnerId": 7}, for_seconds=5.0)
    await clock.advance(5.0)  # due now, but the client's rate limit would make the write wait 2 s
    runner.hold_status({"runnerId": 7, "phase": "Running"}, for_seconds=2.0)
    assert runner.deferred_status() == ({"runnerId": 7, "phase": "Running"}, 2.0)
    assert runner.status("11", {}) == {"runnerId": 7, "phase": "Running"}  # overlaid like any held change
    assert runner.held_for() == 5.0  # counted from when the first of them was held
    runner.deferred_written()
    assert runner.held_for() == 0.0
    runner.hold_status({"ready": True}, for_seconds=1.0)
    assert runner.held_for() == 0.0
    assert runner.deferred_status() == ({"ready": True}, 1.0)
