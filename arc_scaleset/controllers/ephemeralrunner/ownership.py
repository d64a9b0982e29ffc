"""Whether a pod or Secret under a runner's name is the runner's own, as pure functions (docs/controllers.md).

An EphemeralRunner's pod and JIT Secret carry its name, which anyone who may create pods or Secrets in the
namespace can take first (or take over after ours is gone). The controller reads, interprets and deletes only
objects its runner controls: a controller owner reference naming the EphemeralRunner's group, kind, name and
UID (:func:`arc_scaleset.kube.ownerrefs.is_controlled_by`). Any other object under the name is *in the way*: it
is never deleted, and neither its state (a pod's phase or exit code) nor its data (a Secret's runner ID) is
taken as the runner's. The check is made on the object already in hand (the pod cache, a read, a create's
answer), never with an extra read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arc_scaleset.kube.ownerrefs import is_controlled_by


def own_or_in_the_way(
    obj: Mapping[str, Any] | None, runner: Mapping[str, Any]
) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """``(obj, None)`` when ``runner`` controls ``obj`` (or there is none), ``(None, obj)`` when it is in the way."""
    if obj is None or is_controlled_by(obj, runner):
        return obj, None
    return None, obj
