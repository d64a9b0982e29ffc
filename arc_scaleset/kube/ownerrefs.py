"""Owner references: who controls an object, for garbage collection and for mapping events to owners."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def is_controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    """Whether ``owner`` (matched by uid) is the controller of ``obj``."""
    ref = ObjectView(obj).controller_owner
    uid = ObjectView(owner).uid
    return ref is not None and bool(uid) and ref.get("uid") == uid
