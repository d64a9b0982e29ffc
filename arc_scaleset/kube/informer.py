"""A list-then-watch cache of one resource: the :class:`Store` and the :class:`Informer` that fills it.

The informer lists the resource once, then watches from the list's resourceVersion, applying each event
to its store and telling its handlers. When the watch ends it resumes from the last resourceVersion it
saw (bookmarks keep that fresh on quiet resources); when the server says that version is too old (410
Gone) it lists again and reconciles the store with the new list: objects that vanished are reported as
deleted, changed ones as updated, so handlers never miss a change and never see one twice. Errors are
retried with jittered exponential backoff on the injected clock, one log line per failure.

Cached objects are shared, not copied: every reader gets the very dict the store holds. **Never mutate an
object read from a store** (the type is ``Mapping`` so that mypy rejects the obvious writes); take
:func:`copy_of` first when you want to build a modified version. Copying on every read would double the
cost of the hottest path in the operator for a guarantee the type checker mostly gives for free.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import random
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from arc_scaleset.backoff import Backoff
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.client import KubeClient, WatchEvent
from arc_scaleset.kube.errors import Gone
from arc_scaleset.kube.resources import Resource
from arc_scaleset.kube.views import Object as Object
from arc_scaleset.kube.views import mapping, metadata_of, sequence
from arc_scaleset.tasks import cancel_and_wait

log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]
"""``(namespace, name)``; the namespace is ``""`` for cluster-scoped objects."""

IndexFunc = Callable[[Object], Iterable[str]]
"""The index values of an object (none, one or many)."""

Transform = Callable[[dict[str, Any]], dict[str, Any]]
"""What an informer keeps of each object it receives (client-go's ``SetTransform``), applied before it is stored."""

INDEX_NAMESPACE = "namespace"
INDEX_CONTROLLER_UID = "controller-uid"
INDEX_LABEL = "label"

# client-go watches for a random 5..10 minutes so that many informers do not all reconnect at once.
_MIN_WATCH_SECONDS = 300


def identity_only(obj: dict[str, Any]) -> dict[str, Any]:
    """A :data:`Transform` keeping only what says *which* object and *which version*: ``apiVersion``, ``kind``
    and ``metadata.{namespace, name, uid, resourceVersion}``.

    For caches that only need to learn that something changed: a Secret's annotations may hold its data
    (``kubectl apply`` keeps the whole manifest in ``kubectl.kubernetes.io/last-applied-configuration``), and
    ``managedFields`` is most of an object's metadata.
    """
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    kept = {key: meta[key] for key in ("namespace", "name", "uid", "resourceVersion") if key in meta}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": kept}


MAX_INTERNED_LENGTH = 512
"""Strings up to this length are interned by :func:`compact` (longer ones are rarely shared: a JIT config,
an applied-configuration annotation)."""


def compact(obj: dict[str, Any]) -> dict[str, Any]:
    """The :data:`Transform` of the manager's caches: the object, in place, without ``metadata.managedFields``
    and with every string of up to :data:`MAX_INTERNED_LENGTH` characters interned.

    ``managedFields`` is server-side apply's bookkeeping: no reader of a cache needs it, and it is about half
    of a runner's EphemeralRunner and pod. The rest of a runner is the same strings as every other runner's
    (labels, annotations, image, command, owner, condition types...): interned, a thousand runners share one
    copy of each. ``sys.intern`` keeps no string alive on its own (CPython frees an interned string with its
    last reference), so the unique ones (names, uids, times) cost no more than before.

    Objects read from a cache are therefore not what the API server holds: **never write one back whole**
    (update/replace); patch it, or read it from the API first (:func:`~arc_scaleset.kube.retry.update_with_retry`).
    """
    meta = obj.get("metadata")
    if type(meta) is dict:
        meta.pop("managedFields", None)
    intern = sys.intern
    # Iterative, not recursive: a deeply nested custom resource must not reach the recursion limit.
    pending: builtins.list[Any] = [obj]
    while pending:
        node = pending.pop()
        if type(node) is dict:
            for key, value in node.items():
                kind = type(value)
                if kind is str:
                    if len(value) <= MAX_INTERNED_LENGTH:
                        node[key] = intern(value)  # same keys: changing values while iterating is safe
                elif kind is dict or kind is list:
                    pending.append(value)
        else:
            for index, value in enumerate(node):
                kind = type(value)
                if kind is str:
                    if len(value) <= MAX_INTERNED_LENGTH:
                        node[index] = intern(value)
                elif kind is dict or kind is list:
                    pending.append(value)
    return obj


def copy_of(obj: Object) -> dict[str, Any]:
    """A deep, mutable copy of a cached object (a JSON round trip: fast, and exact for API objects)."""
    copied: dict[str, Any] = orjson.loads(orjson.dumps(obj))
    return copied


# The key and index functions run several times for every object the store ingests, so they read the metadata
# inline rather than through an ObjectView (whose construction alone would show in the ingest rate). Mappings
# and lists are read as a view reads them: the exact-type test takes decoded JSON at the cost of a plain
# lookup, anything else goes through the tolerant helpers of kube.views. Names, namespaces and resource
# versions are taken as stored: the API server only ever returns strings there, and a view's per-field type
# test would cost a few percent of the ingest rate (bench/bench_informer.py).


def object_key(obj: Object) -> ObjectKey:
    meta = obj.get("metadata")
    if type(meta) is not dict:
        meta = metadata_of(obj)
    return (meta.get("namespace") or "", meta.get("name") or "")


def resource_version(obj: Object) -> str:
    meta = obj.get("metadata")
    if type(meta) is not dict:
        meta = metadata_of(obj)
    return meta.get("resourceVersion") or ""


def _namespace_index(obj: Object) -> Iterable[str]:
    meta = obj.get("metadata")
    if type(meta) is not dict:
        meta = metadata_of(obj)
    return (meta.get("namespace") or "",)


def _controller_uid_index(obj: Object) -> Iterable[str]:
    meta = obj.get("metadata")
    if type(meta) is not dict:
        meta = metadata_of(obj)
    refs = meta.get("ownerReferences")
    if not refs:
        return ()
    if type(refs) is not list:
        refs = sequence(refs)
    for ref in refs:
        if (type(ref) is dict or isinstance(ref, Mapping)) and ref.get("controller") is True and ref.get("uid"):
            return (ref["uid"],)
    return ()


def _label_index(obj: Object) -> Iterable[str]:
    meta = obj.get("metadata")
    if type(meta) is not dict:
        meta = metadata_of(obj)
    labels = meta.get("labels")
    if type(labels) is not dict:
        labels = mapping(labels)
    # A label key cannot contain "=", so "key=value" is unambiguous. Interned: every runner of a set has the same
    # labels, and each object keeps its index values (Store._indexed) for as long as it is cached.
    intern = sys.intern
    return [intern(f"{key}={value}") for key, value in labels.items()]


class Store:
    """Objects by ``(namespace, name)``, with indexes kept up to date on every change.

    Built-in indexes: by namespace, by the UID of the controller owner reference, by label; more with
    :meth:`add_index`. All reads are O(result). Only the informer writes to a store.
    """

    def __init__(self) -> None:
        self._objects: dict[ObjectKey, Object] = {}
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[ObjectKey]]] = {}
        # What each object was indexed under, so that removal needs no recomputation.
        self._indexed: dict[ObjectKey, dict[str, tuple[str, ...]]] = {}
        self.add_index(INDEX_NAMESPACE, _namespace_index)
        self.add_index(INDEX_CONTROLLER_UID, _controller_uid_index)
        self.add_index(INDEX_LABEL, _label_index)

    # -- reads ----------------------------------------------------------------------------------------

    def get(self, namespace: str | None, name: str) -> Object | None:
        """The object, or ``None``; ``namespace`` is ``None`` or ``""`` for cluster-scoped objects."""
        return self._objects.get((namespace or "", name))

    def list(self, namespace: str | None = None) -> builtins.list[Object]:
        """Every object, or those in ``namespace``."""
        if namespace is None:
            return list(self._objects.values())
        return self.by_index(INDEX_NAMESPACE, namespace)

    def by_owner(self, uid: str) -> builtins.list[Object]:
        """Objects whose controller owner reference has this UID: candidates only, since anyone can write a UID
        into an owner reference; :func:`arc_scaleset.kube.ownerrefs.children_of` keeps the owner's own."""
        return self.by_index(INDEX_CONTROLLER_UID, uid)

    def by_label(self, key: str, value: str) -> builtins.list[Object]:
        """Objects labelled ``key=value``."""
        return self.by_index(INDEX_LABEL, f"{key}={value}")

    def by_index(self, index: str, value: str) -> builtins.list[Object]:
        """Objects for which the index function of ``index`` returned ``value``."""
        try:
            keys = self._indices[index].get(value, ())
        except KeyError:
            raise KeyError(f"no index named {index!r}") from None
        objects = self._objects
        return [objects[key] for key in keys]

    def keys(self) -> builtins.list[ObjectKey]:
        return list(self._objects)

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    # -- indexes --------------------------------------------------------------------------------------

    def add_index(self, name: str, func: IndexFunc) -> None:
        """Add an index (existing objects are indexed at once); a name can be used once."""
        if name in self._indexers:
            raise ValueError(f"index {name!r} already exists")
        self._indexers[name] = func
        self._indices[name] = {}
        for key, obj in self._objects.items():
            self._index_one(name, func, key, obj)

    # -- writes (the informer's) ----------------------------------------------------------------------

    def upsert(self, obj: Object) -> Object | None:
        """Store ``obj`` (replacing the object of the same key); returns the replaced one."""
        key = object_key(obj)
        old = self._objects.get(key)
        if old is not None:
            self._unindex(key)
        self._objects[key] = obj
        for name, func in self._indexers.items():
            self._index_one(name, func, key, obj)
        return old

    def remove(self, key: ObjectKey) -> Object | None:
        """Drop the object with ``key``; returns it (``None`` when there was none)."""
        old = self._objects.pop(key, None)
        if old is not None:
            self._unindex(key)
        return old

    def _index_one(self, name: str, func: IndexFunc, key: ObjectKey, obj: Object) -> None:
        values = tuple(func(obj))
        if not values:
            return
        self._indexed.setdefault(key, {})[name] = values
        index = self._indices[name]
        for value in values:
            index.setdefault(value, set()).add(key)

    def _unindex(self, key: ObjectKey) -> None:
        for name, values in self._indexed.pop(key, {}).items():
            index = self._indices[name]
            for value in values:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]


AddHandler = Callable[[Object], None]
UpdateHandler = Callable[[Object, Object], None]
DeleteHandler = Callable[[Object], None]


@dataclass(eq=False)
class HandlerRegistration:
    """One registered set of handlers; :meth:`remove` stops further calls."""

    on_add: AddHandler | None
    on_update: UpdateHandler | None
    on_delete: DeleteHandler | None
    _informer: Informer | None = None

    def remove(self) -> None:
        if self._informer is not None:
            self._informer._handlers.remove(self)
            self._informer = None


class Informer:
    """Keeps :attr:`store` equal to the API's view of one resource (in one namespace, matching selectors).

    Handlers (:meth:`add_handler`) are called synchronously, in the informer's task, after the store has
    been updated, so a handler that reads the store sees the change. They must be quick and must not
    raise (an exception is logged and ignored). An update whose resourceVersion did not change is not
    reported. A delete found by a relist (the watch missed it) carries the last object the store held.

    ``metadata_only`` lists and watches ``PartialObjectMetadata`` (:meth:`KubeClient.list`); ``transform``
    replaces each received object before it is stored (e.g. :func:`identity_only`). ``give_up_on``: error types
    after which :meth:`run` stops trying and returns instead of retrying forever (e.g. ``Forbidden``, when the
    caller has a fallback); :attr:`gave_up` then holds the error.

    Run it with :meth:`run` (until cancelled) or :meth:`start`/:meth:`stop`.
    """

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        clock: Clock = REAL_CLOCK,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
        metadata_only: bool = False,
        transform: Transform | None = None,
        give_up_on: tuple[type[Exception], ...] = (),
    ) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace if resource.namespaced else None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.metadata_only = metadata_only
        self._transform = transform
        self._give_up_on = give_up_on
        self.gave_up: Exception | None = None
        """The error that made :meth:`run` return (one of ``give_up_on``), else ``None``."""
        self.store = Store()
        self._clock = clock
        self._rng = rng or random.Random()
        # client-go's reflector backs off from 0.8 s to 30 s; jitter keeps many informers from syncing up.
        self._backoff = backoff or Backoff(base=0.8, cap=30.0, jitter=0.5, rng=self._rng)
        self._handlers: list[HandlerRegistration] = []
        self._synced = asyncio.Event()
        self._resource_version = ""
        self._task: asyncio.Task[None] | None = None
        self._watch_abort: asyncio.Event | None = None
        self._resume_from: str | None = None
        self._gone_streak = 0
        self.lists = 0
        """How many times the resource was listed (1 after the first sync; more after 410 Gone)."""

    def __repr__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        selectors = ",".join(s for s in (self.label_selector, self.field_selector) if s)
        selector = f" [{selectors}]" if selectors else ""
        metadata = " (metadata)" if self.metadata_only else ""
        return f"Informer({self.resource}{metadata}{where}{selector})"

    # -- state ----------------------------------------------------------------------------------------

    @property
    def has_synced(self) -> bool:
        """True once the first list has been applied to the store."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        """Wait until :attr:`has_synced` (bound it with ``asyncio.timeout`` when that matters)."""
        await self._synced.wait()

    @property
    def running(self) -> bool:
        """Started with :meth:`start` and neither stopped nor ended (given up or failed)."""
        return self._task is not None and not self._task.done()

    @property
    def last_resource_version(self) -> str:
        """The resourceVersion the informer would resume watching from."""
        return self._resource_version

    # -- handlers -------------------------------------------------------------------------------------

    def add_handler(
        self,
        on_add: AddHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: DeleteHandler | None = None,
    ) -> HandlerRegistration:
        """Register handlers. A handler added after objects are cached first gets an add for each of them,
        so that it sees the same history as one registered before the informer started."""
        registration = HandlerRegistration(on_add, on_update, on_delete, self)
        self._handlers.append(registration)
        if on_add is not None:
            for obj in self.store.list():
                self._call(on_add, obj)
        return registration

    # -- running --------------------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        """Run in a new task (idempotent while it runs)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.run(), name=repr(self))
        return self._task

    async def stop(self) -> None:
        """Cancel the task started by :meth:`start` and wait for it to end."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    def restart_watch(self, *, from_resource_version: str | None = None) -> None:
        """End the current watch as if the server had closed it; the next one starts from
        ``from_resource_version`` (default: the last one seen). For tests and diagnostics: a stale version
        makes the server answer 410 Gone, which exercises the relist path."""
        self._resume_from = from_resource_version
        if self._watch_abort is not None:
            self._watch_abort.set()

    async def run(self) -> None:
        """List, then watch, forever (until cancelled); see the class docstring.

        Run again after a stop, it resumes watching from the last resourceVersion it saw (relisting only
        if the server has forgotten it), like a reconnect: handlers see exactly the changes they missed.
        """
        need_list = not self._resource_version
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                if not await self._watch():
                    # A watch that ends without a single event (not even a bookmark) is not normal:
                    # back off quietly rather than reconnect in a tight loop.
                    await self._clock.sleep(self._backoff.next_delay())
            except asyncio.CancelledError:
                raise
            except self._give_up_on as exc:
                log.warning("%r: %s; not watching it any more", self, _one_line(exc))
                self.gave_up = exc
                return
            except Gone as exc:
                log.info(
                    "%r: resourceVersion %s expired (%s); listing again", self, self._resource_version, exc.message
                )
                need_list = True
                # Relist at once after a healthy watch; a Gone straight after a fresh list waits first.
                self._gone_streak += 1
                if self._gone_streak > 1:
                    await self._clock.sleep(self._backoff.next_delay())
            except Exception as exc:  # an informer must outlive any failure
                delay = self._backoff.next_delay()
                what = "list" if need_list else "watch"
                log.warning("%r: %s failed: %s; retrying in %.1fs", self, what, _one_line(exc), delay)
                await self._clock.sleep(delay)

    async def _list(self) -> None:
        result = await self.client.list(
            self.resource,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            metadata_only=self.metadata_only,
        )
        self.lists += 1
        items = result.items if self._transform is None else [self._transform(item) for item in result.items]
        self._replace(items)
        self._resource_version = result.resource_version
        self._synced.set()

    async def _watch(self) -> bool:
        """One watch from the last resourceVersion; True if at least one event arrived."""
        if self._resume_from is not None:
            self._resource_version, self._resume_from = self._resume_from, None
        abort = self._watch_abort = asyncio.Event()
        timeout = int(_MIN_WATCH_SECONDS * (1.0 + self._rng.random()))
        stream = self.client.watch(
            self.resource,
            namespace=self.namespace,
            resource_version=self._resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=timeout,
            allow_bookmarks=True,
            metadata_only=self.metadata_only,
        )
        consume = asyncio.ensure_future(self._consume(stream))
        aborted = asyncio.ensure_future(abort.wait())
        try:
            await asyncio.wait((consume, aborted), return_when=asyncio.FIRST_COMPLETED)
        finally:
            aborted.cancel()
            if not consume.done():
                await cancel_and_wait(consume)
            self._watch_abort = None
        if consume.cancelled():
            return True  # aborted on purpose by restart_watch: not a failure
        progressed: bool = consume.result()
        return progressed

    async def _consume(self, stream: AsyncIterator[WatchEvent]) -> bool:
        progressed = False
        try:
            async for event in stream:
                if not progressed:
                    # The API answers again: the next failure starts from the smallest delay.
                    progressed = True
                    self._backoff.reset()
                    self._gone_streak = 0
                self._apply(event)
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
        return progressed

    # -- applying changes -----------------------------------------------------------------------------

    def _apply(self, event: WatchEvent) -> None:
        obj = event.object
        version = resource_version(obj)
        if event.type == "BOOKMARK":
            if version:
                self._resource_version = version
            return
        if self._transform is not None:
            obj = self._transform(obj)
        if event.type in ("ADDED", "MODIFIED"):
            old = self.store.upsert(obj)
            if old is None:
                self._dispatch_add(obj)
            elif resource_version(old) != version:
                self._dispatch_update(old, obj)
        elif event.type == "DELETED":
            if self.store.remove(object_key(obj)) is not None:
                self._dispatch_delete(obj)
        else:
            log.warning("%r: ignoring a watch event of unknown type %r", self, event.type)
            return
        if version:
            self._resource_version = version

    def _replace(self, items: list[dict[str, Any]]) -> None:
        """Make the store equal to a fresh list, reporting the differences as events."""
        fresh = {object_key(obj): obj for obj in items}
        for key in [key for key in self.store.keys() if key not in fresh]:  # noqa: SIM118 - not a dict
            gone = self.store.remove(key)
            if gone is not None:
                self._dispatch_delete(gone)
        for obj in items:
            old = self.store.upsert(obj)
            if old is None:
                self._dispatch_add(obj)
            elif resource_version(old) != resource_version(obj):
                self._dispatch_update(old, obj)

    def _dispatch_add(self, obj: Object) -> None:
        for handler in tuple(self._handlers):
            if handler.on_add is not None:
                self._call(handler.on_add, obj)

    def _dispatch_update(self, old: Object, new: Object) -> None:
        for handler in tuple(self._handlers):
            if handler.on_update is not None:
                self._call(handler.on_update, old, new)

    def _dispatch_delete(self, obj: Object) -> None:
        for handler in tuple(self._handlers):
            if handler.on_delete is not None:
                self._call(handler.on_delete, obj)

    def _call(self, handler: Callable[..., None], *args: Object) -> None:
        try:
            handler(*args)
        except Exception as exc:  # one broken handler must not stop the cache
            name = getattr(handler, "__qualname__", repr(handler))
            log.error("%r: event handler %s failed: %s", self, name, _one_line(exc))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
