"""A listener's own Secrets (its config and proxy Secrets), checked once per change, not read once per pass
(docs/controllers.md, "The objects a listener is built from"; issue 30).

Each AutoscalingListener pass brought its ``<listener>-config`` Secret (and ``<listener>-proxy``, with a proxy) in
line by reading it from the API server: about two GETs per scale set while it was set up, and one at every later
pass (a listener's state report on its runner set queues one), on the Secrets' client bucket (bench/README.md).
:class:`ListenerSecrets` remembers, for each such Secret, the ``resourceVersion`` at which it was last seen to
hold what a pass wanted, and a metadata-only watch of the controller namespace's Secrets says whether that is
still its version:

- **What is kept**: a :class:`Checked` per Secret: that version and a digest of the desired object (metadata and
  data, :func:`fingerprint`), never the Secret's data. A pass whose desired Secret has the same digest, while the
  watch shows the version kept (or the one it showed when this controller's write returned it: the watch has not
  caught up, and has seen nothing after it), writes nothing and reads nothing (:func:`still_holds`, pure). Any
  other case is a GET, as before, and the answer (read or written) is kept.
- **What is watched**: the identity and ``resourceVersion`` of every Secret of the controller namespace, where the
  listeners and their Secrets live (:func:`~arc_scaleset.kube.informer.identity_only`), on the watches' own
  request budget (:mod:`~arc_scaleset.controllers.namespace_watch`). The controller's Role there already lists
  and watches Secrets (the shared listeners' config Secrets).
- **It is a controller Source**: a change by anyone else of a Secret a pass left in line, or its deletion, queues
  that listener, so a hand edit is put back in seconds instead of at the next periodic pass; the echo of this
  controller's own write queues nothing, nor do a deleting listener's Secrets (:meth:`ListenerSecrets.forget`). A
  deleted Secret's entry goes with it.
- **Without the watch** (not started, not listed yet, refused: it gives up after one warning), every pass reads
  its Secrets from the API server, as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from arc_scaleset.api.naming import listener_config_secret_name, listener_proxy_secret_name
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.controllers.namespace_watch import NamespaceWatch
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.informer import Object, identity_only, resource_version
from arc_scaleset.kube.resources import SECRETS
from arc_scaleset.kube.views import ObjectView

_SUFFIXES = (listener_config_secret_name(""), listener_proxy_secret_name(""))
"""The name suffixes of a listener's own Secrets (``-config``, ``-proxy``)."""


def listener_of(secret_name: str) -> str | None:
    """The listener whose own Secret ``secret_name`` would be (``None``: no listener's). Pure."""
    for suffix in _SUFFIXES:
        if secret_name.endswith(suffix) and len(secret_name) > len(suffix):
            return secret_name.removesuffix(suffix)
    return None


def fingerprint(desired: Mapping[str, Any]) -> str:
    """A digest of a desired Secret (what a pass would write), so that what is kept holds none of its data."""
    return hashlib.sha256(orjson.dumps(desired, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True)
class Checked:
    """A Secret seen at ``version`` to hold the desired object of digest ``wanted``; ``watched``: the version the
    watch showed when that was seen (``None``: it did not show the Secret)."""

    version: str
    wanted: str
    watched: str | None


def still_holds(checked: Checked | None, wanted: str, watched: str | None) -> bool:
    """Whether the Secret of ``checked`` still holds the desired object of digest ``wanted`` while the watch shows
    ``watched`` (``None``: not shown, or the watch is not running). Pure."""
    if checked is None or watched is None or checked.wanted != wanted:
        return False
    return watched in (checked.version, checked.watched)


class ListenerSecrets(NamespaceWatch):
    """The listeners' own Secrets of ``namespace`` (the controller namespace): what each pass last found them
    holding, and the watch that says whether they still do (module docstring). A controller Source."""

    def __init__(self, kube: KubeClient, *, namespace: str, clock: Clock = REAL_CLOCK) -> None:
        super().__init__(kube, SECRETS, namespace=namespace, clock=clock, metadata_only=True, transform=identity_only)
        self._checked: dict[str, Checked] = {}
        self.reuses = 0
        """How many passes found a Secret still holding what they wanted, and read nothing (for tests)."""
        self.changes_queued = 0
        """How many changes or deletions of a listener's Secret by anyone else queued its listener (for tests)."""
        self.informer.add_handler(on_add=self._added, on_update=self._changed, on_delete=self._deleted)

    def version_holding(self, desired: Mapping[str, Any], wanted: str) -> str | None:
        """The resourceVersion of the Secret ``desired`` names when it still holds ``desired`` (of digest
        ``wanted``) as last seen; ``None``: it must be read."""
        view = ObjectView(desired)
        if view.namespace != self.namespace:
            return None
        checked = self._checked.get(view.name)
        if checked is None or not still_holds(checked, wanted, self.resource_version(view.name)):
            return None
        self.reuses += 1
        return checked.version

    def seen(self, stored: Mapping[str, Any], wanted: str) -> None:
        """A pass saw ``stored`` (as read, or as its write returned it) hold the desired object of digest
        ``wanted``."""
        view = ObjectView(stored)
        # Kept only while the watch runs: its delete events are what bounds what is kept.
        if view.namespace == self.namespace and view.resource_version and self.watching:
            self._checked[view.name] = Checked(view.resource_version, wanted, self.resource_version(view.name))

    def forget(self, listener: str) -> None:
        """Forget what was seen of ``listener``'s Secrets (it is being deleted): their deletion queues nothing."""
        for suffix in _SUFFIXES:
            self._checked.pop(listener + suffix, None)

    async def stop(self) -> None:
        """Stop the watch and forget what was seen: until it runs again, every pass reads its Secrets."""
        await super().stop()
        self._checked.clear()

    # Only a Secret a pass left in line queues its listener: one no pass has seen yet gets its pass anyway (every
    # listener is reconciled when the controller starts, and a new one when it is made), and a deleting
    # listener's were forgotten.

    def _added(self, obj: Object) -> None:
        self._queue_if_changed_since_seen(obj)

    def _changed(self, old: Object, new: Object) -> None:
        self._queue_if_changed_since_seen(new)

    def _deleted(self, obj: Object) -> None:
        if self._checked.pop(ObjectView(obj).name, None) is not None:
            self._queue(obj)

    def _queue_if_changed_since_seen(self, obj: Object) -> None:
        checked = self._checked.get(ObjectView(obj).name)
        if checked is not None and checked.version != resource_version(obj):  # not the echo of a version seen
            self._queue(obj)

    def _queue(self, obj: Object) -> None:
        listener = listener_of(ObjectView(obj).name)
        if listener is not None and self.enqueue(Request(self.namespace, listener)):
            self.changes_queued += 1
