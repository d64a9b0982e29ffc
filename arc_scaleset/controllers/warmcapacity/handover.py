"""Handing a placeholder's room to a new runner before its pod exists (docs/capacity.md, "Warm capacity").

A runner pod that finds no room takes a placeholder's through kube-scheduler's preemption. With several runner
pods of a burst preempting on one node at once, the scheduler (asynchronous preemption, the default since
Kubernetes 1.32) can park a preemptor in its unschedulable pool after its victim is gone: nothing requeues it
until another pod on the node changes (kubernetes/kubernetes#141694), and its job waits for the next runner of the
burst to end (bench/README.md, "Cold nodes and warm capacity").

So the controller does not leave it to preemption alone: when the listener raises a member scale set's
EphemeralRunnerSet ``replicas`` by ``k`` (the earliest sign of new runners: before the set's controller creates
the EphemeralRunners, and well before the runner controller has registered them with GitHub and made their
pods), the pool releases ``k`` placeholders that hold room on a node (deletes them at once, zero grace period).
The room is free when the runner pods come, which then bind without preempting anything. The released
placeholders are made again under their names, kept off those nodes, and wait for the next node in the
background, exactly as preempted ones. A rise that finds runners idle (or fewer created than asked) releases a
placeholder for nothing: the pool refills it, and the next burst finds it again.

:class:`ReplicaGrowth` is the feed (a map function of EphemeralRunnerSet events: the rise of each set's
``replicas`` per pool, since the pool's last pass); :func:`to_release` picks the placeholders (pure).
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from arc_scaleset.api.keys import LABEL_SCALE_SET_NAME
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.controllers.warmcapacity.plan import placeholder_index
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.views import Object, ObjectView

SETS_REMEMBERED: Final = 10_000


def replicas_changed(old: Object, new: Object) -> bool:
    """An update predicate: the set's ``spec.replicas`` moved."""
    return EphemeralRunnerSetView(old).replicas != EphemeralRunnerSetView(new).replicas


class ReplicaGrowth:
    """The rise of member sets' ``replicas`` per pool, since the pool's last pass. ``pool_of(namespace,
    scale_set)``: the pool the scale set is a member of, or None."""

    def __init__(self, pool_of: Callable[[str, str], str | None]) -> None:
        self._pool_of = pool_of
        self._replicas: OrderedDict[str, int] = OrderedDict()
        self._waiting: dict[str, int] = defaultdict(int)

    def note(self, ers: Object) -> Iterable[Request]:
        """A :data:`~arc_scaleset.kube.controller.MapFunc`: a set seen before whose ``replicas`` rose counts the
        rise for its scale set's pool, which is queued. The first sight of a set (the informer's first list, a new
        set) only remembers its figure."""
        view = EphemeralRunnerSetView(ers)
        if not view.uid:
            return ()
        before = self._replicas.pop(view.uid, None)
        self._replicas[view.uid] = view.replicas
        if len(self._replicas) > SETS_REMEMBERED:
            self._replicas.popitem(last=False)
        scale_set = view.labels.get(LABEL_SCALE_SET_NAME)
        if before is None or view.replicas <= before or not scale_set or view.is_deleting:
            return ()
        pool = self._pool_of(view.namespace, scale_set)
        if pool is None:
            return ()
        self._waiting[pool] += view.replicas - before
        return (Request("", pool),)

    def take(self, pool: str) -> int:
        """The rise for ``pool`` since the last call (room not released now is not owed later: a refilled
        placeholder is for the next runner, not one that found room meanwhile)."""
        return self._waiting.pop(pool, 0)


def to_release(pool_id: str, pods: Sequence[Mapping[str, Any]], count: int) -> list[Mapping[str, Any]]:
    """Up to ``count`` placeholders of ``pool_id`` to release: those holding room on a node and not going, the
    highest index first (the pool shrinks from the top, so those are the first it would let go)."""
    holding = [
        pod
        for pod in pods
        if (pod.get("spec") or {}).get("nodeName")
        and not ObjectView(pod).is_deleting
        and placeholder_index(pool_id, ObjectView(pod).name) is not None
    ]
    holding.sort(key=lambda pod: placeholder_index(pool_id, ObjectView(pod).name) or 0, reverse=True)
    return holding[: max(count, 0)]
