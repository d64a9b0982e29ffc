"""One AutoscalingListener pass's scope and what the controller remembers about a listener between passes.

The shape of a pass is described once, in docs/controllers.md ("The shape of a pass"); the phases of this kind
are listed in :mod:`.reconciler`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.controllers.autoscalinglistener.restart import BackoffState, RestartBackoff
from arc_scaleset.controllers.autoscalinglistener.standby import StandbyPair
from arc_scaleset.controllers.autoscalinglistener.status import ListenerReport
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.informer import Object


@dataclass
class ListenerMemory:
    """What this process remembers about one listener between passes: its slot in the controller's
    :class:`~arc_scaleset.controllers.reconcile_pass.ObjectMemory`, forgotten when the listener is gone (or its
    deletion is done), and empty for a listener made again under the same name."""

    restarts: RestartBackoff
    """Its restart backoff: the failures of its pod on record (with a standby, of the first pod of the pair)."""
    standby_restarts: RestartBackoff | None = None
    """With a standby, the second pod's restart backoff: each pod of the pair is replaced on its own terms, so a
    crash-looping peer never holds back the replacement of the other (made at the first standby pass)."""
    predecessor_state: str | None = None
    """The state annotation its EphemeralRunnerSet carried when this process created the listener's pod: a
    predecessor's word, not the new listener's (:func:`.listener_health.reported_state`); ``None`` once the new
    listener has spoken."""
    written_status: tuple[str, list[dict[str, Any]]] | None = None
    """The conditions this process last wrote, with the resourceVersion they were derived from (the cache may
    not show the write yet)."""

    def pod_restarts(self, *, second: bool) -> RestartBackoff:
        """The restart backoff of the listener's pod (``second``: of the standby pair's second pod)."""
        if not second:
            return self.restarts
        if self.standby_restarts is None:
            self.standby_restarts = RestartBackoff(base=self.restarts.base, cap=self.restarts.cap)
        return self.standby_restarts

    def restart_state(self, *, now: float) -> BackoffState | None:
        """The backoff the status reports: the pod's, or with a standby the pod's of the pair with more failures
        in a row (``None``: no failure on record)."""
        states = [backoff.state(now=now) for backoff in (self.restarts, self.standby_restarts) if backoff]
        on_record = [state for state in states if state is not None]
        return max(on_record, key=lambda state: state.failures, default=None)


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
    standby: StandbyPair | None = None
    """The listener's standby pair, once its Lease and Role are in line (``None``: one pod, as ARC's)."""

    @property
    def key(self) -> str:
        """``namespace/name``, for logs and messages."""
        return str(self.request)
