"""The finished-runner marker (``status.finishedRunnerCleanupPatchID``, ARC #4642) as this process knows it, and
when it is written (docs/revisions.md, "Finished runners").

The marker records the patch ID under which the set saw finished runners, so that no runner is created in their
place under that patch (the listener's lower ``replicas`` for their jobs is on its way). This controller is its
only writer (one worker per set, one leader), so once it has written or read a set's marker it knows it
(:attr:`FinishedMarker.stored`), and its decisions go by what it recorded (:attr:`FinishedMarker.known`). The
answer to any write of the set is as fresh as a read: a new set's finalizer write tells the marker, so the set's
first job reads nothing (:meth:`FinishedMarker.answered`; a read per set and process, issue 30).

When the set deletes finished runners itself, the marker is written first, on its own: a crash between the
deletions and a later write would leave a restarted controller replacing them (:meth:`FinishedMarker.record`
answers ``True``). A succeeded runner is usually deleted by its own controller, though (``RunnerDeletions``,
controllers/handoff.py), with no order to keep against the set's write: then the marker waits in memory and
rides the status write that the runner's finish causes anyway (its counts and its job record, :mod:`.pass_status`),
one write where there were two per job (issue 30). This process's decisions see it at once; only a restarted
process could miss it, for the counts' few seconds, as it could already miss a marker whose write lost the race
with the runner's deletion: the cost is one runner too many under that patch, which the listener's next patch
corrects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.api.views import EphemeralRunnerSetView

MARKER_FIELD: Final = "finishedRunnerCleanupPatchID"


@dataclass
class FinishedMarker:
    """One set's marker in this process's memory (a field of its :class:`.scope.SetMemory`)."""

    stored: int | None = None
    """The marker as stored, once this process wrote or read it; ``None``: read it from the API when needed."""
    pending: int | None = None
    """A marker recorded and not written yet: it rides the set's next status write."""

    @property
    def known(self) -> int | None:
        """The marker this process's decisions go by: the one recorded, else the one stored."""
        return self.pending if self.pending is not None else self.stored

    def record(self, patch_id: int, *, set_deletes: bool) -> bool:
        """Finished runners were seen under ``patch_id``. ``set_deletes``: the set deletes some of them itself;
        then ``True``: the caller writes the marker now, before those deletions
        (:func:`.status.patch_finished_cleanup_marker`, which skips a write :attr:`stored` shows is done) and
        reports it with :meth:`stored_as`. Else ``False``: the marker is pending for :meth:`changes` (unless
        already :attr:`known`)."""
        if set_deletes:
            return True
        if self.known != patch_id:
            self.pending = patch_id
        return False

    def changes(self, status: Mapping[str, Any]) -> dict[str, Any]:
        """``{MARKER_FIELD: pending}`` for the set's status write (``status``: as the cache shows it), or ``{}``
        when nothing is pending or the status holds it already (then it counts as stored: a process that has not
        written the marker yet trusts the cache only for a value it would write anyway)."""
        if self.pending is None:
            return {}
        shown = self.stored
        if shown is None and MARKER_FIELD in status:
            shown = EphemeralRunnerSetView({"status": status}).finished_runner_cleanup_patch_id
        if shown == self.pending:
            self.stored, self.pending = self.pending, None
            return {}
        return {MARKER_FIELD: self.pending}

    def written(self, changes: Mapping[str, Any]) -> None:
        """A status write of ``changes`` succeeded: the marker it carried (if any) is stored."""
        if MARKER_FIELD in changes:
            self.stored = int(changes[MARKER_FIELD])
            if self.pending == self.stored:
                self.pending = None

    def answered(self, stored: Mapping[str, Any]) -> None:
        """A write of the set was answered with ``stored``, the set as stored after it: when this process does not
        know the marker yet, it knows it from that answer (no read needed later)."""
        if self.stored is None:
            self.stored = EphemeralRunnerSetView(stored).finished_runner_cleanup_patch_id
            if self.pending == self.stored:
                self.pending = None

    def stored_as(self, value: int) -> None:
        """The marker is stored as ``value`` (written on its own, read, or reset by the revision's write); a
        pending one is superseded."""
        self.stored, self.pending = value, None
