"""Revision bookkeeping of an EphemeralRunnerSet's status, as pure functions (docs/revisions.md).

Two status fields carry the update-propagation state across passes and restarts:

- ``appliedActionableRevision``: the ``spec.actionableRevision`` whose cleanup is done. It only moves
  forward, and only here (:func:`applied_revision_changes`): a call with a target at or below the live
  value changes neither it nor the marker. Moving it forward resets ``finishedRunnerCleanupPatchID`` to 0
  in the same write, and recomputes ``phase`` against the *new* applied revision: classifying against the
  old one would count the previous spec's Outdated runners as current and switch the set off.
- ``finishedRunnerCleanupPatchID``: the patch ID at which finished runners were last reaped
  (:func:`finished_marker_changes`). A plain equality write that may move backwards: patch IDs restart at
  0 when the listener restarts.

Both functions take the *live* object (read from the API, never a cache) and return the status fields to
change -- ``{}`` when nothing changes -- so the writer sends a diff against what it read, under that
read's resourceVersion.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.controllers.ephemeralrunnerset.scaling import set_phase
from arc_scaleset.controllers.runner_classification import RunnerView, classify

_CLEANUP_MARKER = "finishedRunnerCleanupPatchID"


def applied_revision_changes(live: Mapping[str, Any], *, target: int, runners: Iterable[RunnerView]) -> dict[str, Any]:
    """The status fields to write so that ``target`` is applied; ``{}`` when the status already says so.

    ``runners`` are the set's EphemeralRunners as listed from the API with the same freshness as ``live``.
    """
    view = EphemeralRunnerSetView(live)
    current_applied = view.applied_actionable_revision
    changes: dict[str, Any] = {}
    if current_applied < target:
        changes["appliedActionableRevision"] = target
        if view.finished_runner_cleanup_patch_id != 0 or _CLEANUP_MARKER not in view.status:
            changes[_CLEANUP_MARKER] = 0
    states = classify(runners, applied_revision=max(current_applied, target))
    phase = str(set_phase(states))
    if view.phase != phase:
        changes["phase"] = phase
    return changes


def finished_marker_changes(live: Mapping[str, Any], *, patch_id: int) -> dict[str, Any]:
    """``{"finishedRunnerCleanupPatchID": patch_id}`` unless the live status already holds it."""
    view = EphemeralRunnerSetView(live)
    if _CLEANUP_MARKER in view.status and view.finished_runner_cleanup_patch_id == patch_id:
        return {}
    return {_CLEANUP_MARKER: patch_id}


def phase_changes(current: Mapping[str, Any], *, phase: str) -> dict[str, Any]:
    """``{"phase": phase}`` unless ``current`` (as read) already shows it. Only the phase: the revision fields
    are written by their own conflict-checked writers and never re-sent from a possibly stale copy."""
    return {} if EphemeralRunnerSetView(current).phase == phase else {"phase": phase}
