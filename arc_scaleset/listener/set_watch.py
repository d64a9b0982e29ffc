"""The listener's watch of its one EphemeralRunnerSet (docs/listener.md, "Only what changed").

A list and watch with the field selector ``metadata.name=<set>``: the listener's Role grants ``get``, ``list`` and
``watch`` on that set alone (``resourceNames``), which the API server authorizes for a list or watch only with
exactly that selector. It gives the listener two things without a patch:

- ``status.advertisedCapacity`` (:mod:`.capacity`), which it used to learn only from the answer to its patch
  after every poll;
- what the set carries of the listener's publications (:class:`~arc_scaleset.listener.publish_plan.SetContent`),
  so an unchanged decision is skipped only while the set still carries the last one that landed.

Each object is cut down to those fields before it is stored (:func:`publication_fields`), so the watch costs the
listener a few hundred bytes, not a copy of the set's status (its recent jobs alone can be 26 KB). A Role
without the grant (written by an older controller) ends the watch at its first answer (Forbidden):
:meth:`SetWatch.content` then stays ``None`` and every decision is patched, as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from arc_scaleset.api.constants import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import ANNOTATION_LISTENER_CURSOR
from arc_scaleset.backoff import Backoff
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import Forbidden, Gone
from arc_scaleset.listener.capacity import STATUS_FIELD, cluster_capacity
from arc_scaleset.listener.publish_plan import ABSENT, SetContent
from arc_scaleset.tasks import cancel_and_wait

log = logging.getLogger(__name__)


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
    """A watch of the EphemeralRunnerSet ``namespace``/``name``: :meth:`start` it, :meth:`stop` it once.

    List, then watch from the list's ``resourceVersion``, keeping the one object cut down
    (:func:`publication_fields`); a watch that ends resumes from the last version seen (bookmarks keep it fresh), a
    version the server forgot (410 Gone) is listed again, other failures are retried with backoff. Not an
    :class:`~arc_scaleset.kube.informer.Informer`: one object needs no store, indexes or handlers, and a listener of
    one scale set does not load that module (its memory is measured, issue 20). Forbidden (a Role without the
    grant) ends it for good: :attr:`refused`.
    """

    def __init__(
        self, kube: KubeClient, *, namespace: str, name: str, clock: Clock = REAL_CLOCK, backoff: Backoff | None = None
    ) -> None:
        self.namespace = namespace
        self.name = name
        self._kube = kube
        self._clock = clock
        self._selector = f"metadata.name={name}"
        # As an informer's: 0.8 s doubling to 30 s, jittered so that many listeners do not retry together.
        self._backoff = backoff or Backoff(base=0.8, cap=30.0, jitter=0.5)
        self._listed = False
        self._current: dict[str, Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self.refused: Forbidden | None = None
        """The refusal that ended the watch (the Role does not grant it), else ``None``."""

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run(), name=f"watch of {self.namespace}/{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def run(self) -> None:
        """List, then watch, until cancelled or refused (see the class docstring)."""
        version = ""
        while True:
            try:
                if not version:
                    version = await self._list()
                version, progressed = await self._follow(version)
                if not progressed:  # ended without even a bookmark: not normal, do not reconnect in a tight loop
                    await self._clock.sleep(self._backoff.next_delay())
            except asyncio.CancelledError:
                raise
            except Forbidden as exc:
                log.warning(
                    "the listener's Role does not grant watching its EphemeralRunnerSet; every decision is patched",
                    extra={"ephemeral_runner_set": self.name},
                )
                self.refused, self._listed = exc, False
                return
            except Gone:
                version = ""
            except Exception as exc:  # the watch must outlive any failure; until it is back, decisions are patched
                delay = self._backoff.next_delay()
                error = str(exc) or type(exc).__name__
                log.warning(
                    "watching the EphemeralRunnerSet failed; retrying",
                    extra={"error": error, "retry_in_s": round(delay, 1)},
                )
                await self._clock.sleep(delay)

    async def _list(self) -> str:
        listed = await self._kube.list(
            EPHEMERAL_RUNNER_SETS, namespace=self.namespace, field_selector=self._selector, limit=None
        )
        self._current = publication_fields(listed.items[0]) if listed.items else None
        self._listed = True
        return listed.resource_version

    async def _follow(self, version: str) -> tuple[str, bool]:
        """Apply the watch's events from ``version``; the last version seen, and whether any event came."""
        progressed = False
        stream = self._kube.watch(
            EPHEMERAL_RUNNER_SETS, namespace=self.namespace, resource_version=version, field_selector=self._selector
        )
        async for event in stream:
            if not progressed:
                progressed = True
                self._backoff.reset()
            version = str(_fields(event.object, "metadata").get("resourceVersion") or version)
            if event.type in ("ADDED", "MODIFIED"):
                self._current = publication_fields(event.object)
            elif event.type == "DELETED":
                self._current = None
        return version, progressed

    @property
    def live(self) -> bool:
        """Listed at least once and not refused."""
        return self._listed and self.refused is None

    def content(self) -> SetContent | None:
        """What the set carries now (:data:`~arc_scaleset.listener.publish_plan.ABSENT` when it does not exist);
        ``None`` while the watch is not :attr:`live`."""
        if not self.live:
            return None
        return ABSENT if self._current is None else set_content(self._current)

    def capacity(self) -> int | None:
        """The set's ``status.advertisedCapacity`` as watched; ``None`` when it has none or the watch is not
        :attr:`live`."""
        return cluster_capacity(self._current) if self.live and self._current is not None else None
