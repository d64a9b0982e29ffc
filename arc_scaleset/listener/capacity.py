"""What the listener tells the Actions service its scale set can take: ``X-ScaleSetMaxCapacity`` (docs/capacity.md).

ARC sends ``maxRunners`` with every poll, whatever the cluster can run, so the service assigns jobs a full
quota or a capped node pool will never run (ARC #3953). Here the controller works out what the cluster can
give the set now and publishes it as the EphemeralRunnerSet's ``status.advertisedCapacity``
(:mod:`arc_scaleset.controllers.ephemeralrunnerset.capacity`); the listener reads it from its watch of the set
(:mod:`.set_watch`), else from the set its own patches return, and advertises:

1. ``maxRunners`` while the set carries no figure (a controller that does not publish one, or has not yet);
2. otherwise the smaller of ``maxRunners`` and the figure.

The service then offers the set no more jobs than that, counting those it already has and has not finished.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

STATUS_FIELD: Final = "advertisedCapacity"


def cluster_capacity(ers: Mapping[str, Any]) -> int | None:
    """The capacity the controller published on ``ers`` (an EphemeralRunnerSet); ``None`` when it has none."""
    value = (ers.get("status") or {}).get(STATUS_FIELD)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def advertised_capacity(max_runners: int, cluster: int | None) -> int:
    """``X-ScaleSetMaxCapacity`` for a set of ``max_runners`` whose cluster can give it ``cluster`` runners."""
    return max_runners if cluster is None else min(max_runners, cluster)
