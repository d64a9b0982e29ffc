"""One AutoscalingListener pass's scope and what the controller remembers about a listener between passes.

The shape of a pass is described once, in docs/controllers.md ("The shape of a pass"); the phases of this kind
are listed in :mod:`.reconciler`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.controllers.autoscalinglistener.restart import RestartBackoff
from arc_scaleset.controllers.autoscalinglistener.status import ListenerReport
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.informer import Object


@dataclass
class ListenerMemory:
    """What this process remembers about one listener between passes: its slot in the controller's
    :class:`~arc_scaleset.controllers.reconcile_pass.ObjectMemory`, forgotten when the listener is gone (or its
    deletion is done), and empty for a listener made again under the same name."""

    restarts: RestartBackoff
    """Its restart backoff: the failures of its pods on record."""
    predecessor_state: str | None = None
    """The state annotation its EphemeralRunnerSet carried when this process created the listener's pod: a
    predecessor's word, not the new listener's (:func:`.listener_health.reported_state`); ``None`` once the new
    listener has spoken."""
    written_status: tuple[str, list[dict[str, Any]]] | None = None
    """The conditions this process last wrote, with the resourceVersion they were derived from (the cache may
    not show the write yet)."""


@dataclass
class ListenerPass:
    """The scope of one pass over one AutoscalingListener: the only things its phases read besides the caches."""

    request: Request
    obj: Object
    """The listener as the cache has it."""
    view: AutoscalingListenerView
    listener: AutoscalingListener
    """Its parsed spec; once served, with the credentials fields of its scale set (:mod:`.ownership`)."""
    memory: ListenerMemory
    scale_set: Object | None = None
    """The live AutoscalingRunnerSet its spec names, once found."""
    report: ListenerReport | None = None
    """What the pass found, for the status; ``None`` until the pass serves the listener or refuses it: no status
    is written for a pass that ended before (deleting, a finalizer added, a scale set gone, ARC's listener)."""
    stamp: str = ""
    """The versions of the config (and proxy) Secret the pod must be made from (:mod:`.pod`)."""

    @property
    def key(self) -> str:
        """``namespace/name``, for logs and messages."""
        return str(self.request)
