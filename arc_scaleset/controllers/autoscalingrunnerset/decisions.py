"""The AutoscalingRunnerSet's decisions about its children (docs/revisions.md), as pure functions.

- :func:`next_actionable_revision`: the revision a runner-spec change gets (past both the spec's and the
  applied value, so an update still being applied is not confused with a new one).
- :func:`plan_ephemeral_runner_set`: given the live EphemeralRunnerSet (or none) and the desired one,
  exactly one of: create it, wait for it, tear it down (Outdated at its current revision), patch its
  runner spec with a revision bump, merge its metadata, or nothing. A set ARC made before ``spec.patchID``
  existed gets it in that same patch (a patch of its own when nothing else changes): :mod:`.adoption`.
- :func:`listener_differences`: which listener-relevant fields differ (any → the listener is recreated).

Comparisons are semantic (``arc_scaleset.api.semantic.deep_equal``: nil == empty, Quantities by value), so
an ``env: []`` or ``cpu: 1000m`` versus ``1`` is never a change; they are deliberately not short-circuited
on ``metadata.generation`` (re-registration changes only an annotation, and must still reach the set).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from arc_scaleset.api.keys import ANNOTATION_RUNNER_SPEC_HASH, AutoscalingRunnerSetPhase, EphemeralRunnerSetPhase
from arc_scaleset.api.listener_group import LABEL_GROUP
from arc_scaleset.api.listener_standby import ANNOTATION_STANDBY
from arc_scaleset.api.semantic import deep_equal
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.controllers.autoscalingrunnerset.adoption import adoption_fields
from arc_scaleset.controllers.drift import contains_all, merge_metadata
from arc_scaleset.kube.merge_patch import merge_patch
from arc_scaleset.kube.views import ObjectView


class ErsAction(enum.Enum):
    CREATE = "create"
    WAIT_FOR_DELETION = "wait-for-deletion"
    TEAR_DOWN = "tear-down"
    BUMP_REVISION = "bump-revision"
    MERGE_METADATA = "merge-metadata"
    NONE = "none"


@dataclass(frozen=True)
class ErsPlan:
    """What to do with the EphemeralRunnerSet; ``patch`` is a JSON merge patch (with a resourceVersion lock)."""

    action: ErsAction
    patch: dict[str, Any] = field(default_factory=dict)
    revision_from: int = 0
    revision_to: int = 0
    changed_fields: tuple[str, ...] = ()


def revisions_of(ers: Mapping[str, Any]) -> tuple[int, int]:
    """``(spec.actionableRevision, status.appliedActionableRevision)`` of a live set (missing = 0)."""
    view = EphemeralRunnerSetView(ers)
    return view.actionable_revision, view.applied_actionable_revision


def next_actionable_revision(ers: Mapping[str, Any] | None) -> int:
    """The next-revision rule: spec + 1 while an update is still being applied (spec > applied), else
    applied + 1; 1 when there is no set. Never at or below either current value."""
    if ers is None:
        return 1
    spec_revision, applied = revisions_of(ers)
    return spec_revision + 1 if spec_revision > applied else applied + 1


def outdated_teardown_due(ers: Mapping[str, Any], *, ars_phase: str) -> bool:
    """ERS Outdated *at its current revision* while the ARS is Running (ARC #4644).

    Right after a runner-spec change, spec.actionableRevision > applied, so an Outdated verdict left over
    from the previous spec cannot tear the scale set down; it counts once the set applied the revision.
    """
    if ars_phase != AutoscalingRunnerSetPhase.RUNNING:
        return False
    if EphemeralRunnerSetView(ers).phase != EphemeralRunnerSetPhase.OUTDATED:
        return False
    spec_revision, applied = revisions_of(ers)
    return applied >= spec_revision


def _spec_field_names(live: Mapping[str, Any], desired: Mapping[str, Any]) -> tuple[str, ...]:
    keys = sorted(set(live) | set(desired))
    return tuple(key for key in keys if not deep_equal(live.get(key), desired.get(key)))


def plan_ephemeral_runner_set(
    live: Mapping[str, Any] | None,
    desired: Mapping[str, Any],
    *,
    ars_phase: str,
    excluded_label_prefixes: Iterable[str] = (),
) -> ErsPlan:
    """Decide the one next step for the EphemeralRunnerSet (see the module docstring)."""
    if live is None:
        return ErsPlan(ErsAction.CREATE)
    view = EphemeralRunnerSetView(live)
    if view.is_deleting:
        return ErsPlan(ErsAction.WAIT_FOR_DELETION)
    if outdated_teardown_due(live, ars_phase=ars_phase):
        return ErsPlan(ErsAction.TEAR_DOWN)

    wanted = EphemeralRunnerSetView(desired)
    merged = merge_metadata(
        live,
        labels=wanted.labels,
        annotations=wanted.annotations,
        excluded_label_prefixes=excluded_label_prefixes,
    )
    metadata_patch = {**merged.patch.get("metadata", {}), "resourceVersion": view.resource_version}
    adopt = adoption_fields(live)
    if not deep_equal(view.runner_spec, wanted.runner_spec):
        return _bump_revision(live, desired, metadata_patch, adopt)

    live_runner_metadata = view.spec.get("ephemeralRunnerMetadata")
    desired_runner_metadata = wanted.spec.get("ephemeralRunnerMetadata")
    metadata_drift = not deep_equal(live_runner_metadata, desired_runner_metadata)
    if merged.changed or metadata_drift or adopt:
        patch: dict[str, Any] = {"metadata": metadata_patch}
        spec: dict[str, Any] = dict(adopt)
        runner_metadata_patch = _replace_wholesale(live_runner_metadata, desired_runner_metadata)
        if metadata_drift and runner_metadata_patch is not _UNCHANGED:
            spec["ephemeralRunnerMetadata"] = runner_metadata_patch
        if spec:
            patch["spec"] = spec
        return ErsPlan(ErsAction.MERGE_METADATA, patch=patch)
    return ErsPlan(ErsAction.NONE)


def _bump_revision(
    live: Mapping[str, Any],
    desired: Mapping[str, Any],
    metadata_patch: Mapping[str, Any],
    adopt: Mapping[str, Any],
) -> ErsPlan:
    """The runner spec drifted: patch it (and the runner metadata, and the merged metadata) with the next
    actionable revision."""
    have, wanted = EphemeralRunnerSetView(live), EphemeralRunnerSetView(desired)
    live_runner_spec, desired_runner_spec = have.runner_spec, wanted.runner_spec
    current, _ = revisions_of(live)
    target = next_actionable_revision(live)
    spec_patch: dict[str, Any] = {
        **adopt,
        "ephemeralRunnerSpec": merge_patch(live_runner_spec, desired_runner_spec),
        "actionableRevision": target,
    }
    runner_metadata_patch = _replace_wholesale(
        have.spec.get("ephemeralRunnerMetadata"), wanted.spec.get("ephemeralRunnerMetadata")
    )
    if runner_metadata_patch is not _UNCHANGED:
        spec_patch["ephemeralRunnerMetadata"] = runner_metadata_patch
    return ErsPlan(
        ErsAction.BUMP_REVISION,
        patch={"metadata": dict(metadata_patch), "spec": spec_patch},
        revision_from=current,
        revision_to=target,
        changed_fields=_spec_field_names(live_runner_spec, desired_runner_spec),
    )


class _Unchanged:
    pass


_UNCHANGED: Any = _Unchanged()


def _replace_wholesale(live: Any, desired: Any) -> Any:
    """The merge-patch value that replaces ``live`` by ``desired`` (``None`` deletes; maps are diffed so keys
    the desired value lacks are deleted too)."""
    if desired is None:
        return None if live is not None else _UNCHANGED
    if isinstance(live, dict) and isinstance(desired, dict):
        diff = merge_patch(live, desired)
        return diff if diff else _UNCHANGED
    return desired


def listener_differences(live: Mapping[str, Any], desired: Mapping[str, Any]) -> tuple[str, ...]:
    """The listener-relevant differences between a live AutoscalingListener and the desired one.

    Spec fields are compared semantically, field by field (the names are returned, for the Event); labels and
    annotations the controller sets must be present with its values, while keys added by others are allowed
    (comparing whole maps would recreate the listener forever once a tool adds a label).

    A listener ARC's controller made (it carries ARC's ``actions.github.com/runner-spec-hash``, which this
    controller never writes) is always replaced, exactly once: its pod runs ARC's listener, and the
    AutoscalingListener controller leaves such a listener alone until then (docs/migration.md).
    """
    have, wanted = ObjectView(live), ObjectView(desired)
    differences = [f"spec.{name}" for name in _spec_field_names(have.spec, wanted.spec)]
    if ANNOTATION_RUNNER_SPEC_HASH in have.annotations and ANNOTATION_RUNNER_SPEC_HASH not in wanted.annotations:
        differences.insert(0, "made by ARC's controller")
    if not contains_all(have.labels, wanted.labels):
        differences.append("metadata.labels")
    elif have.labels.get(LABEL_GROUP) != wanted.labels.get(LABEL_GROUP):
        # Leaving a shared listener removes the label, which the containment check cannot see.
        differences.append(f"metadata.labels[{LABEL_GROUP}]")
    if not contains_all(have.annotations, wanted.annotations):
        differences.append("metadata.annotations")
    elif have.annotations.get(ANNOTATION_STANDBY) != wanted.annotations.get(ANNOTATION_STANDBY):
        # Giving up the standby removes the annotation, which the containment check cannot see.
        differences.append(f"metadata.annotations[{ANNOTATION_STANDBY}]")
    return tuple(differences)
