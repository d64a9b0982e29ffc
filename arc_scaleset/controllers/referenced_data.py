"""The data of the Secrets and ConfigMaps scale sets are built from, fetched once per change, not once per pass.

Every pass of a scale set, its runner set and its runners resolves the GitHub credentials, the CA and the proxy
credentials (:class:`~arc_scaleset.controllers.github_access.GitHubAccess`), and each resolution used to GET
the Secret (bench/README.md: 10 to 14 GETs of it per scale set while it was set up, on the controller's rate
limit; issue 30). The referenced-object watch (:mod:`arc_scaleset.controllers.referenced_objects`) already
knows each referenced object's ``resourceVersion`` from a metadata-only informer, so :class:`ReferencedData`
keeps the data it last fetched with that version and fetches again only when the watch shows another version.

- **Only what is watched is kept**: an object the watch does not know now (no scale set or listener refers to it,
  the namespace's informer has not listed it, was refused, or the object is new) is read from the API server on
  every read, as before, and not kept. A scale set holds its objects watched from its first pass
  (:meth:`~arc_scaleset.controllers.referenced_objects.ReferencedObjectWatch.hold`), so the passes that set it up
  read its Secret once, not once each (issue 30); the cache never holds an object no scale set is built from.
- **Freshness**: a changed object is read again once the watch has seen the change (within a second, usually).
  A pass that runs between the change and the watch's event uses the data of the previous version, as a pass
  that ran just before the change would have.
- **Tenancy**: entries are keyed by kind, namespace and name, and callers read only their own object's
  namespace (docs/controllers.md, "Tenancy"); nothing here crosses namespaces.
- **Missing objects** are never kept: a NotFound or Forbidden is the API server's answer on every read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from arc_scaleset.controllers.referenced_objects import Kind, Reference
from arc_scaleset.controllers.secrets import ObjectGetter
from arc_scaleset.kube.resources import CONFIG_MAPS, SECRETS, Resource


class VersionSource(Protocol):
    """What knows the current ``resourceVersion`` of referenced objects (the referenced-object watch)."""

    def resource_version(self, reference: Reference) -> str | None:
        """The object's ``resourceVersion`` as watched now, ``None`` when it is not known."""
        ...


@dataclass(frozen=True)
class _Entry:
    resource_version: str
    obj: Mapping[str, Any]


def reusable(entry: _Entry | None, watched_version: str | None) -> bool:
    """Whether the data kept in ``entry`` may answer a read while the watch shows ``watched_version`` (pure):
    only when the watch knows the object and shows the very version that was fetched."""
    return entry is not None and watched_version is not None and entry.resource_version == watched_version


def _kind(resource: Resource) -> Kind | None:
    if resource == SECRETS:
        return "Secret"
    if resource == CONFIG_MAPS:
        return "ConfigMap"
    return None


class ReferencedData:
    """An :class:`~arc_scaleset.controllers.secrets.ObjectGetter` that answers reads of watched Secrets and
    ConfigMaps from the data it fetched for the version the watch shows (module docstring); every other read
    goes to ``kube``.

    The objects returned hold ``metadata.resourceVersion`` and ``data`` only, and are shared: never mutate them.
    Reads of one object at once share one GET. ``fetches`` counts the GETs, ``reuses`` the reads answered from
    memory.
    """

    def __init__(self, kube: ObjectGetter, versions: VersionSource | None = None) -> None:
        self._kube = kube
        self._versions = versions
        self._entries: dict[Reference, _Entry] = {}
        self._pending: dict[Reference, asyncio.Future[dict[str, Any]]] = {}
        self.fetches = 0
        self.reuses = 0

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """The object ``namespace/name`` of ``resource``; the API's errors (NotFound, Forbidden) propagate."""
        kind = _kind(resource)
        if kind is None or self._versions is None or namespace is None:
            return await self._kube.get(resource, name, namespace=namespace)
        reference = Reference(kind, namespace, name)
        watched = self._versions.resource_version(reference)
        entry = self._entries.get(reference)
        if entry is not None and reusable(entry, watched):
            self.reuses += 1
            return dict(entry.obj)
        fetched = await self._fetch(resource, reference)
        if watched is None:
            self._entries.pop(reference, None)
            return fetched
        version = str((fetched.get("metadata") or {}).get("resourceVersion") or "")
        kept = {"metadata": {"resourceVersion": version}, "data": dict(fetched.get("data") or {})}
        self._entries[reference] = _Entry(version, kept)
        self._forget_unwatched()
        return fetched

    async def _fetch(self, resource: Resource, reference: Reference) -> dict[str, Any]:
        """One GET of the object however many passes ask for it at once (after a rotation every runner's pass
        does); a caller that is cancelled does not cancel the others' GET."""
        pending = self._pending.get(reference)
        if pending is None:
            self.fetches += 1
            pending = asyncio.ensure_future(self._kube.get(resource, reference.name, namespace=reference.namespace))
            self._pending[reference] = pending
            pending.add_done_callback(lambda done: self._pending.pop(reference, None))
        return await asyncio.shield(pending)

    def _forget_unwatched(self) -> None:
        """Drop what the watch no longer knows (its scale set gone, say): a fetch is rare, the entries few."""
        versions = self._versions
        if versions is None:
            return
        for reference in [r for r in self._entries if versions.resource_version(r) is None]:
            del self._entries[reference]

    def __len__(self) -> int:
        return len(self._entries)
