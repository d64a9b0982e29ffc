"""What the AutoscalingRunnerSet learns from its listener, as pure functions (docs/controllers.md).

- :func:`scale_set_gone_report`: the listener reported that GitHub no longer knows the scale set (it stopped
  with ``lastErrorClass`` :data:`~arc_scaleset.api.listener_state.SCALE_SET_NOT_FOUND`, on the EphemeralRunnerSet
  this controller owns and so watches). The scale set is then verified, and registered again, at once rather
  than at the next periodic verification (issue 15: jobs waited up to 5 minutes).
- :func:`listener_problems`: the AutoscalingListener's ``Ready`` and ``Degraded`` conditions, as the scale set's
  own: a scale set whose listener holds no session, fails its polls or keeps crashing is not ``Ready``, and it is
  ``Degraded`` during the listener's outages (the listener's reason, with the listener named in the message).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

from arc_scaleset.api.keys import ANNOTATION_LISTENER_STATE
from arc_scaleset.api.listener_state import SCALE_SET_NOT_FOUND, ListenerState
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.views import ObjectView, integer

LISTENER_READY = "Ready"
LISTENER_DEGRADED = "Degraded"
REASON_NOT_REPORTED = "ListenerNotReported"
"""The scale set's ``Ready`` reason while its listener carries no ``Ready`` condition yet."""


def scale_set_gone_report(runner_sets: Iterable[Mapping[str, Any]], scale_set_id: int) -> ListenerState | None:
    """The latest listener report, on any of the scale set's EphemeralRunnerSets, that scale set ``scale_set_id``
    does not exist on GitHub; ``None`` when there is none (a report about an earlier ID does not count: that
    scale set was registered again already)."""
    found: ListenerState | None = None
    for runner_set in runner_sets:
        state = ListenerState.from_annotation(ObjectView(runner_set).annotation(ANNOTATION_LISTENER_STATE))
        if state is None or state.scale_set_id != scale_set_id or state.last_error_class != SCALE_SET_NOT_FOUND:
            continue
        if found is None or state.since > found.since:
            found = state
    return found


def listener_problems(
    listener: Mapping[str, Any] | None,
) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
    """``(not ready, degraded)``: (reason, message) of the listener's ``Ready`` condition when it is not ``True``
    and of its ``Degraded`` condition when it is ``True``; ``None`` for each that does not hold.

    A ``Ready`` condition that is missing (a listener just created, or made by ARC, which writes no listener
    status) or that speaks of an earlier generation of the listener's spec (its controller has not acted on the
    change yet) counts as not ready (:data:`REASON_NOT_REPORTED`): saying ``Ready`` then would be a guess that
    the controller's next pass may take back (``PodPending``, ``Recreating``).
    """
    if listener is None:
        return None, None
    view = AutoscalingListenerView(listener)
    where = f"listener {view.namespace}/{view.name}"
    ready = get_condition(view.conditions, LISTENER_READY)
    degraded = get_condition(view.conditions, LISTENER_DEGRADED)
    not_ready: tuple[str, str] | None = None
    if ready is None:
        not_ready = (REASON_NOT_REPORTED, f"{where}: its controller has not reported on it yet")
    elif _reported_generation(ready) < view.generation:
        not_ready = (
            REASON_NOT_REPORTED,
            f"{where}: its controller has not reported on generation {view.generation} of its spec yet",
        )
    elif ready.get("status") != "True":
        not_ready = (str(ready.get("reason") or "ListenerNotReady"), f"{where}: {ready.get('message') or 'not ready'}")
    failing = (
        (str(degraded.get("reason") or "ListenerDegraded"), f"{where}: {degraded.get('message') or 'degraded'}")
        if degraded is not None and degraded.get("status") == "True"
        else None
    )
    return not_ready, failing


def _reported_generation(condition: Mapping[str, Any]) -> int:
    """The condition's ``observedGeneration``; a condition without one (written by an older controller) is taken
    as current."""
    return integer(condition["observedGeneration"]) if "observedGeneration" in condition else sys.maxsize
