"""The runners of one EphemeralRunnerSet, classified, kept up to date from the runners that changed.

Why: a set is reconciled on the events of its runners, and a scale-down of N runners brings a pass every few
events (242 passes for 1,000 runners, bench/README.md). A pass that parsed and sorted all of the set's runners
again made a scale-down cost grow with the square of N (issue 20). :class:`SetRunners` is told which runners
changed (:meth:`SetRunners.changed`, from the controller's event handler), and a pass
(:meth:`SetRunners.refresh`) re-reads only those from the cache: its cost is the number of changed runners,
plus copying the state lists (a C-level copy, no per-runner Python work).

Contract: after :meth:`SetRunners.refresh`, :meth:`SetRunners.states` equals
``classify([RunnerView.of(o) for o in children_of(cache, owner)], applied_revision=...)`` -- the same runners,
buckets, order (oldest first, then by name) and ``latest_patch_id`` -- provided every change of a runner of
the set since the index was built was reported through :meth:`SetRunners.changed` (a runner whose controller
owner is the set before or after the change). Adds, updates and deletes need not be told apart: the changed
runner is looked up in the cache, which the informer updates before it calls its handlers.

A runner is the set's by the ownership rule (:mod:`arc_scaleset.kube.ownerrefs`): in the set's namespace, its
controller reference naming the set's group, kind, name and UID. A runner another team made in its own namespace
with this set's UID in its owner reference is not counted, kept or removed here.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
from collections.abc import Collection, Mapping
from typing import Any, Protocol

from arc_scaleset.controllers.runner_classification import RunnerStates, RunnerView, bucket_of
from arc_scaleset.kube.ownerrefs import Owner, children_of, is_controlled_by
from arc_scaleset.kube.views import ObjectView

_BUCKETS = ("pending", "running", "finished", "failed", "outdated", "deleting")


class RunnerSource(Protocol):
    """The cache calls :class:`SetRunners` makes (:class:`arc_scaleset.kube.manager.Cache` has them)."""

    def get(self, namespace: str | None, name: str) -> Mapping[str, Any] | None: ...

    def by_owner(self, uid: str) -> list[Mapping[str, Any]]: ...


def _order(runner: RunnerView) -> tuple[Any, str]:
    """The order of :func:`~arc_scaleset.controllers.runner_classification.oldest_first`."""
    return runner.created, runner.name


def controller_uid(obj: Mapping[str, Any]) -> str:
    """The UID of ``obj``'s controller owner (``""``: none)."""
    ref = ObjectView(obj).controller_owner
    return str(ref.get("uid") or "") if ref is not None else ""


class SetRunners:
    """The classified runners of the set ``owner`` (its identity, :meth:`Owner.of`); see the module docstring."""

    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        self.uid = owner.uid
        self.namespace = owner.namespace
        self._known: dict[tuple[str, str], tuple[str, RunnerView, str]] = {}
        """(namespace, name) -> (resourceVersion read, view, bucket)."""
        self._buckets: dict[str, list[RunnerView]] = {bucket: [] for bucket in _BUCKETS}
        self._patch_ids: collections.Counter[int] = collections.Counter()
        self._dirty: set[tuple[str, str]] = set()
        self._built = False

    def __len__(self) -> int:
        return len(self._known)

    def changed(self, namespace: str, name: str) -> None:
        """Runner ``namespace/name`` was added, updated or deleted (read again on the next refresh)."""
        if self._built:
            self._dirty.add((namespace, name))

    def refresh(self, cache: RunnerSource) -> None:
        """Bring the index up to date with ``cache``: every runner the first time, then the changed ones."""
        if not self._built:
            for obj in children_of(cache, self.owner):
                view = ObjectView(obj)
                self._put((view.namespace, view.name), obj)
            self._built = True
            return
        dirty, self._dirty = self._dirty, set()
        for key in dirty:
            current = cache.get(*key)
            if current is None or not is_controlled_by(current, self.owner):
                self._drop(key)
            else:
                self._put(key, current)

    def view(self, name: str) -> RunnerView | None:
        """The view of the set's runner ``name`` (in the set's namespace) as last refreshed; ``None``: no such
        runner."""
        known = self._known.get((self.namespace, name))
        return None if known is None else known[1]

    def states(self, *, applied_revision: int, deleting: Collection[str] = ()) -> RunnerStates:
        """The runners by state against ``applied_revision``; those named in ``deleting`` (runners this process
        deleted whose deletion the cache does not show yet) shown as deleting, as
        :meth:`~arc_scaleset.controllers.ephemeralrunnerset.expectations.DeletionExpectations.mark` shows them."""
        buckets = {bucket: list(members) for bucket, members in self._buckets.items()}
        for name in deleting:
            known = self._known.get((self.namespace, name))
            if known is None or known[2] == "deleting":
                continue
            _, view, bucket = known
            _remove(buckets[bucket], view)
            bisect.insort(buckets["deleting"], dataclasses.replace(view, deleting=True), key=_order)
        outdated = buckets.pop("outdated")
        return RunnerStates(
            applied_revision=applied_revision,
            latest_patch_id=max(0, max(self._patch_ids, default=0)),
            outdated=[runner for runner in outdated if runner.revision >= applied_revision],
            stale_outdated=[runner for runner in outdated if runner.revision < applied_revision],
            **buckets,
        )

    # -- keeping the index ------------------------------------------------------------------------------

    def _put(self, key: tuple[str, str], obj: Mapping[str, Any]) -> None:
        version = ObjectView(obj).resource_version
        known = self._known.get(key)
        if known is not None and version and known[0] == version:
            return
        if known is not None:
            self._forget(known)
        view = RunnerView.of(obj)
        bucket = bucket_of(view)
        self._known[key] = (version, view, bucket)
        bisect.insort(self._buckets[bucket], view, key=_order)
        self._patch_ids[view.patch_id] += 1

    def _drop(self, key: tuple[str, str]) -> None:
        known = self._known.pop(key, None)
        if known is not None:
            self._forget(known)

    def _forget(self, known: tuple[str, RunnerView, str]) -> None:
        _, view, bucket = known
        _remove(self._buckets[bucket], view)
        self._patch_ids[view.patch_id] -= 1
        if self._patch_ids[view.patch_id] <= 0:
            del self._patch_ids[view.patch_id]


def _remove(members: list[RunnerView], view: RunnerView) -> None:
    """Remove ``view`` (this very object) from ``members``, a list in :func:`_order`."""
    at = bisect.bisect_left(members, _order(view), key=_order)
    if at < len(members) and members[at] is view:
        del members[at]
        return
    # Only when (created, name) is not unique (same-named runners of other namespaces claiming the set as
    # owner): look further rather than remove the wrong one or leave a stale entry.
    for index, member in enumerate(members):
        if member is view:
            del members[index]
            return
