"""Learning within seconds that a Secret or ConfigMap a scale set's listener is built from has changed.

A listener's ``config.json`` carries the scale set's GitHub credentials (``githubConfigSecret``), its CA
(``githubServerTLS``'s ConfigMap) and the credentials of its proxy (``proxy.*.credentialSecretRef``), all read
from the scale set's namespace. Without a watch, a rotated credential reached the listener only at the next
periodic pass (5 minutes; issue 15, item 8). :class:`ReferencedObjectWatch` watches exactly the objects some
listener references and queues those listeners when one of them changes:

- **What is watched**: each referenced object on its own, with a ``metadata.name`` field selector in its
  namespace, and only its metadata (``PartialObjectMetadata``): no Secret's data is ever received or cached,
  and of the metadata only the identity and ``resourceVersion`` are kept
  (:func:`~arc_scaleset.kube.informer.identity_only`), since annotations may hold data too. Objects shared by
  several scale sets are watched once. An object no listener references any more stops being watched.
- **RBAC**: ``list`` and ``watch`` on those Secrets and ConfigMaps in the scale set's namespace; the API
  server authorises a name-selected list or watch against ``resourceNames``, so a Role can grant exactly these
  objects (the scale-set chart's Role does). Without the grant the watch of that object gives up after one
  warning and is tried again after ``retry_after`` seconds; the listener still gets the change at its
  periodic pass.
- **What queues a listener**: a change of the object's ``resourceVersion``, its deletion, or its creation after
  the watch started (a missing Secret being created). The initial list queues nothing: the listener is
  reconciled when it starts tracking anyway.

It is a controller :class:`~arc_scaleset.kube.controller.Source`: the AutoscalingListener controller starts it
(only while leading) and stops it; the reconciler says what each listener references with :meth:`track` and
forgets a listener with :meth:`forget`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final, Literal

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.errors import Forbidden, NotFound, Unauthorized
from arc_scaleset.kube.informer import HandlerRegistration, Informer, Object, identity_only, resource_version
from arc_scaleset.kube.resources import CONFIG_MAPS, SECRETS, Resource

log = logging.getLogger(__name__)

Kind = Literal["Secret", "ConfigMap"]
DEFAULT_RETRY_AFTER: Final = 300.0


@dataclass(frozen=True, order=True)
class Reference:
    """A Secret or ConfigMap a listener's config is built from."""

    kind: Kind
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def listener_references(listener: AutoscalingListener) -> frozenset[Reference]:
    """The objects the listener's config is built from, all in the scale set's namespace (pure).

    ``githubConfigSecret`` counts unless a vault holds the credentials (then it names a vault secret).
    """
    spec = listener.spec
    namespace = spec.autoscaling_runner_set_namespace
    if not namespace:
        return frozenset()
    found: set[Reference] = set()
    vault = spec.vault_config
    if spec.github_config_secret and (vault is None or not vault.type):
        found.add(Reference("Secret", namespace, spec.github_config_secret))
    if spec.proxy is not None:
        for server in (spec.proxy.http, spec.proxy.https):
            if server is not None and server.credential_secret_ref:
                found.add(Reference("Secret", namespace, server.credential_secret_ref))
    tls = spec.github_server_tls
    source = tls.certificate_from.config_map_key_ref if tls is not None and tls.certificate_from else None
    if source is not None and source.name:
        found.add(Reference("ConfigMap", namespace, source.name))
    return frozenset(found)


def _resource(kind: Kind) -> Resource:
    return SECRETS if kind == "Secret" else CONFIG_MAPS


@dataclass(eq=False)
class _Watched:
    """One watched object: its informer and the listeners that reference it."""

    informer: Informer
    registration: HandlerRegistration
    listeners: set[Request] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    retry: asyncio.TimerHandle | None = None


class ReferencedObjectWatch:
    """Watches the objects listeners reference; queues the listeners of one that changed (module docstring).

    ``kube`` needs ``list``/``watch`` on the referenced objects; ``retry_after`` is how long a watch that was
    refused (403, 401) waits before it is tried again.
    """

    def __init__(
        self, kube: KubeClient, *, clock: Clock = REAL_CLOCK, retry_after: float = DEFAULT_RETRY_AFTER
    ) -> None:
        self._kube = kube
        self._clock = clock
        self._retry_after = retry_after
        self._enqueue: Callable[[Request], None] | None = None
        self._tracked: dict[Request, frozenset[Reference]] = {}
        self._watched: dict[Reference, _Watched] = {}

    # -- the reconciler's side ----------------------------------------------------------------------

    def track(self, listener: Request, references: Iterable[Reference]) -> None:
        """``listener`` is built from ``references`` (replacing what it was built from before)."""
        wanted = frozenset(references)
        before = self._tracked.get(listener, frozenset())
        if wanted == before:
            return
        self._tracked[listener] = wanted
        for reference in before - wanted:
            self._release(reference, listener)
        for reference in wanted - before:
            self._acquire(reference, listener)

    def forget(self, listener: Request) -> None:
        """``listener`` is gone: it references nothing any more."""
        for reference in self._tracked.pop(listener, frozenset()):
            self._release(reference, listener)

    @property
    def watched(self) -> frozenset[Reference]:
        """The objects watched now."""
        return frozenset(self._watched)

    # -- Source -------------------------------------------------------------------------------------

    def start(self, enqueue: Callable[[Request], None]) -> None:
        """Start watching what is tracked (inside the running loop); ``enqueue`` queues a listener."""
        self._enqueue = enqueue
        for watched in self._watched.values():
            self._run(watched)

    async def stop(self) -> None:
        """Stop every watch; what is tracked is kept (a later :meth:`start` watches it again)."""
        self._enqueue = None
        for watched in list(self._watched.values()):
            await self._halt(watched)

    # -- internals ----------------------------------------------------------------------------------

    def _acquire(self, reference: Reference, listener: Request) -> None:
        watched = self._watched.get(reference)
        if watched is None:
            informer = Informer(
                self._kube,
                _resource(reference.kind),
                namespace=reference.namespace,
                field_selector=f"metadata.name={reference.name}",
                clock=self._clock,
                metadata_only=True,
                transform=identity_only,
                give_up_on=(Forbidden, Unauthorized, NotFound),
            )
            registration = informer.add_handler(
                on_add=functools.partial(self._created, reference),
                on_update=functools.partial(self._updated, reference),
                on_delete=functools.partial(self._deleted, reference),
            )
            watched = self._watched[reference] = _Watched(informer, registration)
            if self._enqueue is not None:
                self._run(watched)
        watched.listeners.add(listener)

    def _release(self, reference: Reference, listener: Request) -> None:
        watched = self._watched.get(reference)
        if watched is None:
            return
        watched.listeners.discard(listener)
        if not watched.listeners:
            del self._watched[reference]
            watched.registration.remove()
            if watched.retry is not None:
                watched.retry.cancel()
            if watched.task is not None:
                watched.task.cancel()  # not awaited: it ends at its next await, and nothing waits for it

    def _run(self, watched: _Watched) -> None:
        if watched.task is not None and not watched.task.done():
            return
        watched.task = asyncio.get_running_loop().create_task(self._watch(watched), name=repr(watched.informer))

    async def _watch(self, watched: _Watched) -> None:
        await watched.informer.run()
        # Returns only when refused: the periodic pass still applies changes; try again later.
        if self._enqueue is not None and watched.informer.gave_up is not None:
            watched.retry = asyncio.get_running_loop().call_later(self._retry_after, self._retry, watched)

    def _retry(self, watched: _Watched) -> None:
        watched.retry = None
        if self._enqueue is not None and any(w is watched for w in self._watched.values()):
            watched.informer.gave_up = None
            self._run(watched)

    async def _halt(self, watched: _Watched) -> None:
        if watched.retry is not None:
            watched.retry.cancel()
            watched.retry = None
        task, watched.task = watched.task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _created(self, reference: Reference, _obj: Object) -> None:
        watched = self._watched.get(reference)
        # The first list reports what exists as adds: nothing changed, the listener is reconciled anyway.
        if watched is not None and watched.informer.has_synced:
            self._changed(reference)

    def _updated(self, reference: Reference, old: Object, new: Object) -> None:
        if resource_version(old) != resource_version(new):
            self._changed(reference)

    def _deleted(self, reference: Reference, _obj: Object) -> None:
        self._changed(reference)

    def _changed(self, reference: Reference) -> None:
        watched = self._watched.get(reference)
        enqueue = self._enqueue
        if watched is None or enqueue is None:
            return
        log.debug("%s changed; reconciling %d listener(s)", reference, len(watched.listeners))
        for listener in watched.listeners:
            enqueue(listener)
