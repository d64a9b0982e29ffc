"""The shared shape of a reconcile pass: the per-object memory store and the phase runner."""

from __future__ import annotations

from dataclasses import dataclass, field

from arc_scaleset.controllers.reconcile_pass import ObjectMemory, Phase, gather, run_phases
from arc_scaleset.kube.controller import Request, Result
from arc_scaleset.kube.informer import Object


@dataclass
class _Slot:
    seen: list[str] = field(default_factory=list)


KEY = Request("team-a", "runners")


def test_a_slot_is_remembered_for_the_same_object() -> None:
    memory = ObjectMemory(_Slot)
    memory.slot(KEY, "uid-1").seen.append("x")

    assert memory.slot(KEY, "uid-1").seen == ["x"]
    assert memory.peek(KEY, "uid-1") is memory.slot(KEY, "uid-1")


def test_an_object_made_again_under_the_same_name_starts_with_nothing_remembered() -> None:
    memory = ObjectMemory(_Slot)
    memory.slot(KEY, "uid-1").seen.append("x")

    assert memory.peek(KEY, "uid-2") is None
    assert memory.slot(KEY, "uid-2").seen == []
    assert memory.peek(KEY, "uid-1") is None, "the old object's slot is replaced, not kept beside"
    assert len(memory) == 1


def test_the_same_name_in_another_namespace_is_another_object() -> None:
    memory = ObjectMemory(_Slot)
    memory.slot(KEY, "uid-1").seen.append("x")

    assert memory.slot(Request("team-b", "runners"), "uid-1").seen == []


class _Cache:
    def __init__(self, objects: dict[tuple[str, str], Object]) -> None:
        self.objects = objects

    def get(self, namespace: str | None, name: str) -> Object | None:
        return self.objects.get((namespace or "", name))


def test_gather_forgets_an_object_gone_from_the_cache() -> None:
    memory = ObjectMemory(_Slot)
    memory.slot(KEY, "uid-1")
    cache = _Cache({(KEY.namespace, KEY.name): {"metadata": {"uid": "uid-1"}}})

    assert gather(cache, memory, KEY) is not None
    assert len(memory) == 1
    cache.objects.clear()
    assert gather(cache, memory, KEY) is None
    assert len(memory) == 0


async def test_phases_run_in_order_until_one_returns_a_result() -> None:
    ran: list[str] = []

    def phase(name: str, result: Result | None) -> Phase[list[str]]:
        async def run(scope: list[str]) -> Result | None:
            scope.append(name)
            return result

        return run

    waiting = Result(requeue_after=5.0)
    result = await run_phases(ran, (phase("a", None), phase("b", waiting), phase("c", None)))

    assert result is waiting
    assert ran == ["a", "b"]


async def test_a_pass_whose_phases_all_pass_ends_with_an_empty_result() -> None:
    async def nothing(scope: object) -> Result | None:
        return None

    assert await run_phases(object(), (nothing, nothing)) == Result()
