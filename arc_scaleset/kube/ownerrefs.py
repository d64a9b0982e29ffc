"""Owner references: who controls an object, for garbage collection and for mapping events to owners."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def controller_ref(owner: Mapping[str, Any]) -> dict[str, Any]:
    """An ``ownerReferences`` entry that makes ``owner`` the controller of a child.

    ``owner`` must carry ``apiVersion``, ``kind``, ``metadata.name`` and ``metadata.uid`` (an object read
    from the API does). ``blockOwnerDeletion`` makes foreground deletion of the owner wait for the child.
    """
    meta = owner.get("metadata") or {}
    missing = [
        field
        for field, value in (
            ("apiVersion", owner.get("apiVersion")),
            ("kind", owner.get("kind")),
            ("metadata.name", meta.get("name")),
            ("metadata.uid", meta.get("uid")),
        )
        if not value
    ]
    if missing:
        raise ValueError(f"cannot reference an owner without {', '.join(missing)}")
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_of(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The owner reference with ``controller: true`` on ``obj``, or ``None``."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return dict(ref)
    return None


def is_controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    """Whether ``owner`` (matched by uid) is the controller of ``obj``."""
    ref = controller_of(obj)
    uid = (owner.get("metadata") or {}).get("uid")
    return ref is not None and bool(uid) and ref.get("uid") == uid
