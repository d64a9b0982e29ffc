"""A controller: events from informers become keys in a workqueue, workers reconcile the keys.

The contract (controller-runtime's, which every reconciler in this project relies on):

* **Level-triggered.** A reconcile gets a :class:`Request` (namespace and name) and nothing about the event
  that caused it. It reads the current state (from the cache), acts, and returns. Several events for one
  key before a worker takes it become one reconcile.
* **Changes first.** At start every cached object is replayed as an add, at low priority: a change that arrives
  while that backlog is being worked through (an add, update or delete, a source's key, a requeue) is reconciled
  before the objects nothing has changed since (controller-runtime's priority queue; :mod:`.workqueue`).
* **One key, one worker.** Up to ``concurrency`` keys are reconciled at once, never the same key twice at
  once (the workqueue guarantees it).
* **What triggers a key.** Any add, change (new resourceVersion) or delete of a *primary* object (a controller
  whose keys are groups of primary objects may pass only the updates its ``primary_update_if`` accepts); any
  event on an object of an *owned* resource whose controller owner reference points to a primary kind
  (the owner's key is queued, for the object before and after an update); any event on a *watched*
  resource, mapped to keys by its :data:`MapFunc` (a :class:`Watch` may pass only the updates its
  :data:`UpdatePredicate` accepts: a resource that changes often, of which one field matters); any key a
  :class:`Source` queues (events no shared informer carries, e.g. watches that come and go).
* **Outcomes.** ``Result()``: done, the key's backoff is reset. ``Result(requeue_after=s)``: reconciled
  again after ``s`` seconds (backoff reset). An exception: logged with the key and the error's one-line
  message, and the key is retried with per-key exponential backoff (5 ms doubling to 1000 s by default).
  A crashing reconcile never stops the worker, the controller or the process.
* **No silent failure.** A key whose reconcile keeps failing (3 passes in a row or 60 s by default) is handed
  to the controller's :class:`~arc_scaleset.kube.failures.FailureReporter`, which tells the object's readers
  (a condition, a Warning Event), and told again when a pass succeeds (:mod:`.failures`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.failures import FailurePolicy, FailureReporter, FailureTracker, one_line, tracking
from arc_scaleset.kube.informer import HandlerRegistration, Informer, Object
from arc_scaleset.kube.resources import Resource
from arc_scaleset.kube.runtime_metrics import RuntimeMetrics
from arc_scaleset.kube.views import ObjectView
from arc_scaleset.kube.workqueue import RateLimiter, ShutDown, WorkQueue
from arc_scaleset.tasks import cancel_and_wait

log = logging.getLogger(__name__)


@dataclass(frozen=True, order=True)
class Request:
    """The key of one primary object; ``namespace`` is ``""`` for cluster-scoped kinds."""

    namespace: str
    name: str

    @classmethod
    def for_object(cls, obj: Object) -> Request:
        view = ObjectView(obj)
        return cls(view.namespace, view.name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class Result:
    """What a successful reconcile asks for: nothing more, or another reconcile after ``requeue_after`` s.

    Use ``requeue_after`` to poll something no watch reports (an external service, a deadline); do not
    use exceptions for that -- they back off exponentially and are logged as errors.
    """

    requeue_after: float | None = None


Reconcile = Callable[[Request], Awaitable[Result]]
MapFunc = Callable[[Object], Iterable[Request]]
"""Maps an object of a watched resource to the primary keys it concerns (possibly none)."""

UpdatePredicate = Callable[[Object, Object], bool]
"""Whether an update of a watched object, ``(old, new)``, concerns the controller (adds and deletes always do)."""


@dataclass(frozen=True)
class Watch:
    """A watched resource: its objects' events mapped to primary keys by ``map_func``.

    ``on_update_if`` filters updates: only those for which it returns True are mapped (both the old and the new
    object), like controller-runtime's update predicates. Without it every update is.
    """

    resource: Resource
    map_func: MapFunc
    on_update_if: UpdatePredicate | None = None


class Source(Protocol):
    """Events from outside the shared informers (controller-runtime's ``source.Source``).

    :meth:`start` is called when the controller starts (inside the running loop, only while leading), with the
    function that queues a key; :meth:`stop` when it stops. Neither may block for long.
    """

    def start(self, enqueue: Callable[[Request], None]) -> None: ...

    async def stop(self) -> None: ...


InformerSource = Callable[[Resource], Sequence[Informer]]
"""Gives the shared informers (one per watched namespace) of a resource; provided by the manager."""


def controller_owner_request(obj: Object, owner: Resource) -> Request | None:
    """The key of ``obj``'s controller owner when that owner is of the ``owner`` resource's kind, else None.

    Like controller-runtime, the group and kind are matched, not the version: an owner reference written
    under another served version of the owner's group still names the same object. A namespaced owner
    is in the child's namespace (owner references cannot cross namespaces).
    """
    view = ObjectView(obj)
    ref = view.controller_owner
    if ref is None:
        return None
    group = str(ref.get("apiVersion", "")).rpartition("/")[0]
    if ref.get("kind") != owner.kind or group != owner.group or not ref.get("name"):
        return None
    return Request(view.namespace if owner.namespaced else "", ref["name"])


class Controller:
    """Reconciles one primary resource; see the module docstring for the contract.

    Built by the caller and handed to :meth:`arc_scaleset.kube.manager.Manager.add`, which supplies the
    shared informers and metrics and starts it (only while leading, when leader election is on). A
    controller runs once: after :meth:`stop` it cannot be started again.
    """

    def __init__(
        self,
        name: str,
        primary: Resource,
        reconcile: Reconcile,
        *,
        primary_keys: MapFunc | None = None,
        primary_update_if: UpdatePredicate | None = None,
        owns: Sequence[Resource] = (),
        watches: Sequence[tuple[Resource, MapFunc] | Watch] = (),
        sources: Sequence[Source] = (),
        concurrency: int = 1,
        rate_limiter: RateLimiter | None = None,
        clock: Clock = REAL_CLOCK,
        failure_reporter: FailureReporter[Request] | None = None,
        failure_policy: FailurePolicy | None = None,
        self_reported: tuple[type[BaseException], ...] = (),
    ) -> None:
        """``failure_reporter``: told about keys whose reconcile keeps failing (``failure_policy`` says when),
        except for errors of the ``self_reported`` classes, which the reconcile reports itself (see
        :mod:`arc_scaleset.kube.failures`). ``primary_keys`` maps a primary object to the keys it concerns
        (default: its own key), for a controller whose keys are groups of primary objects; ``primary_update_if``
        filters the primary object's updates as a :class:`Watch`'s ``on_update_if`` does (default: every update
        is mapped; adds and deletes always are)."""
        if concurrency < 1:
            raise ValueError(f"controller {name}: concurrency must be at least 1, got {concurrency}")
        self.name = name
        self.primary = primary
        self._primary_keys: MapFunc = primary_keys or (lambda obj: (Request.for_object(obj),))
        self._primary_update_if = primary_update_if
        self.owns = tuple(owns)
        self.watches = tuple(w if isinstance(w, Watch) else Watch(w[0], w[1]) for w in watches)
        self.sources = tuple(sources)
        self.concurrency = concurrency
        self._reconcile = reconcile
        self._rate_limiter = rate_limiter
        self._clock = clock
        self.failures = FailureTracker(policy=failure_policy, clock=clock)
        self._failure_reporter = failure_reporter
        self._self_reported = self_reported
        self._queue: WorkQueue[Request] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._registrations: list[HandlerRegistration] = []
        self._metrics: RuntimeMetrics | None = None
        self._stopped = False

    def __repr__(self) -> str:
        return f"Controller({self.name!r}, primary={self.primary})"

    @property
    def resources(self) -> list[Resource]:
        """Every resource whose events can trigger this controller (the manager caches each of them)."""
        seen: dict[Resource, None] = {self.primary: None}
        for resource in (*self.owns, *(watch.resource for watch in self.watches)):
            seen.setdefault(resource, None)
        return list(seen)

    @property
    def running(self) -> bool:
        return bool(self._workers) and not self._stopped

    @property
    def queue(self) -> WorkQueue[Request]:
        """The controller's workqueue (exists once started)."""
        if self._queue is None:
            raise RuntimeError(f"{self!r} has not been started")
        return self._queue

    def enqueue(self, request: Request) -> None:
        """Queue a key from outside the informers (an external event); ignored before start."""
        if self._queue is not None:
            self._queue.add(request)

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self, informers: InformerSource, *, metrics: RuntimeMetrics | None = None) -> None:
        """Connect event handlers to the informers and start the workers.

        Informers that already hold objects replay them as adds, so every existing primary object is
        reconciled once at start (as after a restart or on becoming leader).
        """
        if self._queue is not None:
            raise RuntimeError(f"{self!r} was already started; controllers run once")
        self._metrics = metrics
        self._queue = WorkQueue(name=self.name, rate_limiter=self._rate_limiter, clock=self._clock, metrics=metrics)
        if metrics is not None:
            metrics.start_controller(self.name, concurrency=self.concurrency)
        for resource in self.resources:
            mappers = self._mappers_for(resource)
            for informer in informers(resource):
                self._registrations.append(self._connect(informer, mappers))
        for source in self.sources:
            source.start(self.enqueue)
        loop = asyncio.get_running_loop()
        self._workers = [
            loop.create_task(self._worker(), name=f"{self.name}-worker-{i}") for i in range(self.concurrency)
        ]
        log.info(
            "controller %s started (%d workers, watching %s)",
            self.name,
            self.concurrency,
            ", ".join(str(r) for r in self.resources),
        )

    async def stop(self, *, drain: bool = True, drain_timeout: float | None = None) -> None:
        """Stop taking keys. With ``drain``, let reconciles in flight finish (for at most ``drain_timeout``
        seconds, then cancel them); without, cancel them at once (leadership lost: another process may
        already be acting). Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        for registration in self._registrations:
            registration.remove()
        self._registrations.clear()
        if self._queue is None:
            return
        for source in self.sources:
            try:
                await source.stop()
            except Exception as exc:  # stopping must go on whatever one source does
                log.warning("controller %s: stopping a source failed: %s", self.name, one_line(exc))
        if drain:
            try:
                async with asyncio.timeout(drain_timeout):
                    await self._queue.shutdown(drain=True)
            except TimeoutError:
                log.warning(
                    "controller %s: reconciles still running after %.0fs; cancelling them", self.name, drain_timeout
                )
        else:
            await self._queue.shutdown(drain=False)
        await cancel_and_wait(*self._workers)
        log.info("controller %s stopped", self.name)

    async def wait(self) -> None:
        """Wait until every worker has ended (after :meth:`stop`)."""
        if self._workers:
            await asyncio.gather(*self._workers, return_exceptions=True)

    # -- events to keys -------------------------------------------------------------------------------

    def _mappers_for(self, resource: Resource) -> list[tuple[MapFunc, UpdatePredicate | None]]:
        mappers: list[tuple[MapFunc, UpdatePredicate | None]] = []
        if resource == self.primary:
            mappers.append((self._primary_keys, self._primary_update_if))
        if resource in self.owns:
            mappers.append((self._controller_owner_of, None))
        mappers.extend((watch.map_func, watch.on_update_if) for watch in self.watches if watch.resource == resource)
        return mappers

    def _controller_owner_of(self, obj: Object) -> Iterable[Request]:
        request = controller_owner_request(obj, self.primary)
        return () if request is None else (request,)

    def _connect(
        self, informer: Informer, mappers: list[tuple[MapFunc, UpdatePredicate | None]]
    ) -> HandlerRegistration:
        # add_handler replays every object the informer holds as an add: the state at start, not a change. Those
        # keys queue at low priority, so that changes arriving meanwhile (a new set, a job's scale-up) go first.
        replaying = True

        def enqueue(obj: Object) -> None:
            queue = self._queue
            if queue is None:
                return
            for mapper, _ in mappers:
                for request in mapper(obj):
                    queue.add(request, low_priority=replaying)

        def update(old: Object, new: Object) -> None:
            queue = self._queue
            if queue is None:
                return
            for mapper, accepts in mappers:
                if accepts is not None and not accepts(old, new):
                    continue
                for obj in (old, new):
                    for request in mapper(obj):
                        queue.add(request)

        registration = informer.add_handler(on_add=enqueue, on_update=update, on_delete=enqueue)
        replaying = False
        return registration

    # -- workers --------------------------------------------------------------------------------------

    async def _worker(self) -> None:
        queue = self.queue
        while True:
            try:
                request = await queue.get()
            except ShutDown:
                return
            try:
                await self._reconcile_one(queue, request)
            finally:
                queue.done(request)

    async def _reconcile_one(self, queue: WorkQueue[Request], request: Request) -> None:
        metrics = self._metrics
        started = self._clock.monotonic()
        if metrics is not None:
            metrics.active_workers.labels(controller=self.name).inc()
        outcome = "error"
        try:
            with structlog.contextvars.bound_contextvars(
                controller=self.name,
                namespace=request.namespace,
                name=request.name,
                reconcile_id=uuid.uuid4().hex[:12],
            ):
                try:
                    with tracking(self.failures, request):
                        result = await self._reconcile(request)
                except asyncio.CancelledError:
                    outcome = "cancelled"
                    raise
                except Exception as exc:  # a reconcile crash must never take the worker down
                    queue.add_rate_limited(request)
                    log.error(
                        "controller %s: reconcile %s failed (attempt %d): %s",
                        self.name,
                        request,
                        queue.num_requeues(request),
                        one_line(exc),
                    )
                    log.debug("controller %s: reconcile %s traceback", self.name, request, exc_info=True)
                    if metrics is not None:
                        metrics.reconcile_errors.labels(controller=self.name).inc()
                    await self._failed(request, exc)
                    return
                await self._succeeded(request)
            queue.forget(request)
            if result.requeue_after is not None:
                queue.add_after(request, result.requeue_after)
                outcome = "requeue_after"
            else:
                outcome = "success"
        finally:
            if metrics is not None:
                metrics.active_workers.labels(controller=self.name).dec()
                if outcome != "cancelled":
                    metrics.reconcile_total.labels(controller=self.name, result=outcome).inc()
                    metrics.reconcile_time.labels(controller=self.name).observe(self._clock.monotonic() - started)

    async def _failed(self, request: Request, exc: Exception) -> None:
        failure = self.failures.failed(request, exc)
        reporter = self._failure_reporter
        if failure is None or reporter is None or isinstance(exc, self._self_reported):
            return
        announce = self.failures.announce(request, failure)
        try:
            await reporter.failing(request, failure, announce=announce)
        except Exception as report_exc:  # reporting is a side note: it must not break the retry
            log.warning(
                "controller %s: reporting the failure of %s failed: %s", self.name, request, one_line(report_exc)
            )

    async def _succeeded(self, request: Request) -> None:
        reported = self.failures.succeeded(request)
        if reported is None or self._failure_reporter is None:
            return
        try:
            await self._failure_reporter.recovered(request, reported)
        except Exception as report_exc:  # as in _failed
            log.warning(
                "controller %s: reporting the recovery of %s failed: %s", self.name, request, one_line(report_exc)
            )
