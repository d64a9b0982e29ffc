"""One informer of one namespace's objects of one kind, run as a controller Source (the watches of the controller
namespace that queue keys when something there changes: the shared listeners' config Secrets, the listeners' own
Secrets, the standby Leases).

Its list and watch requests go on a budget of their own, as the referenced objects'
(:data:`~arc_scaleset.controllers.referenced_objects.WATCH_QPS`), so that a relist never queues ahead of the
reconcilers. A watch the API server refuses (Forbidden, Unauthorized) gives up after one warning and is tried
again later by the informer; until then it shows nothing, and its users fall back on reading.
"""

from __future__ import annotations

from collections.abc import Callable

from arc_scaleset.clock import Clock
from arc_scaleset.controllers.referenced_objects import WATCH_BURST, WATCH_QPS
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.errors import Forbidden, Unauthorized
from arc_scaleset.kube.informer import Informer, Transform, resource_version
from arc_scaleset.kube.resources import Resource


class NamespaceWatch:
    """The watch of ``resource`` in ``namespace`` (optionally by ``label_selector``): a controller Source whose
    handlers call :meth:`enqueue` (a no-op while it is stopped)."""

    def __init__(
        self,
        kube: KubeClient,
        resource: Resource,
        *,
        namespace: str,
        clock: Clock,
        label_selector: str | None = None,
        metadata_only: bool = False,
        transform: Transform | None = None,
    ) -> None:
        self.namespace = namespace
        self.informer = Informer(
            kube.with_rate_limit(WATCH_QPS, WATCH_BURST),
            resource,
            namespace=namespace,
            label_selector=label_selector,
            clock=clock,
            metadata_only=metadata_only,
            transform=transform,
            give_up_on=(Forbidden, Unauthorized),
        )
        self._enqueue: Callable[[Request], None] | None = None

    def start(self, enqueue: Callable[[Request], None]) -> None:
        """Start the watch (inside the running loop); ``enqueue`` queues a key of the controller."""
        self._enqueue = enqueue
        self.informer.start()

    async def stop(self) -> None:
        """Stop the watch."""
        self._enqueue = None
        await self.informer.stop()

    @property
    def watching(self) -> bool:
        """Whether the watch runs and has listed (one that gave up is not running)."""
        return self.informer.running and self.informer.has_synced

    def resource_version(self, name: str) -> str | None:
        """The object's ``resourceVersion`` as watched now (``None``: not shown, or not :attr:`watching`)."""
        obj = self.informer.store.get(self.namespace, name) if self.watching else None
        return None if obj is None else (resource_version(obj) or None)

    def enqueue(self, request: Request) -> bool:
        """Queue ``request`` with the controller; False while the watch is stopped."""
        enqueue = self._enqueue
        if enqueue is None:
            return False
        enqueue(request)
        return True
