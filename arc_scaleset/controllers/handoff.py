"""Facts one controller of this process hands to another: recorded by one, read once by the other.

The EphemeralRunnerSet does part of a runner's deletion itself -- it removes the registration from GitHub, and
in a batch it deletes the runners' pods and JIT Secrets -- and the runner's own deletion path would otherwise
do the same again, each time one more request whose answer is known (docs/controllers.md). These memos tell it.
The other way round, the runner controller deletes a succeeded runner itself, and tells the set so
(:class:`RunnerDeletions`).

In memory and bounded: the oldest facts are forgotten first. Forgetting one, or a restarted process that
never knew it, only costs the request it would have saved, never correctness.
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Hashable
from typing import Final, Generic, TypeVar

DEFAULT_CAPACITY: Final = 10_000
"""How many facts a memo keeps (the oldest are forgotten first)."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Handoff(Generic[K, V]):
    """Values by key, recorded by one side and read by the other; at most ``capacity`` are kept."""

    def __init__(self, *, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._entries: collections.OrderedDict[K, V] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def _put(self, key: K, value: V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def _get(self, key: K) -> V | None:
        return self._entries.get(key)

    def _pop(self, key: K) -> V | None:
        return self._entries.pop(key, None)


class RemovedRegistrations(Handoff[tuple[str, int], bool]):
    """Registrations this process saw GitHub confirm gone, by EphemeralRunner UID and runner ID.

    The EphemeralRunnerSet removes an idle runner from GitHub before it deletes the EphemeralRunner, and the
    runner's own deletion path then removes the same registration again (ARC does both): a second
    ``RemoveRunner`` per runner of every scale-down, whose answer is known. The set records each removal
    GitHub confirmed (removed, or not found) here, and the deletion path skips its call for that runner and
    that runner ID (:func:`~arc_scaleset.controllers.ephemeralrunner.deletion.finalize_runner`).
    """

    def record(self, runner_uid: str, runner_id: int) -> None:
        """GitHub confirmed that runner ID ``runner_id`` of the EphemeralRunner ``runner_uid`` is registered no
        more. Only for such an answer: never for a busy runner, nor for a call that failed."""
        if runner_uid and runner_id > 0:
            self._put((runner_uid, runner_id), True)

    def take(self, runner_uid: str, runner_id: int) -> bool:
        """Whether that removal was recorded (and forget it: a deletion path asks once)."""
        return self._pop((runner_uid, runner_id)) is not None


class BatchDeletion(enum.Enum):
    """Where the EphemeralRunnerSet's batch stands with one object of a runner."""

    PENDING = "pending"
    """The batch is deleting it: the runner's deletion path waits rather than delete it too."""
    DELETED = "deleted"
    """The batch deleted it: the runner's deletion path skips it."""


class DeletedChildren(Handoff[tuple[str, str], BatchDeletion]):
    """Objects of EphemeralRunners (their pod, their JIT Secret) that the EphemeralRunnerSet deletes in a batch,
    by runner UID and resource plural, so the runner's deletion path does not delete them again.

    The batch deletes the runners first (a runner controller that saw its pod go while its runner lives would
    take it for a lost runner), so their deletion paths can start before the batch has deleted the pods and
    Secrets: the batch announces each object (:meth:`expect`) before it deletes the runners, then settles it
    (:meth:`settle`) as deleted, or not -- the request failed, or the object did not match -- and then the
    deletion path deletes it itself, as without batches.
    """

    def expect(self, runner_uid: str, plural: str) -> None:
        """The batch is about to delete the ``plural`` object (``"pods"``, ``"secrets"``) of ``runner_uid``."""
        if runner_uid:
            self._put((runner_uid, plural), BatchDeletion.PENDING)

    def settle(self, runner_uid: str, plural: str, *, deleted: bool) -> None:
        """The batch's request for that object returned: it deleted it, or not."""
        if deleted:
            self._put((runner_uid, plural), BatchDeletion.DELETED)
        else:
            self._pop((runner_uid, plural))

    def pending(self, runner_uid: str, plural: str) -> bool:
        """Whether the batch is deleting that object right now."""
        return self._get((runner_uid, plural)) is BatchDeletion.PENDING

    def state(self, runner_uid: str, plural: str) -> BatchDeletion | None:
        """Where the batch stands with that object (``None``: no batch deletes it). A deleted one is forgotten
        once read: a deletion path asks once."""
        state = self._get((runner_uid, plural))
        if state is BatchDeletion.DELETED:
            self._pop((runner_uid, plural))
        return state


class RunnerDeletions(Handoff[str, bool]):
    """EphemeralRunners the runner controller of this process deletes itself, by UID.

    A succeeded runner is marked ``Succeeded`` and then deleted by its own controller (ARC's success path), and
    the EphemeralRunnerSet reaps the finished runners it sees: it records its finished-runner marker and then
    deleted the same runner, its pod and its JIT Secret again (three ``deletecollection`` requests per job,
    issue 30). The runner controller records the runner here before it writes the runner's ``Succeeded`` (so
    before the set can see it: that write's event may arrive before the write's answer) and again before it sends
    the delete, and forgets it if the delete fails; the set still records its marker for such a runner, and
    leaves its deletion to the runner controller.
    """

    def record(self, runner_uid: str) -> None:
        """The runner controller is about to delete runner ``runner_uid``."""
        if runner_uid:
            self._put(runner_uid, True)

    def forget(self, runner_uid: str) -> None:
        """Its delete failed, or its deletion path is complete."""
        self._pop(runner_uid)

    def deleting(self, runner_uid: str) -> bool:
        """Whether the runner controller deletes runner ``runner_uid`` itself."""
        return self._get(runner_uid) is not None
