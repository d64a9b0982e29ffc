"""The listener's watch of its one EphemeralRunnerSet (docs/listener.md, "Only what changed").

An :class:`~arc_scaleset.kube.informer.Informer` with the field selector ``metadata.name=<set>``: the listener's
Role grants ``get``, ``list`` and ``watch`` on that set alone (``resourceNames``), which the API server authorizes
for a list or watch only with exactly that selector. It gives the listener two things without a patch:

- ``status.advertisedCapacity`` (:mod:`.capacity`), which it used to learn only from the answer to its patch
  after every poll;
- what the set carries of the listener's publications (:class:`~arc_scaleset.listener.publish_plan.SetContent`),
  so an unchanged decision is skipped only while the set still carries the last one that landed.

Each object is cut down to those fields before it is stored (:func:`publication_fields`), so the watch costs the
listener a few hundred bytes, not a copy of the set's status (its recent jobs alone can be 26 KB). A Role
without the grant (written by an older controller) makes the informer give up at its first answer (Forbidden):
:meth:`SetWatch.content` then stays ``None`` and every decision is patched, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arc_scaleset.api.constants import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import ANNOTATION_LISTENER_CURSOR
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import Forbidden
from arc_scaleset.kube.informer import Informer
from arc_scaleset.listener.capacity import STATUS_FIELD, cluster_capacity
from arc_scaleset.listener.publish_plan import ABSENT, SetContent


def publication_fields(ers: dict[str, Any]) -> dict[str, Any]:
    """An informer transform: of an EphemeralRunnerSet, only its identity, ``spec.replicas``, ``spec.patchID``, the
    cursor annotation and ``status.advertisedCapacity``."""
    meta, spec, status = _fields(ers, "metadata"), _fields(ers, "spec"), _fields(ers, "status")
    annotations = _fields(meta, "annotations")
    identity = ("namespace", "name", "uid", "resourceVersion")
    kept_meta: dict[str, Any] = {key: meta[key] for key in identity if key in meta}
    if ANNOTATION_LISTENER_CURSOR in annotations:
        kept_meta["annotations"] = {ANNOTATION_LISTENER_CURSOR: annotations[ANNOTATION_LISTENER_CURSOR]}
    return {
        "metadata": kept_meta,
        "spec": {key: spec[key] for key in ("replicas", "patchID") if key in spec},
        "status": {STATUS_FIELD: status[STATUS_FIELD]} if STATUS_FIELD in status else {},
    }


def _fields(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def set_content(ers: Mapping[str, Any]) -> SetContent:
    """What ``ers`` carries of the listener's publications (``replicas`` absent or not a number reads as 0)."""
    spec = ers.get("spec") or {}
    annotations = (ers.get("metadata") or {}).get("annotations") or {}
    replicas, patch_id = spec.get("replicas"), spec.get("patchID")
    cursor = annotations.get(ANNOTATION_LISTENER_CURSOR)
    return SetContent(
        replicas=replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 0,
        patch_id=patch_id if isinstance(patch_id, int) and not isinstance(patch_id, bool) else 0,
        cursor=cursor if isinstance(cursor, str) else None,
    )


class SetWatch:
    """A watch of the EphemeralRunnerSet ``namespace``/``name``: :meth:`start` it, :meth:`stop` it once."""

    def __init__(self, kube: KubeClient, *, namespace: str, name: str, clock: Clock = REAL_CLOCK) -> None:
        self.namespace = namespace
        self.name = name
        self.informer = Informer(
            kube,
            EPHEMERAL_RUNNER_SETS,
            namespace=namespace,
            field_selector=f"metadata.name={name}",
            clock=clock,
            transform=publication_fields,
            give_up_on=(Forbidden,),
        )

    def start(self) -> None:
        self.informer.start()

    async def stop(self) -> None:
        await self.informer.stop()

    @property
    def live(self) -> bool:
        """Listed at least once and not given up (a Role without the grant)."""
        return self.informer.has_synced and self.informer.gave_up is None

    def content(self) -> SetContent | None:
        """What the set carries now (:data:`~arc_scaleset.listener.publish_plan.ABSENT` when it does not exist);
        ``None`` while the watch is not :attr:`live`."""
        if not self.live:
            return None
        ers = self.informer.store.get(self.namespace, self.name)
        return ABSENT if ers is None else set_content(ers)

    def capacity(self) -> int | None:
        """The set's ``status.advertisedCapacity`` as watched; ``None`` when it has none or the watch is not
        :attr:`live`."""
        ers = self.informer.store.get(self.namespace, self.name) if self.live else None
        return None if ers is None else cluster_capacity(ers)
