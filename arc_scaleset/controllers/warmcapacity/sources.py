"""What the warm-pool controller watches, and which pool each object concerns (docs/capacity.md, "Warm capacity").

A scale set maps to the pool of its runner shape (:func:`pool_of`), or to its own key when it has something to be
told without a pool (:func:`scale_set_keys`); its EphemeralRunners' creations are the job arrivals the forecast
reads (:class:`ArrivalLog`); the placeholder pods come from an informer of their own (:class:`PlaceholderSource`),
each event queuing the pod's pool.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from typing import Final

import pydantic

from arc_scaleset.api.keys import LABEL_SCALE_SET_NAME
from arc_scaleset.api.warm_capacity import LABEL_WARM_POOL, WarmCapacity
from arc_scaleset.controllers.warmcapacity.plan import preempted
from arc_scaleset.controllers.warmcapacity.shape import RunnerShape, ShapeError, runner_shape
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.informer import HandlerRegistration, Informer, Object
from arc_scaleset.kube.views import ObjectView

CONDITION_WARM_CAPACITY: Final = "WarmCapacity"
ARRIVALS_KEPT: Final = 10_000
"""Job arrivals remembered per scale set (the forecast's history), oldest dropped first."""


def warm_capacity_of(obj: Object) -> WarmCapacity | None:
    """The scale set's ``spec.warmCapacity`` (``None``: not set, or not readable: the CRD schema validates it)."""
    raw = ObjectView(obj).spec.get("warmCapacity")
    if raw is None:
        return None
    try:
        return WarmCapacity.model_validate(raw)
    except pydantic.ValidationError:
        return None


def shape_of(obj: Object) -> RunnerShape:
    """The runner shape of a scale set's template; :class:`ShapeError` when it has none."""
    return runner_shape(ObjectView(obj).spec.get("template") or {})


def pool_of(obj: Object) -> str | None:
    """The pool a scale set is a member of: only one with ``warmCapacity``, not being deleted, with a shape."""
    view = ObjectView(obj)
    if view.is_deleting or warm_capacity_of(obj) is None:
        return None
    try:
        return shape_of(obj).pool_id
    except ShapeError:
        return None


def scale_set_keys(obj: Object) -> Iterable[Request]:
    """The keys a scale set concerns: its pool, or itself when it asks for warm capacity without a shape (to say
    so) or carries a ``WarmCapacity`` condition without asking (to take it away)."""
    pool = pool_of(obj)
    if pool is not None:
        return (Request("", pool),)
    view = ObjectView(obj)
    wants = warm_capacity_of(obj) is not None and not view.is_deleting
    told = get_condition(view.status.get("conditions"), CONDITION_WARM_CAPACITY) is not None
    return (Request(view.namespace, view.name),) if wants or told else ()


class ArrivalLog:
    """When each scale set's runners were asked for (its EphemeralRunners' creation), for the forecast. In memory:
    a restarted controller forecasts from what it sees again."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], dict[str, dt.datetime]] = defaultdict(dict)
        self._order: dict[tuple[str, str], deque[str]] = defaultdict(deque)

    def record(self, runner: Object) -> Iterable[Request]:
        """Remember ``runner``'s creation (once per UID); a :data:`~arc_scaleset.kube.controller.MapFunc` that
        queues nothing (pools that forecast are looked at every minute)."""
        view = ObjectView(runner)
        scale_set = view.labels.get(LABEL_SCALE_SET_NAME)
        created = view.creation_timestamp
        if not scale_set or created is None or not view.uid:
            return ()
        key = (view.namespace, scale_set)
        seen = self._seen[key]
        if view.uid not in seen:
            seen[view.uid] = created
            self._order[key].append(view.uid)
            if len(self._order[key]) > ARRIVALS_KEPT:
                seen.pop(self._order[key].popleft(), None)
        return ()

    def arrivals(self, namespace: str, name: str) -> list[dt.datetime]:
        return sorted(self._seen.get((namespace, name), {}).values())


class PlaceholderSource:
    """The placeholder pods' informer (controller namespace, selected by the pool label) as a controller
    :class:`~arc_scaleset.kube.controller.Source`: each event queues the pod's pool; a pod the scheduler preempted
    is handed to ``on_preempted`` once, as it goes."""

    def __init__(self, informer: Informer, on_preempted: Callable[[str, Object], None]) -> None:
        self.informer = informer
        self._on_preempted = on_preempted
        self._registration: HandlerRegistration | None = None

    def start(self, enqueue: Callable[[Request], None]) -> None:
        def queue(pod: Object) -> None:
            pool = ObjectView(pod).labels.get(LABEL_WARM_POOL)
            if pool:
                enqueue(Request("", pool))

        def update(old: Object, new: Object) -> None:
            if preempted(new) and not preempted(old):
                self._preempted(new)
            queue(new)

        def delete(pod: Object) -> None:
            # With a zero grace period the pod may go before any update shows the condition: the last state does.
            self._preempted(pod)
            queue(pod)

        self._registration = self.informer.add_handler(on_add=queue, on_update=update, on_delete=delete)
        self.informer.start()

    def _preempted(self, pod: Object) -> None:
        pool = ObjectView(pod).labels.get(LABEL_WARM_POOL)
        if pool and preempted(pod):
            self._on_preempted(pool, pod)

    async def stop(self) -> None:
        if self._registration is not None:
            self._registration.remove()
        await self.informer.stop()
