"""One shape for a reconcile pass, shared by the controllers (docs/controllers.md, "The shape of a pass").

A pass of every kind reads the same way:

1. **gather**: the primary object from the cache; when it is gone, its slot in the controller's
   :class:`ObjectMemory` is forgotten and the pass ends (:func:`gather`);
2. **scope**: the kind's ``Pass`` dataclass holds the object, its view, its parsed model, its key, what the
   pass reports, and the object's memory slot -- the only things a phase reads besides the caches;
3. **phases**: an ordered tuple of ``async (scope) -> Result | None``; :func:`run_phases` runs them until one
   returns a :class:`Result` (it acted, and its write brings the key back through a watch, or it must wait);
   a phase with many branches asks a pure function in its own module for a plan and only executes it;
4. **status**: written once, at the end of the pass, whatever happened (the kind's ``reconcile`` does it in a
   ``finally``), from what the phases put in the scope's report.

This module holds the parts all kinds share: the memory store and the phase runner. It imports nothing that
talks to the API server.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Generic, Protocol, TypeVar

from arc_scaleset.kube.controller import Request, Result
from arc_scaleset.kube.informer import Object

__all__ = ["ObjectMemory", "Phase", "gather", "run_phases"]

SlotT = TypeVar("SlotT")
ScopeT = TypeVar("ScopeT")
ScopeT_contra = TypeVar("ScopeT_contra", contravariant=True)


class ObjectMemory(Generic[SlotT]):
    """What one controller remembers about each of its objects between passes: one slot per object.

    The one store of per-object memory of a controller (what kube-controller-manager calls expectations, and
    the like: what this process wrote that its caches may not show yet, when it last checked something).
    Keyed one way, by the controller key (:class:`Request`), and bound to the object's UID: a slot asked for
    with another UID (the object was deleted and made again under the same name) starts fresh, so nothing
    remembered about one object is ever applied to another. A slot is dropped by :meth:`forget`, which
    :func:`gather` calls when the object is gone from the cache; a kind also forgets when the object no longer
    needs its memory (it is deleting, or done).

    In memory only, on purpose: after a restart the caches are listed fresh and every slot starts empty,
    which may cost a read, never correctness. Not thread-safe; a controller's passes share one event loop,
    and a key is never reconciled twice at once.
    """

    def __init__(self, new_slot: Callable[[], SlotT]) -> None:
        self._new_slot = new_slot
        self._slots: dict[Request, tuple[str, SlotT]] = {}

    def slot(self, request: Request, uid: str) -> SlotT:
        """The slot of the object ``request`` names with ``uid``: the remembered one, else a new, empty one."""
        held = self._slots.get(request)
        if held is not None and held[0] == uid:
            return held[1]
        slot = self._new_slot()
        self._slots[request] = (uid, slot)
        return slot

    def peek(self, request: Request, uid: str) -> SlotT | None:
        """The remembered slot of that object, without making one (``None``: nothing is remembered)."""
        held = self._slots.get(request)
        return held[1] if held is not None and held[0] == uid else None

    def forget(self, request: Request) -> None:
        """Drop whatever is remembered under ``request`` (of any UID); a no-op when nothing is."""
        self._slots.pop(request, None)

    def __len__(self) -> int:
        return len(self._slots)

    def __iter__(self) -> Iterator[tuple[Request, SlotT]]:
        """The remembered slots with their keys (a snapshot: forgetting while iterating is safe)."""
        return iter([(request, slot) for request, (_uid, slot) in self._slots.items()])


class _Cache(Protocol):
    def get(self, namespace: str | None, name: str) -> Object | None: ...


def gather(cache: _Cache, memory: ObjectMemory[SlotT], request: Request) -> Object | None:
    """The primary object ``request`` names, from ``cache``; ``None`` (and its memory forgotten) when gone."""
    obj = cache.get(request.namespace, request.name)
    if obj is None:
        memory.forget(request)
    return obj


class Phase(Protocol[ScopeT_contra]):
    """One step of a pass: ``None`` to go on to the next phase, a :class:`Result` to end the pass with it."""

    def __call__(self, scope: ScopeT_contra, /) -> Awaitable[Result | None]: ...


async def run_phases(scope: ScopeT, phases: Iterable[Phase[ScopeT]]) -> Result:
    """Run ``phases`` in order on ``scope`` until one returns a :class:`Result`; ``Result()`` if none does.

    An exception of a phase ends the pass and propagates (the kind's ``reconcile`` reports it and the
    controller retries the key with backoff); the status is the caller's to write, once, afterwards.
    """
    for phase in phases:
        result = await phase(scope)
        if result is not None:
            return result
    return Result()
