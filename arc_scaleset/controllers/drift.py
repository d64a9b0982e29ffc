"""Metadata drift without loops: merge what the controller wants into what is there, never overwrite.

Other actors (admission webhooks, GitOps tools, users with ``kubectl label``) add labels and annotations
to the objects the controller generates. Comparing the live maps with the *desired* maps would see those
keys as drift on every pass and patch forever (an ARC bug, fixed by ARC #4634). Instead the controller computes
the *merge* of live and desired and compares the live maps with that merge: a foreign key survives and
is never drift; a key the controller wants (or wants changed) is drift exactly once, until the patch lands.

Merging never deletes a key the controller stops wanting; it only drops labels whose key has an excluded
prefix (``--exclude-label-propagation-prefix``), so such labels disappear from generated objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from arc_scaleset.api.labels import filter_and_merge_labels, merge_annotations
from arc_scaleset.kube.merge_patch import merge_patch
from arc_scaleset.kube.views import ObjectView


@dataclass(frozen=True)
class MetadataMerge:
    """The labels and annotations an object should carry, and the merge patch that gets it there."""

    labels: dict[str, str]
    annotations: dict[str, str]
    patch: dict[str, Any]
    """``{"metadata": {...}}`` with only what changes (``None`` values delete); ``{}`` when nothing does."""

    @property
    def changed(self) -> bool:
        return bool(self.patch)


def merge_metadata(
    live: Mapping[str, Any],
    *,
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
    excluded_label_prefixes: Iterable[str] = (),
) -> MetadataMerge:
    """Merge desired ``labels``/``annotations`` into ``live``'s (an object as read).

    Labels: ``filterMerge(live, desired)`` (desired wins, excluded prefixes dropped from both);
    annotations: ``merge(live, desired)``. The patch compares exactly against the live maps.
    """
    view = ObjectView(live)
    live_labels: dict[str, str] = dict(view.labels)
    live_annotations: dict[str, str] = dict(view.annotations)
    merged_labels = filter_and_merge_labels(live_labels, labels or {}, excluded_label_prefixes) or {}
    merged_annotations = merge_annotations(live_annotations, annotations or {}) or {}
    patch: dict[str, Any] = {}
    label_patch = merge_patch(live_labels, merged_labels)
    if label_patch:
        patch["labels"] = label_patch
    annotation_patch = merge_patch(live_annotations, merged_annotations)
    if annotation_patch:
        patch["annotations"] = annotation_patch
    return MetadataMerge(
        labels=merged_labels,
        annotations=merged_annotations,
        patch={"metadata": patch} if patch else {},
    )


def contains_all(live: Mapping[str, str] | None, desired: Mapping[str, str] | None) -> bool:
    """Whether every key of ``desired`` is in ``live`` with the same value (foreign keys are allowed)."""
    have = live or {}
    return all(have.get(key) == value for key, value in (desired or {}).items())


def alignment_patch(
    live: Mapping[str, Any],
    desired: Mapping[str, Any],
    *,
    replace: Iterable[str] = (),
    excluded_label_prefixes: Iterable[str] = (),
) -> dict[str, Any] | None:
    """The merge patch that brings an adopted ``live`` object in line with ``desired``: its labels and
    annotations merged in (:func:`merge_metadata`) and its ``replace`` top-level fields (a Role's ``rules``, a
    binding's ``subjects``) replaced where they differ, against ``live``'s resourceVersion so that a write from
    an older read is refused; ``None`` when nothing differs."""
    want = ObjectView(desired)
    patch = dict(
        merge_metadata(
            live, labels=want.labels, annotations=want.annotations, excluded_label_prefixes=excluded_label_prefixes
        ).patch
    )
    patch.update({name: desired.get(name) for name in replace if live.get(name) != desired.get(name)})
    if not patch:
        return None
    patch.setdefault("metadata", {})["resourceVersion"] = ObjectView(live).resource_version
    return patch
