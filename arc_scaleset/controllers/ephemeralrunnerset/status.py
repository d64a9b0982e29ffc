"""The EphemeralRunnerSet's status writes: conflict-checked against a fresh read where order matters.

- :func:`patch_applied_actionable_revision` (ARC's ``patchAppliedActionableRevisionStatus``): GET the
  set and LIST its runners from the API (never the cache; narrowed by :func:`runner_selector` to its scale
  set's runners, so its cost does not grow with the other scale sets of the namespace), compute the change with
  :func:`.revision.applied_revision_changes`, and write it as a status merge patch
  carrying the read's ``resourceVersion``. A concurrent writer makes the server answer 409; the whole
  read-compute-write is retried (client-go's DefaultBackoff, 4 attempts) and the last conflict propagates so
  the workqueue retries the key. Because every attempt starts from the live value and only ever raises it,
  ``appliedActionableRevision`` never moves backwards -- not after a conflict, not after a restart between
  the cleanup and this write (the cleanup is then simply done again: it is idempotent).
- :func:`patch_finished_cleanup_marker` (``patchFinishedRunnerCleanupPatchIDStatus``): the same shape for
  ``finishedRunnerCleanupPatchID``, and :func:`read_finished_cleanup_patch_id` its uncached read. This
  controller is the marker's only writer (one worker per set, one leader), so once it has written or read a
  set's marker it knows the stored value (:mod:`.finished_marker`): then neither needs a read, and the
  write of that one field needs no ``resourceVersion`` (its value depends on nothing else in the object).
  A new process (a restart, a new leader) reads it once, unless the answer to one of its writes of the set
  told it first (issue 30: two GETs per job otherwise, one per set after that). A marker that
  need not go before a deletion of the set's own rides :func:`patch_status` instead (:mod:`.finished_marker`).
- :func:`patch_phase`: the phase alone, diffed against the object as read (the revision fields are never
  re-sent from a possibly stale copy); :func:`patch_status`: the same for the phase and the runner counts
  (:mod:`.counts`), in one write (:mod:`.pass_status` holds a change of the counts alone back as the set's
  :class:`.counts.StatusPacer` says).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import LABEL_SCALE_SET_NAME
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.controllers.ephemeralrunnerset.revision import (
    applied_revision_changes,
    finished_marker_changes,
    phase_changes,
)
from arc_scaleset.controllers.runner_classification import RunnerView
from arc_scaleset.kube.client import KubeClient, PatchType
from arc_scaleset.kube.ownerrefs import controller_of
from arc_scaleset.kube.retry import retry_on_conflict

STATUS = "status"


def owned_by_set(obj: Mapping[str, Any], ers_name: str) -> bool:
    """Whether ``obj``'s controller owner is the EphemeralRunnerSet called ``ers_name`` (same namespace)."""
    ref = controller_of(obj)
    return (
        ref is not None
        and ref.get("kind") == EPHEMERAL_RUNNER_SETS.kind
        and str(ref.get("apiVersion", "")).startswith(f"{EPHEMERAL_RUNNER_SETS.group}/")
        and ref.get("name") == ers_name
    )


async def _write_status(
    kube: KubeClient, *, namespace: str, name: str, resource_version: str, changes: Mapping[str, Any]
) -> dict[str, Any]:
    body = {"metadata": {"resourceVersion": resource_version}, "status": dict(changes)}
    return await kube.patch(
        EPHEMERAL_RUNNER_SETS, name, body, namespace=namespace, patch_type=PatchType.MERGE, subresource=STATUS
    )


def runner_selector(ers: Mapping[str, Any], exclude_label_prefixes: Iterable[str] = ()) -> str | None:
    """A label selector that every runner of ``ers`` matches, narrowing a list of the namespace's runners to
    those of its scale set; ``None`` (list them all) when there is none to rely on.

    A runner carries its set's labels as they were when it was created (builders.py), less those excluded
    from propagation. The scale set's name label is set on the set at its creation and never changes, so a
    runner has it with the same value unless that label is excluded, or the set does not carry it.
    """
    value = EphemeralRunnerSetView(ers).labels.get(LABEL_SCALE_SET_NAME)
    if not value or LABEL_SCALE_SET_NAME.startswith(tuple(exclude_label_prefixes)):
        return None
    return f"{LABEL_SCALE_SET_NAME}={value}"


async def patch_applied_actionable_revision(
    kube: KubeClient,
    *,
    namespace: str,
    name: str,
    target: int,
    exclude_label_prefixes: Iterable[str] = (),
    clock: Clock = REAL_CLOCK,
) -> dict[str, Any]:
    """Record ``target`` as applied (never lowering it); returns the set as stored (or as read if unchanged).

    ``exclude_label_prefixes``: the labels not propagated to runners (:func:`runner_selector`)."""
    prefixes = tuple(exclude_label_prefixes)

    async def attempt() -> dict[str, Any]:
        live = await kube.get(EPHEMERAL_RUNNER_SETS, name, namespace=namespace)
        listed = await kube.list(EPHEMERAL_RUNNERS, namespace=namespace, label_selector=runner_selector(live, prefixes))
        runners = [RunnerView.of(item) for item in listed.items if owned_by_set(item, name)]
        changes = applied_revision_changes(live, target=target, runners=runners)
        if not changes:
            return live
        resource_version = EphemeralRunnerSetView(live).resource_version
        return await _write_status(
            kube, namespace=namespace, name=name, resource_version=resource_version, changes=changes
        )

    return await retry_on_conflict(attempt, clock=clock)


async def patch_finished_cleanup_marker(
    kube: KubeClient,
    *,
    namespace: str,
    name: str,
    patch_id: int,
    known: int | None = None,
    clock: Clock = REAL_CLOCK,
) -> int:
    """Set ``status.finishedRunnerCleanupPatchID = patch_id`` (no write when already equal); returns the marker
    as stored now. ``known``: the marker as stored, when this process knows it (module docstring); ``None``:
    the write is decided on a fresh read and carries its ``resourceVersion``."""
    if known is not None:
        if known != patch_id:
            await kube.patch(
                EPHEMERAL_RUNNER_SETS, name, {"status": finished_marker_changes({}, patch_id=patch_id)},
                namespace=namespace, patch_type=PatchType.MERGE, subresource=STATUS,
            )  # fmt: skip
        return patch_id

    async def attempt() -> dict[str, Any]:
        live = await kube.get(EPHEMERAL_RUNNER_SETS, name, namespace=namespace)
        changes = finished_marker_changes(live, patch_id=patch_id)
        if not changes:
            return live
        resource_version = EphemeralRunnerSetView(live).resource_version
        return await _write_status(
            kube, namespace=namespace, name=name, resource_version=resource_version, changes=changes
        )

    await retry_on_conflict(attempt, clock=clock)
    return patch_id


async def read_finished_cleanup_patch_id(kube: KubeClient, *, namespace: str, name: str) -> int:
    """``status.finishedRunnerCleanupPatchID`` as the API has it now (for a process that does not know it yet:
    module docstring)."""
    live = await kube.get(EPHEMERAL_RUNNER_SETS, name, namespace=namespace)
    return EphemeralRunnerSetView(live).finished_runner_cleanup_patch_id


async def patch_phase(kube: KubeClient, ers: Mapping[str, Any], *, phase: str) -> bool:
    """Write ``status.phase`` if ``ers`` (as read) shows another; True when something was written.

    No resourceVersion: the phase is derived from the runners on every pass, so a write from a slightly stale
    read is corrected by the next pass, and sending only this one field never overwrites another writer's
    fields.
    """
    return await patch_status(kube, ers, phase_changes(ers, phase=phase)) is not None


async def patch_status(kube: KubeClient, ers: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any] | None:
    """Write ``changes`` (derived fields: the phase, the runner counts) to the status of ``ers``; the set as
    stored, ``None`` when nothing was written.

    No resourceVersion, for the reason :func:`patch_phase` gives: the fields are derived from the runners on
    every pass, and only the changed fields are sent.
    """
    if not changes:
        return None
    view = EphemeralRunnerSetView(ers)
    return await kube.patch(
        EPHEMERAL_RUNNER_SETS,
        view.name,
        {"status": dict(changes)},
        namespace=view.namespace,
        patch_type=PatchType.MERGE,
        subresource=STATUS,
    )
