"""The EphemeralRunnerSet's memory of a set: one slot per set, and a runner event finds its set's runner index
through the runner's controller reference (the set's key and UID), with no index by UID beside it."""

from __future__ import annotations

from typing import Any

from arc_scaleset.clock import FakeClock
from arc_scaleset.controllers.ephemeralrunnerset.runner_index import SetRunners
from arc_scaleset.controllers.ephemeralrunnerset.scope import SetMemory, runner_index_of
from arc_scaleset.controllers.reconcile_pass import ObjectMemory
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.ownerrefs import Owner

KEY = Request("team", "arc")
UID = "set-uid"
SET = Owner("team", "actions.github.com", "EphemeralRunnerSet", "arc", UID)


def new_memory() -> ObjectMemory[SetMemory]:
    return ObjectMemory(lambda: SetMemory.new(clock=FakeClock(), expectation_timeout=30.0, counts_interval=2.0))


def runner(*, owner_name: str = "arc", owner_uid: str = UID, kind: str = "EphemeralRunnerSet") -> dict[str, Any]:
    ref: dict[str, Any] = {"apiVersion": "actions.github.com/v1alpha1", "kind": kind, "controller": True}
    ref.update(name=owner_name, uid=owner_uid)
    return {"metadata": {"namespace": "team", "name": "arc-runner-x", "ownerReferences": [ref]}}


def test_a_runner_event_finds_the_index_of_the_set_that_controls_it() -> None:
    memory = new_memory()
    index = memory.slot(KEY, UID).runners = SetRunners(SET)

    assert runner_index_of(memory, runner()) is index


def test_no_index_is_found_for_another_set_or_owner_or_before_a_pass_built_one() -> None:
    memory = new_memory()
    assert runner_index_of(memory, runner()) is None, "no pass of this set yet"
    memory.slot(KEY, UID)
    assert runner_index_of(memory, runner()) is None, "the set's slot has no index until a pass builds it"
    memory.slot(KEY, UID).runners = SetRunners(SET)

    assert runner_index_of(memory, runner(owner_uid="older-uid")) is None, "a set of the same name made before"
    assert runner_index_of(memory, runner(owner_name="other")) is None
    assert runner_index_of(memory, runner(kind="AutoscalingRunnerSet")) is None
    assert runner_index_of(memory, {"metadata": {"namespace": "team", "name": "orphan"}}) is None


def test_a_set_made_again_under_the_same_name_starts_with_nothing_remembered() -> None:
    memory = new_memory()
    first = memory.slot(KEY, UID)
    first.created.expect(["arc-runner-a"])
    first.counts.wait()  # a change of the first set's counts, held back

    again = memory.slot(KEY, "new-uid")
    assert again.created.outstanding(seen=lambda name: False) == 0
    assert again.counts.wait() == 2.0, "nothing held back: a change of the new set's counts starts its interval"
    assert again.runners is None
    assert first.created.outstanding(seen=lambda name: False) == 1, "what the first set expected is its own"
