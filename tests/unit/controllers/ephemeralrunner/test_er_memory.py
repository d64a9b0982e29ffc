"""The EphemeralRunner controller's read-your-own-writes memory and the set's runner-view cache."""

from __future__ import annotations

from arc_scaleset.clock import FakeClock
from arc_scaleset.controllers.ephemeralrunner.memory import RunnerMemory, apply_merge_patch

KEY = "ns/arc-runner-abcde"


def test_merge_patch_merges_maps_and_removes_nulls() -> None:
    base = {"phase": "Pending", "failures": {"a": "t1"}, "reason": "x"}
    assert apply_merge_patch(base, {"failures": {"b": "t2"}, "reason": None, "ready": False}) == {
        "phase": "Pending",
        "failures": {"a": "t1", "b": "t2"},
        "ready": False,
    }


def test_own_status_write_is_overlaid_only_while_the_cache_holds_the_version_it_was_based_on() -> None:
    memory = RunnerMemory()
    memory.wrote_status(KEY, "uid-1", "10", {"runnerId": 7, "phase": "Pending"})
    memory.wrote_status(KEY, "uid-1", "10", {"failures": {"p1": "t"}})
    assert memory.status(KEY, "uid-1", "10", {}) == {"runnerId": 7, "phase": "Pending", "failures": {"p1": "t"}}
    # A later version came through the watch: it is the truth, even if someone else changed our fields.
    assert memory.status(KEY, "uid-1", "11", {"phase": "Failed"}) == {"phase": "Failed"}
    assert memory.status(KEY, "uid-1", "10", {}) == {}


def test_memory_of_a_runner_does_not_apply_to_a_new_runner_of_the_same_name() -> None:
    memory = RunnerMemory()
    memory.wrote_status(KEY, "uid-1", "10", {"runnerId": 7})
    assert memory.first_registration(KEY, "uid-1")
    assert not memory.first_registration(KEY, "uid-1")
    assert memory.status(KEY, "uid-2", "10", {}) == {}
    assert memory.first_registration(KEY, "uid-2")


async def test_created_pod_is_awaited_until_the_cache_shows_it_or_the_wait_ends() -> None:
    clock = FakeClock()
    memory = RunnerMemory(clock=clock, pod_wait=5.0)
    memory.created_pod(KEY, "uid-1")
    await clock.advance(2.0)
    assert memory.awaiting_pod(KEY, "uid-1", cached=False) == 3.0
    assert memory.awaiting_pod(KEY, "uid-1", cached=True) == 0.0
    assert memory.awaiting_pod(KEY, "uid-1", cached=False) == 0.0  # seen once: a later absence is real
    memory.created_pod(KEY, "uid-1")
    await clock.advance(5.0)
    assert memory.awaiting_pod(KEY, "uid-1", cached=False) == 0.0


async def test_deferred_status_is_overlaid_until_written_and_comes_due_after_its_delay() -> None:
    clock = FakeClock()
    memory = RunnerMemory(clock=clock)
    memory.defer_status(KEY, "uid-1", {"runnerId": 7, "phase": "Pending"}, for_seconds=5.0)
    # Unlike a written change, a held-back one survives newer cached versions: nothing can show it yet.
    assert memory.status(KEY, "uid-1", "11", {"jobId": "j"}) == {"jobId": "j", "runnerId": 7, "phase": "Pending"}
    await clock.advance(2.0)
    memory.defer_status(KEY, "uid-1", {"runnerName": "r"}, for_seconds=5.0)  # the first deadline stays
    assert memory.deferred_status(KEY, "uid-1") == ({"runnerId": 7, "phase": "Pending", "runnerName": "r"}, 3.0)
    await clock.advance(3.0)
    assert memory.deferred_status(KEY, "uid-1")[1] == 0.0
    memory.deferred_written(KEY, "uid-1")
    assert memory.deferred_status(KEY, "uid-1") == ({}, 0.0)
    assert memory.status(KEY, "uid-1", "12", {}) == {}


def test_deferred_status_does_not_apply_to_a_new_runner_of_the_same_name() -> None:
    memory = RunnerMemory()
    memory.defer_status(KEY, "uid-1", {"runnerId": 7}, for_seconds=5.0)
    assert memory.status(KEY, "uid-2", "1", {}) == {}
    assert memory.deferred_status(KEY, "uid-2") == ({}, 0.0)


def test_forget_drops_everything_about_a_runner() -> None:
    memory = RunnerMemory()
    memory.set_secret_unconfirmed(KEY, "uid-1", True)
    assert memory.secret_unconfirmed(KEY, "uid-1")
    memory.forget(KEY)
    assert not memory.secret_unconfirmed(KEY, "uid-1")
    assert len(memory) == 0
