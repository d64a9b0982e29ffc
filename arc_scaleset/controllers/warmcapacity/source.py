"""The warm-pool controller's own source of placeholder pods (docs/capacity.md, "Warm capacity")."""

from __future__ import annotations

from collections.abc import Callable

from arc_scaleset.api.warm_capacity import LABEL_WARM_POOL
from arc_scaleset.controllers.warmcapacity.plan import preempted
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.informer import HandlerRegistration, Informer, Object
from arc_scaleset.kube.views import ObjectView


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
