"""The listener pod's lifecycle as a pure plan: what one pass does about the pod (docs/controllers.md, step 6).

:func:`plan_pod` reads the live pod (``None``: there is none), the desired one, the listener's restart backoff
and the failure the live pod shows, and returns one :class:`PodStep`; the reconciler executes it. In order:

1. a live pod that is not this listener's (:func:`.ownership.foreign_reason`) -> ``IN_THE_WAY``: never
   deleted, recreated or merged into (it may be anybody's pod of that name);
2. no pod: ``WAIT_BACKOFF`` while the restart backoff runs, else ``CREATE``;
3. a failed, evicted, disrupted or node-lost pod (:func:`.restart.listener_pod_failure`) -> ``REPLACE_FAILED``:
   count the failure, delete the pod, recreate it after the backoff (ARC #4656, #4331, #4469);
4. a pod being deleted -> ``WAIT_TERMINATING`` (by a previous pass, or by someone else);
5. a pod the desired one differs from in a way that needs a new pod (:func:`.pod.recreation_reason`) ->
   ``RECREATE``;
6. otherwise ``KEEP``: its labels and annotations merged, ``Ready`` from what the listener reports.

Pure: it imports nothing that talks to the API server.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.controllers.autoscalinglistener.ownership import foreign_reason
from arc_scaleset.controllers.autoscalinglistener.pod import recreation_reason
from arc_scaleset.controllers.autoscalinglistener.restart import BackoffState, PodFailure, listener_running
from arc_scaleset.controllers.autoscalinglistener.status import (
    PodReadiness,
    backoff_readiness,
    created_readiness,
    pending_readiness,
    recreating_readiness,
)
from arc_scaleset.kube.views import ObjectView

DELETION_REQUEUE_SECONDS: Final = 1.0
"""How soon to look again at a pod (or a child) being deleted."""


class PodAction(enum.StrEnum):
    IN_THE_WAY = "InTheWay"
    WAIT_BACKOFF = "WaitBackoff"
    CREATE = "Create"
    REPLACE_FAILED = "ReplaceFailed"
    WAIT_TERMINATING = "WaitTerminating"
    RECREATE = "Recreate"
    KEEP = "Keep"
    WAIT_PEER = "WaitPeer"
    """A running pod of a standby pair that must be recreated waits while its peer does not run (:mod:`.standby`)."""


@dataclass(frozen=True)
class PodStep:
    """One step of the pod: its action and what the reconciler needs to execute it."""

    action: PodAction
    readiness: PodReadiness | None = None
    """``Ready`` as this step leaves it; ``None`` where the executor derives it (``REPLACE_FAILED``: from the
    backoff once the failure is counted; ``KEEP`` of a running container: from what the listener reports)."""
    requeue_after: float | None = None
    """Seconds to wait before the next pass (``WAIT_BACKOFF``, ``WAIT_TERMINATING``)."""
    why: str = ""
    """``IN_THE_WAY``: whose the pod is; ``RECREATE``: why it is replaced."""
    failure: PodFailure | None = None
    """``REPLACE_FAILED``: what ended the pod."""
    running: bool = False
    """``KEEP``: the listener container runs (``WAIT_PEER``: always)."""


def plan_pod(
    live: Mapping[str, Any] | None,
    desired: Mapping[str, Any],
    *,
    owner: Mapping[str, Any],
    failure: PodFailure | None,
    restarts: BackoffState | None,
    counted: bool,
) -> PodStep:
    """The one step to take about the listener pod.

    ``owner`` is the listener object; ``failure``: what :func:`.restart.listener_pod_failure` says of ``live``;
    ``restarts``: the listener's restart backoff now (``None``: no failure on record); ``counted``: the failure
    of ``live`` is on record already (a previous pass deleted it).
    """
    name = ObjectView(desired).name
    if live is None:
        if restarts is not None and restarts.remaining > 0:
            return PodStep(
                PodAction.WAIT_BACKOFF, readiness=backoff_readiness(restarts), requeue_after=restarts.remaining
            )
        return PodStep(PodAction.CREATE, readiness=created_readiness(name))
    foreign = foreign_reason("Pod", live, owner)
    if foreign is not None:
        return PodStep(PodAction.IN_THE_WAY, why=foreign)
    if failure is not None:
        return PodStep(PodAction.REPLACE_FAILED, failure=failure)
    if ObjectView(live).is_deleting:
        # A failure counted without a backoff (a healthy run, restart.py) is replaced once the pod is gone.
        readiness = (
            backoff_readiness(restarts)
            if counted and restarts is not None
            else recreating_readiness(name, "waiting for the old pod to terminate")
        )
        return PodStep(PodAction.WAIT_TERMINATING, readiness=readiness, requeue_after=DELETION_REQUEUE_SECONDS)
    reason = recreation_reason(live, desired)
    if reason is not None:
        return PodStep(PodAction.RECREATE, readiness=recreating_readiness(name, reason), why=reason)
    running = listener_running(live)
    return PodStep(PodAction.KEEP, readiness=None if running else pending_readiness(live), running=running)
