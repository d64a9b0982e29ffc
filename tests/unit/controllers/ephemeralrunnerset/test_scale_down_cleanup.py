"""A scale-down removes idle runners concurrently, bounded like a scale-up's creations, and never more than it
was asked to, and a runner one pass deleted is not removed again by the next (issue 20): carried out by
``execute_cleanup`` against the fake API server and the fake Actions service of tests/unit/fakes.py, which
counts how many removals are under way at once."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arc_scaleset.clock import FakeClock
from arc_scaleset.controllers.ephemeralrunnerset.cleanup import CleanupFailedError, execute_cleanup
from arc_scaleset.controllers.ephemeralrunnerset.expectations import DeletionExpectations
from arc_scaleset.controllers.ephemeralrunnerset.scaling import CleanupPlan, scale_down_candidates
from arc_scaleset.controllers.handoff import DeletedChildren, RemovedRegistrations
from arc_scaleset.controllers.runner_classification import RunnerView, classify
from arc_scaleset.github import ActionsClient, NotFound
from arc_scaleset.kube.errors import Forbidden
from tests.unit.fakes import FakeActions, FakeKube


def idle_runners(count: int) -> list[RunnerView]:
    return [RunnerView(name=f"r-{i:03d}", namespace="ns", phase="Running", runner_id=i + 1) for i in range(count)]


async def scale_down(actions: FakeActions, kube: FakeKube, *, candidates: int, limit: int, concurrency: int) -> Any:
    async def client() -> ActionsClient:
        return actions  # type: ignore[return-value]  # the one method a removal calls

    plan = CleanupPlan(remove=idle_runners(candidates), remove_limit=limit)
    return await execute_cleanup(kube, plan, client=client, concurrency=concurrency)  # type: ignore[arg-type]


async def test_a_scale_down_of_many_idle_runners_removes_them_concurrently_up_to_the_concurrency() -> None:
    actions, kube = FakeActions(), FakeKube()

    result = await scale_down(actions, kube, candidates=60, limit=60, concurrency=10)

    assert sorted(actions.removed) == list(range(1, 61))
    assert sorted(kube.deleted) == [f"r-{i:03d}" for i in range(60)]
    assert len(result.removed) == 60
    assert actions.most_at_once == 10


async def test_a_scale_down_removes_no_more_runners_than_asked_and_prefers_the_first_candidates() -> None:
    actions, kube = FakeActions(), FakeKube()

    await scale_down(actions, kube, candidates=30, limit=7, concurrency=10)

    assert sorted(actions.removed) == list(range(1, 8))
    assert sorted(kube.deleted) == [f"r-{i:03d}" for i in range(7)]
    assert actions.most_at_once == 7


async def test_a_runner_that_took_a_job_meanwhile_is_kept_and_the_next_candidate_goes_instead() -> None:
    actions, kube = FakeActions(busy=frozenset({1, 2, 3})), FakeKube()

    result = await scale_down(actions, kube, candidates=10, limit=5, concurrency=4)

    assert sorted(actions.removed) == [4, 5, 6, 7, 8]
    assert sorted(result.busy) == ["r-000", "r-001", "r-002"]
    assert sorted(kube.deleted) == ["r-003", "r-004", "r-005", "r-006", "r-007"]


async def test_a_failed_removal_leaves_its_slot_to_the_next_candidate_and_fails_the_pass() -> None:
    actions, kube = FakeActions(failing=frozenset({2})), FakeKube()

    with pytest.raises(CleanupFailedError, match="1 runner cleanup step"):
        await scale_down(actions, kube, candidates=10, limit=4, concurrency=3)

    assert sorted(actions.removed) == [1, 3, 4, 5]
    assert "r-001" not in kube.deleted


async def test_only_removals_github_confirmed_spare_the_runners_own_deletion_its_call() -> None:
    class Actions(FakeActions):
        async def remove_runner(self, runner_id: int) -> None:
            if runner_id == 4:  # already gone on GitHub: "not found" confirms it too
                raise NotFound(method="DELETE", url=f"https://x/agents/{runner_id}", status=404)
            await super().remove_runner(runner_id)

    actions, kube = Actions(busy=frozenset({2}), failing=frozenset({3})), FakeKube()
    runners = [dataclasses.replace(runner, uid=f"uid-{runner.runner_id}") for runner in idle_runners(4)]
    removed = RemovedRegistrations()

    async def client() -> ActionsClient:
        return actions  # type: ignore[return-value]  # the one method a removal calls

    with pytest.raises(CleanupFailedError):
        await execute_cleanup(kube, CleanupPlan(remove=runners), client=client, removed=removed)  # type: ignore[arg-type]

    assert removed.take("uid-1", 1)
    assert removed.take("uid-4", 4)
    assert not removed.take("uid-1", 1)  # asked once
    assert not removed.take("uid-2", 2)  # busy: its own deletion path must remove it when its job ends
    assert not removed.take("uid-3", 3)  # the removal failed: not known to be gone
    assert not removed.take("uid-1", 9)  # another registration of the same runner is not this one


def test_removed_registrations_are_bounded_and_forget_the_oldest_first() -> None:
    removed = RemovedRegistrations(capacity=3)
    for runner_id in range(1, 6):
        removed.record(f"uid-{runner_id}", runner_id)
    assert len(removed) == 3
    assert not removed.take("uid-1", 1)  # forgotten: its deletion path asks GitHub, as without the record
    assert removed.take("uid-5", 5)


@settings(max_examples=60, deadline=None)
@given(
    candidates=st.integers(0, 40),
    limit=st.integers(1, 40),
    concurrency=st.integers(1, 12),
    busy=st.frozensets(st.integers(1, 40), max_size=15),
)
def test_a_scale_down_removes_exactly_what_it_can_up_to_the_limit_never_above_the_concurrency(
    candidates: int, limit: int, concurrency: int, busy: frozenset[int]
) -> None:
    actions, kube = FakeActions(busy=busy), FakeKube()

    asyncio.run(scale_down(actions, kube, candidates=candidates, limit=limit, concurrency=concurrency))

    removable = [runner_id for runner_id in range(1, candidates + 1) if runner_id not in busy]
    assert sorted(actions.removed) == removable[:limit]
    assert actions.most_at_once <= concurrency


# -- a runner deleted by one pass is not removed again by the next ------------------------------------------


def test_runners_the_set_deleted_count_as_deleting_until_the_cache_shows_it() -> None:
    clock = FakeClock()
    deletions = DeletionExpectations(clock=clock)
    runners = idle_runners(4)
    deletions.expect("r-000")
    deletions.expect("r-001")

    marked = deletions.mark(runners)
    states = classify(marked, applied_revision=0)
    assert [r.name for r in states.deleting] == ["r-000", "r-001"]
    assert scale_down_candidates(states) == runners[2:]
    assert DeletionExpectations(clock=clock).mark(runners) == runners, "another set's deletions are its own"

    # The cache caught up: r-000 shows its deletion, r-001 is gone; nothing is remembered any more.
    caught_up = [dataclasses.replace(runners[0], deleting=True), *runners[2:]]
    assert deletions.mark(caught_up) == caught_up
    assert deletions.mark(runners) == runners


async def test_a_deletion_the_cache_never_shows_is_forgotten_after_the_timeout() -> None:
    clock = FakeClock()
    deletions = DeletionExpectations(clock=clock, timeout=30)
    runners = idle_runners(2)
    deletions.expect("r-000")
    await clock.advance(29)
    assert deletions.mark(runners)[0].deleting
    await clock.advance(1)
    assert deletions.mark(runners) == runners


async def test_every_deleted_runner_is_reported_even_when_the_pass_fails() -> None:
    actions, kube = FakeActions(failing=frozenset({2})), FakeKube()
    reported: list[str] = []

    async def client() -> ActionsClient:
        return actions  # type: ignore[return-value]

    plan = CleanupPlan(remove=idle_runners(4), remove_limit=4)
    with pytest.raises(CleanupFailedError):
        await execute_cleanup(kube, plan, client=client, concurrency=2, on_deleted=reported.append)  # type: ignore[arg-type]
    assert sorted(reported) == ["r-000", "r-002", "r-003"]


class ForbiddingKube(FakeKube):
    """A role that grants ``delete`` but not ``deletecollection`` (ARC's roles, or a copy of them)."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    async def delete_collection(self, resource: Any, **_: Any) -> list[dict[str, Any]]:
        self.refused += 1
        raise Forbidden(status=403, reason="Forbidden", message=f"cannot deletecollection {resource.plural}")


async def test_without_the_deletecollection_verb_labelled_runners_are_deleted_one_by_one() -> None:
    actions, kube, children = FakeActions(), ForbiddingKube(), DeletedChildren()
    runners = [dataclasses.replace(runner, uid=f"uid-{runner.name}", instance=f"i{runner.runner_id}")
               for runner in idle_runners(5)]  # fmt: skip

    async def client() -> ActionsClient:
        return actions  # type: ignore[return-value]  # the one method a removal calls

    plan = CleanupPlan(remove=runners, remove_limit=5)
    await execute_cleanup(kube, plan, client=client, children=children)  # type: ignore[arg-type]

    assert sorted(kube.deleted) == [runner.name for runner in runners]
    assert kube.refused == 1
    # Nothing is left waiting for a batch: each runner's own deletion path deletes its pod and Secret.
    assert not any(children.pending(runner.uid, plural) for runner in runners for plural in ("pods", "secrets"))
    assert all(children.state(runner.uid, "pods") is None for runner in runners)


class LabelledKube(FakeKube):
    """Objects of each runner (its EphemeralRunner, pod and JIT Secret) by resource plural and instance label;
    ``deletecollection`` deletes those its ``instance in (...)`` selector names."""

    def __init__(self, runners: list[RunnerView]) -> None:
        super().__init__()
        owner = {runner.instance: [{"controller": True, "uid": runner.uid}] for runner in runners}
        self.objects = {
            (plural, runner.instance): {"metadata": {"name": runner.name, "ownerReferences": owner[runner.instance]}}
            for plural in ("ephemeralrunners", "pods", "secrets")
            for runner in runners
        }

    async def delete_collection(self, resource: Any, *, label_selector: str, **_: Any) -> list[dict[str, Any]]:
        named = label_selector.split(" in (", 1)[1].rstrip(")").split(",")
        return [self.objects.pop((resource.plural, instance)) for instance in named
                if (resource.plural, instance) in self.objects]  # fmt: skip


async def test_a_batch_leaves_the_jit_secret_of_a_runner_with_no_runner_id_on_record_to_its_deletion_path() -> None:
    """A runner's ID reaches its status a few seconds after it registered; until then only its JIT Secret holds
    it. A batch that deleted that Secret left the registration on GitHub for ever (its finalizer found no ID)."""
    on_record = RunnerView(name="r-001", namespace="ns", phase="Running", runner_id=7, uid="uid-1", instance="i1")
    not_yet = RunnerView(name="r-002", namespace="ns", phase="Pending", runner_id=0, uid="uid-2", instance="i2")
    actions, kube, children = FakeActions(), LabelledKube([on_record, not_yet]), DeletedChildren()

    async def client() -> ActionsClient:
        return actions  # type: ignore[return-value]  # the one method a removal calls

    result = await execute_cleanup(kube, CleanupPlan(remove=[on_record, not_yet]), client=client, children=children)  # type: ignore[arg-type]

    assert sorted(result.deleted) == ["r-001", "r-002"]
    assert actions.removed == [7]
    assert ("secrets", "i2") in kube.objects, "the only record of r-002's registration is kept"
    assert children.state("uid-2", "secrets") is None, "r-002's own deletion path reads and deletes it"
    assert children.state("uid-1", "secrets") is not None
    assert ("secrets", "i1") not in kube.objects
    assert not any(key in kube.objects for key in [("pods", "i1"), ("pods", "i2")])


async def test_the_deletion_path_of_a_runner_whose_secret_a_batch_leaves_never_waits_for_that_batch() -> None:
    """Announcing a Secret the batch will not delete made that runner's deletion path wait for the batch's
    requests to return, for nothing."""
    on_record = RunnerView(name="r-001", namespace="ns", phase="Running", runner_id=7, uid="uid-1", instance="i1")
    not_yet = RunnerView(name="r-002", namespace="ns", phase="Pending", runner_id=0, uid="uid-2", instance="i2")
    children = DeletedChildren()
    seen: list[tuple[str, bool, bool]] = []

    class WatchingKube(LabelledKube):
        async def delete_collection(self, resource: Any, *, label_selector: str, **rest: Any) -> list[dict[str, Any]]:
            seen.append((resource.plural, children.pending("uid-1", "secrets"), children.pending("uid-2", "secrets")))
            return await super().delete_collection(resource, label_selector=label_selector, **rest)

    async def client() -> ActionsClient:
        return FakeActions()  # type: ignore[return-value]  # the one method a removal calls

    kube = WatchingKube([on_record, not_yet])
    await execute_cleanup(kube, CleanupPlan(remove=[on_record, not_yet]), client=client, children=children)  # type: ignore[arg-type]

    assert seen == [("ephemeralrunners", True, False), ("pods", True, False), ("secrets", True, False)]
