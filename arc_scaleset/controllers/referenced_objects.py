r"""Learning within seconds that a Secret or ConfigMap a scale set's listener is built from has changed.

A listener's ``config.json`` carries the scale set's GitHub credentials (``githubConfigSecret``), its CA
(``githubServerTLS``'s ConfigMap) and the credentials of its proxy (``proxy.*.credentialSecretRef``), all read
from the scale set's namespace. Without a watch, a rotated credential reached the listener only at the next
periodic pass (5 minutes; issue 15, item 8). :class:`ReferencedObjectWatch` watches the namespaces of the objects
some listener references and queues those listeners when one of them changes:

- **What is watched**: one informer per kind (Secret, ConfigMap) per namespace that holds a referenced object,
  however many objects there are referenced, and only metadata (``PartialObjectMetadata``): no Secret's data is
  ever received or cached, and of the metadata only the identity and ``resourceVersion`` are kept
  (:func:`~arc_scaleset.kube.informer.identity_only`), since annotations may hold data too. Events of objects
  no listener references are ignored. A namespace where no listener references an object of that kind any more
  stops being watched. Issue 26, item 9: one informer per referenced object, each relisting every 5 to 10
  minutes, used the controller's whole request budget with about 2,250 references.
- **Its own request budget**: the informers send their lists and watches through a client with a rate limit of
  their own (:meth:`~arc_scaleset.kube.client.KubeClient.with_rate_limit`, :data:`WATCH_QPS`), so that their
  relists after a failover never queue ahead of the reconcilers' requests, nor those ahead of them.
- **RBAC**: ``list`` and ``watch`` on Secrets (and, where a CA is referenced, ConfigMaps) in the scale set's
  namespace (the scale-set chart's Role grants them). Without the grant the watch of that namespace gives up
  after one warning and is tried again after ``retry_after`` seconds; the listener still gets the change at its
  periodic pass.
- **What queues a listener**: a change of a referenced object's ``resourceVersion``, its deletion, or its
  creation after the namespace's watch started (a missing Secret being created). The initial list queues
  nothing: the listener is reconciled when it starts tracking anyway.

It is a controller :class:`~arc_scaleset.kube.controller.Source`: the AutoscalingListener controller starts it
(only while leading) and stops it; the reconciler says what each listener references with :meth:`track` and
forgets a listener with :meth:`forget`.

A scale set is built from the same objects before its listener exists: the AutoscalingRunnerSet reconciler
:meth:`hold`\ s them from its first pass (and :meth:`release`\ s them when the scale set is gone), so that the
passes that set it up find their data kept per change too
(:class:`~arc_scaleset.controllers.referenced_data.ReferencedData`), not read once each (issue 30). A scale set's
hold only keeps the objects watched; a change queues the listeners built from them, never the scale set.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.api.common import ProxyConfig, TLSConfig, VaultConfig
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.errors import Forbidden, NotFound, Unauthorized
from arc_scaleset.kube.informer import (
    HandlerRegistration,
    Informer,
    Object,
    identity_only,
    object_key,
    resource_version,
)
from arc_scaleset.kube.resources import CONFIG_MAPS, SECRETS, Resource
from arc_scaleset.tasks import cancel_and_wait

log = logging.getLogger(__name__)

Kind = Literal["Secret", "ConfigMap"]
DEFAULT_RETRY_AFTER: Final = 300.0
WATCH_QPS: Final = 5.0
"""Requests per second of the referenced-object watches, together (their own budget, not the reconcilers'):
client-go's default for a client. Per kind and namespace watched they send a list when it is first watched,
then one watch request every 5 to 10 minutes."""
WATCH_BURST: Final = 10


@dataclass(frozen=True, order=True)
class Reference:
    """A Secret or ConfigMap a listener's config is built from."""

    kind: Kind
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


class _BuiltFrom(Protocol):
    """The spec fields a listener's config is built from: an AutoscalingRunnerSet's and an
    AutoscalingListener's (which copies them from its scale set)."""

    @property
    def github_config_secret(self) -> str: ...
    @property
    def vault_config(self) -> VaultConfig | None: ...
    @property
    def proxy(self) -> ProxyConfig | None: ...
    @property
    def github_server_tls(self) -> TLSConfig | None: ...


def references_of(spec: _BuiltFrom, namespace: str) -> frozenset[Reference]:
    """The objects a listener is built from according to ``spec``, all in ``namespace``, the scale set's (pure).

    ``githubConfigSecret`` counts unless a vault holds the credentials (then it names a vault secret).
    """
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


def listener_references(listener: AutoscalingListener) -> frozenset[Reference]:
    """The objects the listener's config is built from, all in the scale set's namespace (pure)."""
    return references_of(listener.spec, listener.spec.autoscaling_runner_set_namespace)


def scale_set_references(scale_set: AutoscalingRunnerSet) -> frozenset[Reference]:
    """The objects the scale set's listener will be built from, in the scale set's namespace (pure)."""
    return references_of(scale_set.spec, scale_set.namespace)


@dataclass(frozen=True)
class _Referrer:
    """What references objects: a listener (queued when one of them changes) or a scale set (never queued)."""

    request: Request
    queued: bool


def _resource(kind: Kind) -> Resource:
    return SECRETS if kind == "Secret" else CONFIG_MAPS


Scope = tuple[Kind, str]
"""A kind and a namespace: what one informer watches."""


@dataclass(eq=False)
class _NamespaceWatch:
    """The informer of one kind in one namespace, and which listeners each referenced object there is in."""

    informer: Informer
    registration: HandlerRegistration
    referrers: dict[str, set[_Referrer]] = field(default_factory=dict)  # object name -> what is built from it
    task: asyncio.Task[None] | None = None
    retry: asyncio.TimerHandle | None = None


class ReferencedObjectWatch:
    """Watches the namespaces of the objects listeners reference; queues the listeners of one that changed
    (module docstring).

    ``kube`` needs ``list``/``watch`` on Secrets and ConfigMaps in those namespaces; the watch sends its requests
    through ``kube.with_rate_limit(qps, burst)``. ``retry_after`` is how long a watch that was refused (403, 401)
    waits before it is tried again.
    """

    def __init__(
        self,
        kube: KubeClient,
        *,
        clock: Clock = REAL_CLOCK,
        retry_after: float = DEFAULT_RETRY_AFTER,
        qps: float = WATCH_QPS,
        burst: int = WATCH_BURST,
    ) -> None:
        self._kube = kube.with_rate_limit(qps, burst)
        self._clock = clock
        self._retry_after = retry_after
        self._enqueue: Callable[[Request], None] | None = None
        self._tracked: dict[_Referrer, frozenset[Reference]] = {}
        self._watches: dict[Scope, _NamespaceWatch] = {}

    # -- the reconciler's side ----------------------------------------------------------------------

    def track(self, listener: Request, references: Iterable[Reference]) -> None:
        """``listener`` is built from ``references`` (replacing what it was built from before)."""
        self._refer(_Referrer(listener, queued=True), frozenset(references))

    def forget(self, listener: Request) -> None:
        """``listener`` is gone: it references nothing any more."""
        self._refer(_Referrer(listener, queued=True), frozenset())

    def hold(self, scale_set: Request, references: Iterable[Reference]) -> None:
        """Watch ``references`` for ``scale_set``, whose passes read them (replacing what it held before); their
        changes queue nothing for it."""
        self._refer(_Referrer(scale_set, queued=False), frozenset(references))

    def release(self, scale_set: Request) -> None:
        """``scale_set`` is gone: it holds nothing any more."""
        self._refer(_Referrer(scale_set, queued=False), frozenset())

    def _refer(self, referrer: _Referrer, wanted: frozenset[Reference]) -> None:
        before = self._tracked.get(referrer, frozenset())
        if wanted == before:
            return
        if wanted:
            self._tracked[referrer] = wanted
        else:
            del self._tracked[referrer]
        for reference in before - wanted:
            self._release(reference, referrer)
        for reference in wanted - before:
            self._acquire(reference, referrer)

    @property
    def watched(self) -> frozenset[Reference]:
        """The objects some listener references now."""
        return frozenset(
            Reference(kind, namespace, name)
            for (kind, namespace), watch in self._watches.items()
            for name in watch.referrers
        )

    @property
    def scopes(self) -> frozenset[Scope]:
        """The kinds and namespaces watched now: one informer each."""
        return frozenset(self._watches)

    @property
    def has_synced(self) -> bool:
        """Every namespace watched now has been listed once (changes from now on queue their listeners)."""
        return all(watch.informer.has_synced for watch in self._watches.values())

    def resource_version(self, reference: Reference) -> str | None:
        """``reference``'s ``resourceVersion`` as its namespace's watch shows it now; ``None`` when the watch does
        not know it: not referenced by a listener, not listed yet, not running (stopped, or refused and waiting
        to retry), or not in the namespace as far as the watch has seen
        (:class:`~arc_scaleset.controllers.referenced_data.ReferencedData` relies on this)."""
        watch = self._watches.get((reference.kind, reference.namespace))
        if watch is None or reference.name not in watch.referrers or not self._running(watch):
            return None
        obj = watch.informer.store.get(reference.namespace, reference.name)
        if obj is None:
            return None
        return resource_version(obj) or None

    def _running(self, watch: _NamespaceWatch) -> bool:
        task = watch.task
        informer = watch.informer
        return task is not None and not task.done() and informer.has_synced and informer.gave_up is None

    # -- Source -------------------------------------------------------------------------------------

    def start(self, enqueue: Callable[[Request], None]) -> None:
        """Start watching what is tracked (inside the running loop); ``enqueue`` queues a listener."""
        self._enqueue = enqueue
        for watch in self._watches.values():
            self._run(watch)

    async def stop(self) -> None:
        """Stop every watch; what is tracked is kept (a later :meth:`start` watches it again)."""
        self._enqueue = None
        for watch in list(self._watches.values()):
            await self._halt(watch)

    # -- internals ----------------------------------------------------------------------------------

    def _acquire(self, reference: Reference, referrer: _Referrer) -> None:
        scope: Scope = (reference.kind, reference.namespace)
        watch = self._watches.get(scope)
        if watch is None:
            informer = Informer(
                self._kube,
                _resource(reference.kind),
                namespace=reference.namespace,
                clock=self._clock,
                metadata_only=True,
                transform=identity_only,
                give_up_on=(Forbidden, Unauthorized, NotFound),
            )
            registration = informer.add_handler(
                on_add=functools.partial(self._created, scope),
                on_update=functools.partial(self._updated, scope),
                on_delete=functools.partial(self._deleted, scope),
            )
            watch = self._watches[scope] = _NamespaceWatch(informer, registration)
            if self._enqueue is not None:
                self._run(watch)
        watch.referrers.setdefault(reference.name, set()).add(referrer)

    def _release(self, reference: Reference, referrer: _Referrer) -> None:
        scope: Scope = (reference.kind, reference.namespace)
        watch = self._watches.get(scope)
        if watch is None:
            return
        referrers = watch.referrers.get(reference.name)
        if referrers is None:
            return
        referrers.discard(referrer)
        if not referrers:
            del watch.referrers[reference.name]
        if not watch.referrers:
            del self._watches[scope]
            watch.registration.remove()
            if watch.retry is not None:
                watch.retry.cancel()
            if watch.task is not None:
                watch.task.cancel()  # not awaited: it ends at its next await, and nothing waits for it

    def _run(self, watch: _NamespaceWatch) -> None:
        if watch.task is not None and not watch.task.done():
            return
        watch.task = asyncio.get_running_loop().create_task(self._watch(watch), name=repr(watch.informer))

    async def _watch(self, watch: _NamespaceWatch) -> None:
        await watch.informer.run()
        # Returns only when refused: the periodic pass still applies changes; try again later.
        if self._enqueue is not None and watch.informer.gave_up is not None:
            watch.retry = asyncio.get_running_loop().call_later(self._retry_after, self._retry, watch)

    def _retry(self, watch: _NamespaceWatch) -> None:
        watch.retry = None
        if self._enqueue is not None and any(w is watch for w in self._watches.values()):
            watch.informer.gave_up = None
            self._run(watch)

    async def _halt(self, watch: _NamespaceWatch) -> None:
        if watch.retry is not None:
            watch.retry.cancel()
            watch.retry = None
        task, watch.task = watch.task, None
        if task is not None:
            await cancel_and_wait(task)

    def _created(self, scope: Scope, obj: Object) -> None:
        watch = self._watches.get(scope)
        # The first list reports what exists as adds: nothing changed, the listener is reconciled anyway.
        if watch is not None and watch.informer.has_synced:
            self._changed(scope, obj)

    def _updated(self, scope: Scope, old: Object, new: Object) -> None:
        if resource_version(old) != resource_version(new):
            self._changed(scope, new)

    def _deleted(self, scope: Scope, obj: Object) -> None:
        self._changed(scope, obj)

    def _changed(self, scope: Scope, obj: Object) -> None:
        watch = self._watches.get(scope)
        enqueue = self._enqueue
        name = object_key(obj)[1]
        referrers = watch.referrers.get(name, ()) if watch is not None else ()
        listeners = [referrer.request for referrer in referrers if referrer.queued]
        if not listeners or enqueue is None:
            return  # an object no listener is built from (a runner's JIT Secret, or one only a scale set holds)
        log.debug("%s %s/%s changed; reconciling %d listener(s)", scope[0], scope[1], name, len(listeners))
        for listener in listeners:
            enqueue(listener)
