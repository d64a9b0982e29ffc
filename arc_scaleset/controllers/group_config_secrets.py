"""The shared listeners' config Secrets, read once per change, not once per pass (docs/controllers.md, "Shared
listeners"; issue 30).

A group's config Secret holds one key per member (:mod:`arc_scaleset.api.listener_group`), so it grows with the
group: about 300 members made it a 0.41 s GET, and every member's pass and every group pass read it. The
controller writes it itself (a member publishes its key, the group prunes keys), and those writes answer with the
whole Secret. :class:`GroupConfigSecrets` keeps what the last read or write returned and answers a read from it
while a metadata-only watch of the group Secrets (label :data:`~arc_scaleset.api.listener_group.LABEL_GROUP`, in
the controller namespace) shows no other change:

- **What is watched**: only the identity and ``resourceVersion`` of Secrets carrying the group label
  (:func:`~arc_scaleset.kube.informer.identity_only`); the data is fetched with a GET, as the referenced objects'
  (:mod:`.referenced_data`).
- **When a kept copy answers** (:func:`reusable`, pure): the watch runs, has listed, shows the Secret, and shows
  either the version kept, or the version it showed when the kept copy was written by this controller (the watch
  has not caught up with that write, and has seen nothing after it). Otherwise the read is a GET, and a Secret
  the watch does not show (not made yet, or without the label: in the way) is never kept.
- **Freshness**: as any informer cache's, bounded by the watch's delay; a write of this controller is seen at
  once.
- **It is a controller Source**: the shared-listener controller runs the watch (only while leading), and a change
  of a group's Secret queues that group (a member published or removed its key).

The objects returned hold ``metadata`` (name, namespace, UID, ``resourceVersion``, labels, annotations) and
``data`` only, and are shared: never mutate them. ``fetches`` counts the GETs, ``reuses`` the reads answered from
memory.
:class:`GroupSecretWatch` is the watch, :class:`GroupConfigSecrets` what is kept (its rule pure: :func:`reusable`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from arc_scaleset.api.listener_group import GROUP_NAME_PREFIX, LABEL_GROUP
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.controllers.namespace_watch import NamespaceWatch
from arc_scaleset.controllers.secrets import ObjectGetter
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.informer import Object, identity_only, resource_version
from arc_scaleset.kube.resources import SECRETS
from arc_scaleset.kube.views import ObjectView


@dataclass(frozen=True)
class Kept:
    """A group Secret as last read or written: its ``obj`` (metadata and data) at ``version``; ``written_over``:
    the version the watch showed when this controller's write returned it (``None``: it was read)."""

    version: str
    obj: Mapping[str, Any]
    written_over: str | None = None


def reusable(kept: Kept | None, watched: str | None) -> bool:
    """Whether ``kept`` may answer a read while the watch shows ``watched`` (``None``: the watch does not show
    the Secret, or is not running). Pure."""
    if kept is None or watched is None:
        return False
    return watched in (kept.version, kept.written_over)


_KEPT_METADATA = ("name", "namespace", "uid", "resourceVersion", "labels", "annotations")
"""What a group's pass compares (labels, annotations) and writes against (``resourceVersion``); not
``managedFields``, most of the metadata's bytes."""


def _kept_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata") or {}
    kept = {name: metadata[name] for name in _KEPT_METADATA if name in metadata}
    return {"metadata": kept, "data": dict(obj.get("data") or {})}


class Versions(Protocol):
    """What knows the version of the group Secrets (:class:`GroupSecretWatch`)."""

    def resource_version(self, name: str) -> str | None:
        """The Secret's ``resourceVersion`` as watched now; ``None``: the watch does not show it, or is not
        running."""
        ...


class GroupConfigSecrets:
    """The group config Secrets of ``namespace`` (the controller namespace), read through ``kube`` and kept
    while ``versions`` shows no other change (module docstring)."""

    def __init__(self, kube: ObjectGetter, versions: Versions, *, namespace: str) -> None:
        self._kube = kube
        self._versions = versions
        self.namespace = namespace
        self._kept: dict[str, Kept] = {}
        self.fetches = 0
        self.reuses = 0

    async def get(self, name: str) -> Object | None:
        """The group Secret ``name`` (``None``: there is none); the API's other errors propagate."""
        watched = self._versions.resource_version(name)
        kept = self._kept.get(name)
        if reusable(kept, watched):
            assert kept is not None
            self.reuses += 1
            return kept.obj
        self.fetches += 1
        try:
            obj = await self._kube.get(SECRETS, name, namespace=self.namespace)
        except NotFound:
            self._kept.pop(name, None)
            return None
        if watched is None:
            self._kept.pop(name, None)  # not shown by the watch: nothing would say when it changed
            return obj
        return self._keep(name, Kept(ObjectView(obj).resource_version, _kept_object(obj)))

    def written(self, obj: Mapping[str, Any]) -> None:
        """A write of this controller returned ``obj``, the group Secret as it is now: later reads answer from
        it until the watch shows another change."""
        name = ObjectView(obj).name
        watched = self._versions.resource_version(name)
        if watched is None:
            self._kept.pop(name, None)
            return
        self._keep(name, Kept(ObjectView(obj).resource_version, _kept_object(obj), written_over=watched))

    def _keep(self, name: str, kept: Kept) -> Object:
        self._kept[name] = kept
        return kept.obj

    def __len__(self) -> int:
        return len(self._kept)


class GroupSecretWatch(NamespaceWatch):
    """The metadata-only watch of the group Secrets of ``namespace`` (the controller namespace): a controller
    Source that queues a group when its Secret changes (:class:`~.namespace_watch.NamespaceWatch`: on the
    watches' own request budget)."""

    def __init__(self, kube: KubeClient, *, namespace: str, clock: Clock = REAL_CLOCK) -> None:
        super().__init__(
            kube,
            SECRETS,
            namespace=namespace,
            clock=clock,
            label_selector=LABEL_GROUP,
            metadata_only=True,
            transform=identity_only,
        )
        self.informer.add_handler(on_add=self._added, on_update=self._changed, on_delete=self._deleted)

    def _added(self, obj: Object) -> None:
        if self.informer.has_synced:  # the first list: nothing changed, the groups are reconciled anyway
            self._queue(obj)

    def _changed(self, old: Object, new: Object) -> None:
        if resource_version(old) != resource_version(new):
            self._queue(new)

    def _deleted(self, obj: Object) -> None:
        self._queue(obj)

    def _queue(self, obj: Object) -> None:
        # identity_only keeps no label: the group is the name's suffix (the reconciler checks the label).
        name = ObjectView(obj).name
        if name.startswith(GROUP_NAME_PREFIX):
            self.enqueue(Request(self.namespace, name.removeprefix(GROUP_NAME_PREFIX)))
