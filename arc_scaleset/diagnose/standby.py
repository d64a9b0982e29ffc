"""A scale set's standby listener as a snapshot shows it (docs/listener.md, "Standby listener"): of the two
listener pods, the active one (the holder of the pair's Lease) and the one standing by. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arc_scaleset.api.listener_standby import standby_lease_name, standby_pod_names, wants_standby
from arc_scaleset.api.naming import listener_pod_name
from arc_scaleset.kube.views import ObjectView

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class ListenerPods:
    """The listener's pod (the active one when there are two; ``None``: none found), and with a standby, the
    other pod of the pair and the Lease holder (``""``: nobody holds it, or the Lease could not be read)."""

    pod: JsonObject | None
    standby: JsonObject | None = None
    holder: str = ""


def listener_pods(
    listener: Mapping[str, Any], served: Sequence[JsonObject], leases: Sequence[JsonObject]
) -> ListenerPods:
    """Which of ``served`` (the pods that run ``listener``) is active: the first, as ARC's single pod, unless the
    listener has a standby; then the Lease holder among the pair (the pair's first pod while nobody holds it)."""
    view = ObjectView(listener)
    if not wants_standby(view.annotations):
        return ListenerPods(served[0] if served else None)
    pair = standby_pod_names(listener_pod_name(view.name))
    by_name = {ObjectView(pod).name: pod for pod in served}
    lease_name = standby_lease_name(pair[0])
    lease = next((item for item in leases if ObjectView(item).name == lease_name), None)
    holder = str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")
    active = holder if holder in pair else pair[0]
    other = pair[1] if active == pair[0] else pair[0]
    return ListenerPods(by_name.get(active), by_name.get(other), holder if holder in pair else "")
