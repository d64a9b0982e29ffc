"""Owner references: who controls an object, for garbage collection and for mapping events to owners.

The ownership rule (docs/controllers.md, "Tenancy"): an object belongs to an owner only when its controller
owner reference names that owner's API group, kind, name and UID, and the object is in the owner's namespace
(owner references cannot cross namespaces; the garbage collector treats one that does as pointing at nothing).
A UID alone is not enough: anyone who can create an object in their own namespace can write any UID into an
owner reference, and an apiVersion the garbage collector cannot resolve keeps such an object alive. So the
informer's owner-UID index (:meth:`arc_scaleset.kube.informer.Store.by_owner`) only narrows the search; every
caller that acts on what it finds filters it with :func:`controlled_by` (or asks :func:`is_controlled_by`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from arc_scaleset.kube.views import ObjectView


def controller_ref(owner: Mapping[str, Any]) -> dict[str, Any]:
    """An ``ownerReferences`` entry that makes ``owner`` the controller of a child.

    ``owner`` must carry ``apiVersion``, ``kind``, ``metadata.name`` and ``metadata.uid`` (an object read
    from the API does). ``blockOwnerDeletion`` makes foreground deletion of the owner wait for the child.
    """
    view = ObjectView(owner)
    missing = [
        field
        for field, value in (
            ("apiVersion", view.api_version),
            ("kind", view.kind),
            ("metadata.name", view.name),
            ("metadata.uid", view.uid),
        )
        if not value
    ]
    if missing:
        raise ValueError(f"cannot reference an owner without {', '.join(missing)}")
    return {
        "apiVersion": view.api_version,
        "kind": view.kind,
        "name": view.name,
        "uid": view.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_of(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The owner reference with ``controller: true`` on ``obj`` (a copy), or ``None``."""
    ref = ObjectView(obj).controller_owner
    return None if ref is None else dict(ref)


@dataclass(frozen=True)
class Owner:
    """A namespaced owner as an owner reference names it: namespace, API group (no version), kind, name, UID.

    The version is left out on purpose, as controller-runtime does: an owner reference written under another
    served version of the owner's group names the same object.
    """

    namespace: str
    group: str
    kind: str
    name: str
    uid: str

    @classmethod
    def of(cls, owner: Mapping[str, Any]) -> Owner:
        """The identity of ``owner``, an object as read from the API (``apiVersion``, ``kind``, name, UID)."""
        view = ObjectView(owner)
        return cls(view.namespace, _group(view.api_version), view.kind, view.name, view.uid)

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def claimed_owner(obj: Mapping[str, Any]) -> Owner | None:
    """The owner ``obj``'s controller owner reference names, in ``obj``'s namespace (``None``: no controller
    reference, or one without a kind, name or UID)."""
    ref = ObjectView(obj).controller_owner
    if ref is None:
        return None
    kind, name, uid = (ref.get(key) for key in ("kind", "name", "uid"))
    if not (isinstance(kind, str) and isinstance(name, str) and isinstance(uid, str) and kind and name and uid):
        return None
    return Owner(ObjectView(obj).namespace, _group(str(ref.get("apiVersion", ""))), kind, name, uid)


def is_controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any] | Owner) -> bool:
    """Whether ``owner`` is the controller of ``obj``: the ownership rule of the module docstring."""
    wanted = owner if isinstance(owner, Owner) else Owner.of(owner)
    return bool(wanted.uid) and claimed_owner(obj) == wanted


class OwnerIndex(Protocol):
    """A cache that finds objects by the UID of their controller owner reference (the manager's caches)."""

    def by_owner(self, uid: str) -> list[Any]: ...


_T = TypeVar("_T", bound=Mapping[str, Any])


def controlled_by(candidates: Iterable[_T], owner: Owner) -> list[_T]:
    """Those of ``candidates`` that ``owner`` controls (:func:`is_controlled_by`), in their order."""
    return [obj for obj in candidates if is_controlled_by(obj, owner)]


def children_of(cache: OwnerIndex, owner: Owner) -> list[Mapping[str, Any]]:
    """The objects in ``cache`` that ``owner`` controls: the UID index narrows, the ownership rule decides."""
    return controlled_by(cache.by_owner(owner.uid), owner) if owner.uid else []


def _group(api_version: str) -> str:
    """The group of an ``apiVersion`` (``""`` for the core group's ``v1``)."""
    return api_version.rpartition("/")[0]
