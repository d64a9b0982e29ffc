"""The manager: shared caches, controllers, leader election, metrics and health endpoints, one process.

Lifecycle of :meth:`Manager.run`:

1. serve ``/metrics`` and ``/healthz`` + ``/readyz`` (each on its own address; ``""``/``"0"``/``None``
   disables one; the same address serves both);
2. start one shared informer per (resource, namespace) for every resource a controller watches or a
   caller asked :meth:`Manager.cache` for, and wait until all have synced (``/readyz`` turns 200);
3. with leader election: wait to acquire the Lease (caches stay warm meanwhile, so a new leader starts
   with a full cache);
4. start the controllers;
5. run until :meth:`Manager.request_stop` (SIGTERM/SIGINT when ``handle_signals``) -- then drain the
   controllers' in-flight reconciles (for at most ``graceful_shutdown_timeout``) while still renewing the
   Lease, so that no other replica can take it while this one still writes; then stop renewing and release it
   (:meth:`~arc_scaleset.kube.leader_election.LeaderElector.step_down`), stop the informers and servers, and
   return -- or until leadership is lost.

**Losing the lease ends the process**, as in controller-runtime: the controllers' workers are cancelled
at once (another replica may already be acting), everything is stopped, and :meth:`Manager.run` raises
:class:`~arc_scaleset.kube.leader_election.LeadershipLostError`; the command exits non-zero and the Deployment
restarts it as a fresh candidate. Re-campaigning in place would keep workqueues and backoff state that
belong to a term that is over; a restart is simpler and cannot leak them.

Namespace restriction: ``namespaces=None`` caches every namespace with one informer per resource; a set
of names gives one informer per (namespaced resource, namespace) -- cluster-scoped resources always use
one informer -- and reading a namespace outside the set raises :class:`NamespaceNotCachedError` rather than
answering "not found" (which a reconciler could take as "delete it").
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import signal
from collections.abc import Collection, Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Controller
from arc_scaleset.kube.informer import IndexFunc, Informer, Object, Store, Transform, compact
from arc_scaleset.kube.leader_election import LeaderElectionConfig, LeaderElector, LeadershipLostError
from arc_scaleset.kube.resources import Resource
from arc_scaleset.kube.runtime_metrics import RuntimeMetrics
from arc_scaleset.observability.metrics_server import MetricsServer, serve_metrics
from arc_scaleset.tasks import cancel_and_wait

log = logging.getLogger(__name__)

DEFAULT_CACHE_SYNC_TIMEOUT = 120.0
DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT = 30.0


class NamespaceNotCachedError(LookupError):
    """A cache read for a namespace the manager does not watch."""


class CacheSyncTimeoutError(TimeoutError):
    """The informers did not all sync within ``cache_sync_timeout``."""


class Cache:
    """Read access to the cached objects of one resource, across the manager's watched namespaces.

    Objects are shared with the cache: never mutate them (see :mod:`arc_scaleset.kube.informer`).
    """

    def __init__(self, resource: Resource, informers: Mapping[str | None, Informer]) -> None:
        self.resource = resource
        self._informers = informers  # namespace (None: all) -> informer

    @property
    def has_synced(self) -> bool:
        return all(informer.has_synced for informer in self._informers.values())

    async def wait_synced(self) -> None:
        for informer in list(self._informers.values()):
            await informer.wait_synced()

    def get(self, namespace: str | None, name: str) -> Object | None:
        return self._store_for(namespace).get(namespace, name)

    def list(self, namespace: str | None = None) -> builtins.list[Object]:
        if namespace is not None and self.resource.namespaced:
            return self._store_for(namespace).list(namespace)
        return [obj for store in self._stores() for obj in store.list()]

    def __len__(self) -> int:
        """How many objects are cached, across the watched namespaces (without copying them out)."""
        return sum(len(store) for store in self._stores())

    def by_owner(self, uid: str) -> builtins.list[Object]:
        return [obj for store in self._stores() for obj in store.by_owner(uid)]

    def by_label(self, key: str, value: str) -> builtins.list[Object]:
        return [obj for store in self._stores() for obj in store.by_label(key, value)]

    def by_index(self, index: str, value: str) -> builtins.list[Object]:
        return [obj for store in self._stores() for obj in store.by_index(index, value)]

    def _stores(self) -> builtins.list[Store]:
        return [informer.store for informer in self._informers.values()]

    def _store_for(self, namespace: str | None) -> Store:
        informer = self._informers.get(None)
        if informer is None:
            informer = self._informers.get(namespace or "")
        if informer is None:
            raise NamespaceNotCachedError(f"{self.resource} in namespace {namespace!r} is not cached by this manager")
        return informer.store


class Manager:
    """Owns the client, the shared informers, the controllers and the endpoints; see the module docstring.

    ``label_selectors`` restricts the cache of a resource to matching objects (e.g. only the pods this
    operator creates). ``transform`` is what every cache keeps of each object (default
    :func:`~arc_scaleset.kube.informer.compact`: no ``managedFields``, interned strings; ``None`` keeps the
    objects as received): cached objects are for reading and patching, never for writing back whole.
    ``registry`` is the process's private Prometheus registry (a new one by default);
    the runtime's metrics are registered in it and it is what ``/metrics`` serves.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        namespaces: Collection[str] | None = None,
        label_selectors: Mapping[Resource, str] | None = None,
        metrics_address: str | None = ":8080",
        health_address: str | None = None,
        leader_election: LeaderElectionConfig | None = None,
        registry: CollectorRegistry | None = None,
        clock: Clock = REAL_CLOCK,
        cache_sync_timeout: float = DEFAULT_CACHE_SYNC_TIMEOUT,
        graceful_shutdown_timeout: float = DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT,
        transform: Transform | None = compact,
    ) -> None:
        if namespaces is not None and not namespaces:
            raise ValueError("namespaces must be None (all) or name at least one namespace")
        self.client = client
        self.namespaces = frozenset(namespaces) if namespaces is not None else None
        self.label_selectors = dict(label_selectors or {})
        self.transform = transform
        self.metrics = RuntimeMetrics(registry)
        self.registry = self.metrics.registry
        self.clock = clock
        self.cache_sync_timeout = cache_sync_timeout
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self._metrics_address = _parse_address(metrics_address)
        self._health_address = _parse_address(health_address)
        self.elector = (
            LeaderElector(client, leader_election, clock=clock, metrics=self.metrics) if leader_election else None
        )
        self._controllers: list[Controller] = []
        self._informers: dict[Resource, dict[str | None, Informer]] = {}
        self._caches: dict[Resource, Cache] = {}
        self._stop_requested = asyncio.Event()
        self._force_stop = False
        self._started = False
        self._controllers_started = False
        self._servers: list[MetricsServer] = []
        self.bound: dict[str, tuple[str, int]] = {}
        """Where each endpoint listens once running: ``{"metrics": (host, port), "health": (host, port)}``."""

    # -- setup ----------------------------------------------------------------------------------------

    def add(self, controller: Controller) -> None:
        """Register a controller (before :meth:`run`); its resources get shared informers."""
        if self._started:
            raise RuntimeError("add controllers before the manager runs")
        if any(existing.name == controller.name for existing in self._controllers):
            raise ValueError(f"a controller named {controller.name!r} is already registered")
        self._controllers.append(controller)
        for resource in controller.resources:
            self._ensure_informers(resource)

    def cache(self, resource: Resource) -> Cache:
        """The cache of ``resource`` (creating its informers on first use). Call it during setup so that
        :meth:`run` waits for it to sync; a cache first asked for while running starts empty and fills
        as its informers sync (``await cache.wait_synced()``)."""
        self._ensure_informers(resource)
        return self._caches[resource]

    def add_index(self, resource: Resource, name: str, func: IndexFunc) -> None:
        """Add a custom index to ``resource``'s cache (in every namespace's store)."""
        for informer in self._ensure_informers(resource).values():
            informer.store.add_index(name, func)

    @property
    def controllers(self) -> list[Controller]:
        return list(self._controllers)

    @property
    def ready(self) -> bool:
        """True once every cache has synced, until the manager begins to stop."""
        return (
            self._started
            and not self._stop_requested.is_set()
            and all(cache.has_synced for cache in self._caches.values())
        )

    # -- running --------------------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Ask :meth:`run` to stop gracefully (safe from signal handlers and other tasks). A second request
        while stopping skips the drain: in-flight reconciles are cancelled."""
        if self._stop_requested.is_set():
            self._force_stop = True
            log.warning("second stop request: cancelling in-flight reconciles")
        self._stop_requested.set()

    async def run(self, *, handle_signals: bool = False) -> None:
        """Run until stopped (returns) or leadership is lost (raises :class:`LeadershipLostError`).

        ``handle_signals`` makes SIGTERM and SIGINT call :meth:`request_stop` (for the CLI; tests leave it off).
        """
        if self._started:
            raise RuntimeError("a manager runs once")
        self._started = True
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.request_stop)
                installed.append(sig)
        lost = False
        holding: asyncio.Future[None] | None = None
        try:
            await self._start_servers()
            for per_namespace in self._informers.values():
                for informer in per_namespace.values():
                    informer.start()
            await self._until_stopped(self._wait_for_caches())
            if self.elector is not None and not self._stop_requested.is_set():
                await self._until_stopped(self.elector.acquire())
            if not self._stop_requested.is_set():
                self._start_controllers()
                holding = asyncio.ensure_future(self.elector.hold()) if self.elector is not None else None
                lost = await self._serve(holding)
        finally:
            await self._shutdown(lost=lost, holding=holding)
            for sig in installed:
                loop.remove_signal_handler(sig)
        if lost:
            raise LeadershipLostError(f"lost the lease {self.elector.config.name if self.elector else ''}")

    async def _serve(self, holding: asyncio.Future[None] | None) -> bool:
        """Wait for a stop request or the loss of the lease (``holding``, the elector's :meth:`hold`, which
        returns only when the lease is lost until someone steps down); True when the lease was lost. ``holding``
        keeps renewing after a stop request: the drain still writes."""
        stop = asyncio.ensure_future(self._stop_requested.wait())
        waiters: set[asyncio.Future[Any]] = {stop} if holding is None else {stop, holding}
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(stop)
        return holding is not None and holding.done()

    async def _until_stopped(self, work: Any) -> None:
        """Await ``work`` unless a stop is requested first (then cancel it)."""
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self._stop_requested.wait())
        try:
            await asyncio.wait((task, stop), return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(*(future for future in (task, stop) if not future.done()))
        if task.done() and not task.cancelled():
            task.result()  # re-raise a failure (e.g. CacheSyncTimeoutError)

    async def _wait_for_caches(self) -> None:
        try:
            async with asyncio.timeout(self.cache_sync_timeout):
                for cache in list(self._caches.values()):
                    await cache.wait_synced()
        except TimeoutError:
            pending = [str(resource) for resource, cache in self._caches.items() if not cache.has_synced]
            raise CacheSyncTimeoutError(
                f"caches did not sync within {self.cache_sync_timeout:.0f}s: {', '.join(pending)}"
            ) from None
        log.info("caches synced: %s", ", ".join(str(resource) for resource in self._caches))

    def _start_controllers(self) -> None:
        self._controllers_started = True
        for controller in self._controllers:
            controller.start(self._informer_list, metrics=self.metrics)

    async def _shutdown(self, *, lost: bool, holding: asyncio.Future[None] | None) -> None:
        if self._controllers_started:
            # After losing the lease nothing may be written any more: cancel instead of draining.
            drain = not lost and not self._force_stop
            await asyncio.gather(
                *(
                    controller.stop(drain=drain, drain_timeout=self.graceful_shutdown_timeout)
                    for controller in self._controllers
                )
            )
        if self.elector is not None and not lost:
            if holding is not None:
                if holding.done():
                    log.warning("the lease was lost while the controllers drained")
                await self.elector.step_down(holding)  # stops renewing; releases the lease if still held
            else:
                await self.elector.release()
        for per_namespace in self._informers.values():
            for informer in per_namespace.values():
                await informer.stop()
        for server in self._servers:
            await server.close()
        self._servers.clear()
        log.info("manager stopped%s", " (leadership lost)" if lost else "")

    # -- informers ------------------------------------------------------------------------------------

    def _ensure_informers(self, resource: Resource) -> dict[str | None, Informer]:
        existing = self._informers.get(resource)
        if existing is not None:
            return existing
        scopes: list[str | None] = [None]
        if self.namespaces is not None and resource.namespaced:
            scopes = [*sorted(self.namespaces)]
        per_namespace: dict[str | None, Informer] = {}
        for namespace in scopes:
            informer = Informer(
                self.client,
                resource,
                namespace=namespace,
                label_selector=self.label_selectors.get(resource),
                clock=self.clock,
                transform=self.transform,
            )
            per_namespace[namespace] = informer
            if self._started:
                informer.start()
        self._informers[resource] = per_namespace
        self._caches[resource] = Cache(resource, per_namespace)
        return per_namespace

    def _informer_list(self, resource: Resource) -> list[Informer]:
        return list(self._ensure_informers(resource).values())

    # -- endpoints ------------------------------------------------------------------------------------

    async def _start_servers(self) -> None:
        # One server when both addresses are the same, else a metrics server and a probe-only server.
        by_address: dict[tuple[str | None, int], list[str]] = {}
        if self._metrics_address is not None:
            by_address.setdefault(self._metrics_address, []).append("metrics")
        if self._health_address is not None:
            by_address.setdefault(self._health_address, []).append("health")
        for (host, port), kinds in by_address.items():
            server = await serve_metrics(
                address=f"[{host}]:{port}" if host and ":" in host else f"{host or ''}:{port}",
                registry=self.registry if "metrics" in kinds else CollectorRegistry(),
                health_checks={"ping": lambda: None},
                ready_checks={"manager": self._readiness},
            )
            assert server is not None  # the address was parsed as enabled
            self._servers.append(server)
            for kind in kinds:
                self.bound[kind] = (host or "0.0.0.0", server.port)
            log.info("serving %s on %s:%s", " and ".join(kinds), host or "*", server.port)

    def _readiness(self) -> str | None:
        """``None`` when ready, else why not (what ``/readyz`` prints)."""
        if self.ready:
            return None
        return "stopping" if self._stop_requested.is_set() else "caches not synced"


def _parse_address(address: str | None) -> tuple[str | None, int] | None:
    """``":8080"`` (all interfaces), ``"127.0.0.1:0"`` (any free port), ``"[::1]:9090"``; ``None``,
    ``""`` or ``"0"`` disable the endpoint."""
    if address is None or address.strip() in ("", "0"):
        return None
    host, sep, port_text = address.strip().rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"address {address!r} is not host:port (or :port)")
    host = host.strip("[]")
    return (host or None, int(port_text))
