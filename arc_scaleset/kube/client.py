"""A thin asynchronous Kubernetes API client: JSON over aiohttp, objects as plain dicts.

One :class:`KubeClient` per process (it is safe to share between tasks): it owns one aiohttp session and
connection pool, created lazily inside the running loop. Every call has a timeout; watches have a
read-inactivity bound instead. Failures raise the typed errors of :mod:`arc_scaleset.kube.errors`, whose
messages are a single line and never contain credentials.

Namespace rules: ``get``/``create``/``replace``/``patch``/``delete`` of a namespaced resource use the
client's default :attr:`KubeClient.namespace` when none is given; ``list``/``watch`` with
``namespace=None`` span all namespaces.
"""

from __future__ import annotations

import builtins
import collections
import copy
import enum
import logging
import os
import ssl
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Literal, Self

import aiohttp
import orjson
import yarl
from prometheus_client import CollectorRegistry, Counter

import arc_scaleset
from arc_scaleset.backoff import Backoff
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube import kubeconfig as _kubeconfig
from arc_scaleset.kube.credentials import ConnectionConfig
from arc_scaleset.kube.errors import (
    ApiError,
    ConnectionFailed,
    Gone,
    NotFound,
    RequestTimeout,
    TooManyRequests,
    TransportError,
    Unauthorized,
    error_from_status,
)
from arc_scaleset.kube.resources import Resource
from arc_scaleset.kube.views import ObjectView, string

log = logging.getLogger(__name__)

DEFAULT_USER_AGENT: Final = f"arc-scaleset/{arc_scaleset.__version__}"
_IDEMPOTENT_METHODS: Final = frozenset({"GET", "HEAD", "PUT", "DELETE"})
_RETRYABLE_STATUS: Final = frozenset({429, 500, 502, 503, 504})
_MAX_RETRY_AFTER: Final = 60.0
IDLE_CONNECTION_TIMEOUT: Final = 90.0
"""Seconds an idle connection is kept for reuse (Go's http.Transport default)."""
METADATA_LIST_ACCEPT: Final = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ACCEPT: Final = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
"""What a list or watch asks for to receive only the objects' metadata (``metadata_only``): kind
``PartialObjectMetadata``, no ``spec``, ``data`` or ``status``. The same RBAC verbs as a full read apply."""


class PatchType(enum.StrEnum):
    """The ``Content-Type`` that selects the patch semantics."""

    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    APPLY = "application/apply-patch+yaml"
    STRATEGIC = "application/strategic-merge-patch+json"


@dataclass
class ObjectList:
    """The items of a (possibly multi-page) list and the collection's ``resourceVersion`` to watch from.

    Items carry ``apiVersion`` and ``kind`` (the server omits them from list items; the client fills them in).
    """

    items: list[dict[str, Any]]
    resource_version: str


@dataclass
class WatchEvent:
    """One watch event: ``type`` is ``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK``."""

    type: str
    object: dict[str, Any]


@dataclass(frozen=True)
class Preconditions:
    """Delete only if the object still has this ``uid`` / ``resourceVersion`` (else :class:`Conflict`)."""

    uid: str | None = None
    resource_version: str | None = None


class _TokenBucket:
    """Client-side rate limit (client-go's ``qps``/``burst``): a token bucket on the injected clock.

    Callers reserve a token at once (the balance may go negative) and sleep until it would have been
    earned, so waiters are served in arrival order without a lock.
    """

    def __init__(self, qps: float, burst: int, clock: Clock) -> None:
        self._qps = qps
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.monotonic()

    async def acquire(self) -> None:
        self._refill()
        self._tokens -= 1.0
        if self._tokens < 0:
            await self._clock.sleep(-self._tokens / self._qps)

    def delay(self) -> float:
        """Seconds a request made now would wait for its token (0: it would pass at once); reserves nothing."""
        self._refill()
        return max(0.0, (1.0 - self._tokens) / self._qps)

    def _refill(self) -> None:
        now = self._clock.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now


RateLimitKey = tuple[str, ...]
"""Which token bucket a request draws on (:func:`rate_limit_key`)."""


def rate_limit_key(resource: Resource | None, verb: str) -> RateLimitKey:
    """The bucket of a request for ``verb`` on ``resource`` (``None``: a raw path), as controller-runtime gives
    ARC one bucket per REST client built from the same QPS and burst (pure).

    controller-runtime's client builds one ``rest.RESTClient`` per resource type, each with its own token
    bucket, and its status and other subresource requests go through the object's client; every informer
    lists and watches through a REST client of its own. So: one bucket per resource for gets and writes, one
    more per resource for lists and watches (an informer's requests, never queued behind the writes), and one
    for raw paths (discovery and the like).
    """
    if resource is None:
        return ("raw",)
    role = "watch" if verb in ("list", "watch") else "write"
    return (role, resource.group, resource.plural)


def _one_bucket(resource: Resource | None, verb: str) -> RateLimitKey:
    """Every request on one bucket (:meth:`KubeClient.with_rate_limit`)."""
    return ()


class _RateLimits:
    """Client-side rate limits: one :class:`_TokenBucket` of ``qps``/``burst`` per key ``key`` gives a request,
    each created on its first request."""

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Clock,
        key: Callable[[Resource | None, str], RateLimitKey] = rate_limit_key,
    ) -> None:
        self._qps = qps
        self._burst = burst
        self._clock = clock
        self._key = key
        self._buckets: dict[RateLimitKey, _TokenBucket] = {}

    async def acquire(self, resource: Resource | None, verb: str) -> None:
        """Wait for a token of the request's bucket."""
        await self._bucket(resource, verb).acquire()

    def delay(self, resource: Resource | None, verb: str) -> float:
        """Seconds a request made now would wait for a token of its bucket (:meth:`_TokenBucket.delay`)."""
        return self._bucket(resource, verb).delay()

    def _bucket(self, resource: Resource | None, verb: str) -> _TokenBucket:
        key = self._key(resource, verb)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _TokenBucket(self._qps, self._burst, self._clock)
        return bucket


_COUNTERS: weakref.WeakKeyDictionary[CollectorRegistry, Counter] = weakref.WeakKeyDictionary()


def _requests_counter(registry: CollectorRegistry) -> Counter:
    # Several clients may share one registry; a metric name can be registered only once per registry.
    counter = _COUNTERS.get(registry)
    if counter is None:
        counter = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests to the Kubernetes API, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=registry,
        )
        _COUNTERS[registry] = counter
    return counter


def _json_default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=_json_default)


class KubeClient:
    """Asynchronous access to one Kubernetes API server.

    Options (keyword-only, accepted by every constructor):

    - ``qps``/``burst``: client-side rate limit, one token bucket of that size per resource for gets and
      writes and one per resource for lists and watches (:func:`rate_limit_key`, as controller-runtime's REST
      clients per type); off unless ``qps`` is given (``burst`` defaults to ``max(1, 2*qps)``).
    - ``request_timeout``: seconds for a whole non-watch request (default 30).
    - ``watch_idle_timeout``: seconds a watch may stay silent before it fails with
      :class:`RequestTimeout` (default 330; with bookmarks on, the server speaks about once a minute).
    - ``retries``: how many times an idempotent request (GET, PUT, DELETE) is retried after 429 or 5xx,
      with exponential backoff or the server's ``Retry-After`` (default 3). Non-idempotent requests
      (POST, PATCH) are never retried.
    - ``clock``, ``registry`` (for ``rest_client_requests_total``; a private one when ``None``),
      ``user_agent``, ``connection_limit``: how many connections requests use at most (default 32); more
      requests at once wait for a free one. Watches hold a connection each, from a pool of their own, so
      they never take one from requests.

    Connections are kept for reuse while idle for up to 90 s (Go's default): a TLS handshake costs both
    sides more CPU than a small request, and a burst after a quiet minute should not pay one per request.
    """

    def __init__(
        self,
        config: ConnectionConfig,
        *,
        qps: float | None = None,
        burst: int | None = None,
        request_timeout: float = 30.0,
        watch_idle_timeout: float = 330.0,
        retries: int = 3,
        clock: Clock = REAL_CLOCK,
        registry: CollectorRegistry | None = None,
        user_agent: str | None = None,
        connection_limit: int = 32,
    ) -> None:
        if request_timeout <= 0 or watch_idle_timeout <= 0:
            raise ValueError("request_timeout and watch_idle_timeout must be positive")
        if qps is not None and qps <= 0:
            raise ValueError("qps must be positive (or None for no client-side limit)")
        self._config = config
        self.server: str = config.server
        self.namespace: str = config.namespace
        self.request_counts: collections.Counter[tuple[str, str]] = collections.Counter()
        """Requests sent (retries included), by verb and resource (``plural`` or ``plural/subresource``)."""
        self.namespace_request_counts: collections.Counter[tuple[str, str, str]] = collections.Counter()
        """The same by verb, resource and namespace (``""``: cluster-wide): what one tenant's objects cost."""
        self._base_url = yarl.URL(config.server)
        self._host = self._base_url.authority
        self._ssl = config.ssl_context()  # raises KubeconfigError now rather than on the first request
        self._request_timeout = request_timeout
        self._watch_idle_timeout = watch_idle_timeout
        self._retries = max(0, retries)
        self._clock = clock
        self._limiter = (
            _RateLimits(qps, burst if burst is not None else max(1, int(2 * qps)), clock) if qps is not None else None
        )
        self._requests_total = _requests_counter(registry if registry is not None else CollectorRegistry())
        self._user_agent = user_agent or DEFAULT_USER_AGENT
        if connection_limit < 1:
            raise ValueError("connection_limit must be at least 1")
        self._connection_limit = connection_limit
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._closed = False

    # -- construction -----------------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str] | None = None, *, context: str | None = None, **options: Any
    ) -> KubeClient:
        """A client for ``context`` (default: current) of the kubeconfig at ``path`` (default: as kubectl)."""
        clock = options.get("clock", REAL_CLOCK)
        return cls(_kubeconfig.load_kubeconfig(path, context=context, clock=clock), **options)

    @classmethod
    def in_cluster(cls, **options: Any) -> KubeClient:
        """A client for the pod's own service account (token re-read from disk as it rotates)."""
        clock = options.get("clock", REAL_CLOCK)
        return cls(_kubeconfig.load_in_cluster(clock=clock), **options)

    @classmethod
    def from_environment(cls, kubeconfig: str | None = None, **options: Any) -> KubeClient:
        """The explicit ``kubeconfig``, else in-cluster when in a pod, else ``$KUBECONFIG``, else ``~/.kube/config``."""
        if kubeconfig:
            return cls.from_kubeconfig(kubeconfig, **options)
        if _kubeconfig.in_cluster_available():
            return cls.in_cluster(**options)
        clock = options.get("clock", REAL_CLOCK)
        return cls(_kubeconfig.load_kubeconfig(None, clock=clock), **options)

    def with_rate_limit(self, qps: float, burst: int | None = None) -> KubeClient:
        """A client for the same server, on this one's connections and request counts, whose requests draw on a
        rate budget of their own: one bucket of ``qps``/``burst`` for all of them, whatever their resource.

        For background work that must never queue ahead of this client's requests, nor they ahead of it: a
        watch of many namespaces relisting after a failover waits for its own tokens only. The two share their
        connection pools: close this client, not the one returned, and stop using that one when this one closes.
        """
        if qps <= 0:
            raise ValueError("qps must be positive")
        limited = copy.copy(self)
        limited._limiter = _RateLimits(
            qps, burst if burst is not None else max(1, int(2 * qps)), self._clock, key=_one_bucket
        )
        return limited

    def rate_limit_delay(self, resource: Resource | None, verb: str) -> float:
        """Seconds a request for ``verb`` on ``resource`` made now would wait for the client-side rate limit (0
        without one, or with a token to spare). Reserves nothing: for a caller that would rather do other work
        than queue a request that can wait (an EphemeralRunner's status while its bucket is busy with creates)."""
        return self._limiter.delay(resource, verb) if self._limiter is not None else 0.0

    def __repr__(self) -> str:
        return f"KubeClient(server={self.server!r}, namespace={self.namespace!r})"

    # -- lifecycle --------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the connection pool; the client cannot be used afterwards."""
        self._closed = True
        sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            await session.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _http(self, purpose: Literal["requests", "watches"] = "requests") -> aiohttp.ClientSession:
        """The session for ``purpose``: a bounded pool for requests, an unbounded one for watches."""
        if self._closed:
            raise RuntimeError("KubeClient is closed")
        session = self._sessions.get(purpose)
        if session is None or session.closed:
            limit = self._connection_limit if purpose == "requests" else 0  # 0: no limit
            connector = aiohttp.TCPConnector(limit=limit, ssl=self._ssl, keepalive_timeout=IDLE_CONNECTION_TIMEOUT)
            session = self._sessions[purpose] = aiohttp.ClientSession(
                connector=connector,
                headers={"User-Agent": self._user_agent, "Accept": "application/json"},
                auto_decompress=True,
            )
        return session

    # -- verbs ------------------------------------------------------------------------------------

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None, subresource: str | None = None
    ) -> dict[str, Any]:
        """The object ``name`` (or its ``subresource``); :class:`NotFound` when it does not exist."""
        path = resource.path(namespace=self._ns(resource, namespace), name=name, subresource=subresource)
        result = await self._call("GET", path, resource=resource, verb="get", counted=_counted(resource, subresource))
        return _as_object(result)

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = 500,
        resource_version: str | None = None,
        metadata_only: bool = False,
    ) -> ObjectList:
        """All matching objects (``namespace=None``: in every namespace), following ``continue`` pages.

        ``limit`` is the page size (``None``: one unpaged request). When a continue token expires between
        pages (410), the list restarts once without paging, as client-go's pager does, so the result is
        always one consistent snapshot. ``metadata_only``: the items are ``PartialObjectMetadata`` (metadata
        alone; a Secret's data never crosses the wire).
        """
        path = resource.path(namespace=namespace if resource.namespaced else None)
        base: dict[str, str] = {}
        if label_selector:
            base["labelSelector"] = label_selector
        if field_selector:
            base["fieldSelector"] = field_selector
        if resource_version is not None:
            base["resourceVersion"] = resource_version
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            params = dict(base)
            if limit is not None:
                params["limit"] = str(limit)
            if token:
                params["continue"] = token
            try:
                page = _as_object(
                    await self._call(
                        "GET",
                        path,
                        resource=resource,
                        params=params,
                        verb="list",
                        counted=resource.plural,
                        accept=METADATA_LIST_ACCEPT if metadata_only else None,
                    )
                )
            except Gone:
                if not token:
                    raise
                log.info("continue token for %s expired while paging; listing again without paging", resource)
                items, token, limit = [], None, None
                continue
            for item in page.get("items") or []:
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
                items.append(item)
            page_view = ObjectView(page)
            token = string(page_view.metadata.get("continue")) or None
            if not token:
                return ObjectList(items=items, resource_version=page_view.resource_version)

    async def create(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Create ``obj``; :class:`AlreadyExists` when the name is taken. The namespace defaults to
        ``obj.metadata.namespace``, then to the client's namespace.

        ``dry_run=True`` sends ``dryRun=All``: the API server runs defaulting, admission (webhooks that
        declare ``sideEffects: None`` or ``NoneOnDryRun``, quota, policy) and validation, answers with the
        object it would have stored or the error it would have raised, and persists nothing. A webhook that
        does not support dry runs makes the server refuse the request itself (400 :class:`BadRequest`).
        """
        ns = self._ns(resource, namespace or ObjectView(obj).namespace)
        params: dict[str, str] = {}
        if field_manager:
            params["fieldManager"] = field_manager
        if dry_run:
            params["dryRun"] = "All"
        body = _with_type(obj, resource)
        result = await self._call(
            "POST",
            resource.path(namespace=ns),
            resource=resource,
            body=body,
            params=params or None,
            verb="create",
            counted=resource.plural,
        )
        return _as_object(result)

    async def replace(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """PUT ``obj`` (name and namespace from its metadata). Its ``metadata.resourceVersion`` makes this an
        optimistic-concurrency write: :class:`Conflict` when the object changed since it was read."""
        view = ObjectView(obj)
        name = view.name
        if not name:
            raise ValueError(f"replace of {resource}: the object has no metadata.name")
        path = resource.path(namespace=self._ns(resource, view.namespace), name=name, subresource=subresource)
        params = {"fieldManager": field_manager} if field_manager else None
        result = await self._call(
            "PUT",
            path,
            resource=resource,
            body=_with_type(obj, resource),
            params=params,
            verb="update",
            counted=_counted(resource, subresource),
        )
        return _as_object(result)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | builtins.list[Any],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Patch ``name`` (default: a JSON merge patch). ``force`` applies to server-side apply only.

        A merge patch carrying ``metadata.resourceVersion`` is an optimistic lock (:class:`Conflict` on a
        stale version); a JSON patch can guard itself with a ``test`` op. ``dry_run=True`` sends ``dryRun=All``
        (as :meth:`create`): the answer is the object or the error the write would have made; nothing is stored.
        """
        if force is not None and patch_type is not PatchType.APPLY:
            raise ValueError("force is only meaningful for server-side apply (PatchType.APPLY)")
        if patch_type is PatchType.APPLY and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        path = resource.path(namespace=self._ns(resource, namespace), name=name, subresource=subresource)
        params: dict[str, str] = {}
        if field_manager:
            params["fieldManager"] = field_manager
        if force is not None:
            params["force"] = "true" if force else "false"
        if dry_run:
            params["dryRun"] = "All"
        result = await self._call(
            "PATCH",
            path,
            resource=resource,
            body=patch,
            content_type=str(patch_type),
            params=params,
            verb="patch",
            counted=_counted(resource, subresource),
        )
        return _as_object(result)

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        preconditions: Preconditions | None = None,
        grace_period_seconds: int | None = None,
        missing_ok: bool = False,
    ) -> dict[str, Any] | None:
        """Delete ``name``. Returns the object when the server still holds it (finalizers, graceful pod
        deletion) and ``None`` when it answered with a success ``Status`` (gone at once).

        :class:`NotFound` when it does not exist, unless ``missing_ok`` (an object already gone counts as
        deleted, and ``None`` is returned); :class:`Conflict` when ``preconditions`` do not hold.
        ``propagation_policy`` is ``"Foreground"``, ``"Background"`` or ``"Orphan"``.
        """
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy is not None:
            body["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if preconditions is not None:
            pre: dict[str, str] = {}
            if preconditions.uid is not None:
                pre["uid"] = preconditions.uid
            if preconditions.resource_version is not None:
                pre["resourceVersion"] = preconditions.resource_version
            body["preconditions"] = pre
        path = resource.path(namespace=self._ns(resource, namespace), name=name)
        try:
            result = await self._call(
                "DELETE", path, resource=resource, body=body, verb="delete", counted=resource.plural
            )
        except NotFound:
            if missing_ok:
                return None
            raise
        obj = _as_object(result) if result is not None else None
        if obj is None or obj.get("kind") == "Status":
            return None
        return obj

    async def delete_collection(
        self, resource: Resource, *, namespace: str, label_selector: str
    ) -> builtins.list[dict[str, Any]]:
        """Delete every object of ``resource`` in ``namespace`` that ``label_selector`` matches, in one request
        (the ``deletecollection`` verb). Returns the metadata (``PartialObjectMetadata``) of the objects it
        deleted: never a Secret's data, and a few hundred bytes per object rather than whole pods.

        One request however many objects match: a scale-down that deletes N runners this way costs the
        client's rate limit one request per batch instead of N (docs/controllers.md). The selector must be
        non-empty: an empty one would delete the whole collection.
        """
        if not label_selector.strip():
            raise ValueError(f"delete_collection of {resource} needs a label selector")
        path = resource.path(namespace=self._ns(resource, namespace))
        body = {"apiVersion": "v1", "kind": "DeleteOptions"}
        result = await self._call(
            "DELETE",
            path,
            resource=resource,
            body=body,
            params={"labelSelector": label_selector},
            verb="deletecollection",
            counted=resource.plural,
            accept=METADATA_LIST_ACCEPT,
        )
        listed = _as_object(result) if result is not None else {}
        return [item for item in listed.get("items") or () if isinstance(item, dict)]

    async def request_raw(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        accept: str | None = None,
    ) -> Any:
        """Any API path (discovery, ``/version``, odd endpoints): decoded JSON, text, or ``None`` when empty.

        ``accept``: the ``Accept`` header, e.g. ``application/json;as=Table;v=v1;g=meta.k8s.io`` for the rows
        and printer columns ``kubectl get`` shows."""
        if not path.startswith("/"):
            raise ValueError(f"request_raw needs an absolute API path, got {path!r}")
        method = method.upper()
        return await self._call(
            method, path, resource=None, body=body, params=params, verb=method.lower(), counted=path, accept=accept
        )

    def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
        metadata_only: bool = False,
    ) -> AsyncIterator[WatchEvent]:
        """Stream changes to ``resource`` after ``resource_version`` (``namespace=None``: all namespaces).

        Ends normally when the server closes the stream (after ``timeout_seconds``; when ``None``, the
        client asks for just under ``watch_idle_timeout`` so a healthy quiet watch ends before it is judged
        dead). Raises :class:`Gone` when ``resource_version`` is too old (an HTTP 410 or an in-stream
        ``ERROR`` event with code 410) -- relist then; :class:`RequestTimeout` when the stream stays silent
        longer than ``watch_idle_timeout``; :class:`ConnectionFailed` when it breaks.
        Use it as ``async for event in client.watch(...)``; breaking out closes the stream.
        ``metadata_only``: the events carry ``PartialObjectMetadata`` objects (metadata alone).
        """
        params: dict[str, str] = {"watch": "true"}
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if timeout_seconds is None:
            timeout_seconds = max(1, int(self._watch_idle_timeout * 0.9))
        params["timeoutSeconds"] = str(timeout_seconds)
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        path = resource.path(namespace=namespace if resource.namespaced else None)
        return self._watch_stream(resource, path, params, accept=METADATA_ACCEPT if metadata_only else None)

    # -- internals --------------------------------------------------------------------------------

    def _ns(self, resource: Resource, namespace: str | None) -> str | None:
        if not resource.namespaced:
            return None
        return namespace or self.namespace

    def _headers(
        self, *, refresh: bool = False, content_type: str | None = None, accept: str | None = None
    ) -> dict[str, str]:
        headers: dict[str, str] = {}
        auth = self._config.token_source.authorization(refresh=refresh)
        if auth:
            headers["Authorization"] = auth
        if content_type:
            headers["Content-Type"] = content_type
        if accept:
            headers["Accept"] = accept
        return headers

    async def _call(
        self,
        method: str,
        path: str,
        *,
        resource: Resource | None,
        verb: str,
        counted: str,
        body: Any = None,
        content_type: str | None = None,
        params: Mapping[str, str] | None = None,
        accept: str | None = None,
    ) -> Any:
        """One logical request: rate limit, send, retry what may be retried, decode or raise."""
        url = self._base_url.with_path(path, encoded=True)
        data = _dumps(body) if body is not None else None
        if data is not None and content_type is None:
            content_type = "application/json"
        retries_left = self._retries if method in _IDEMPOTENT_METHODS else 0
        backoff = Backoff(base=0.2, cap=5.0, jitter=0.2)
        refreshed = False
        request_label = f"{method} {path}"
        timeout = aiohttp.ClientTimeout(total=self._request_timeout)
        while True:
            if self._limiter is not None:
                await self._limiter.acquire(resource, verb)
            self.request_counts[(verb, counted)] += 1
            self.namespace_request_counts[(verb, counted, namespace_of_path(path))] += 1
            try:
                async with self._http().request(
                    method,
                    url,
                    params=params or None,
                    data=data,
                    headers=self._headers(refresh=refreshed, content_type=content_type, accept=accept),
                    timeout=timeout,
                    server_hostname=self._config.tls_server_name,
                    proxy=self._config.proxy_url,
                ) as response:
                    payload = await response.read()
                    status = response.status
                    retry_after = response.headers.get("Retry-After")
                    response_type = response.headers.get("Content-Type", "")
            except (aiohttp.ClientError, TimeoutError) as exc:
                self._requests_total.labels(code="<error>", method=method, host=self._host).inc()
                raise self._transport_error(exc, method, path) from None
            self._requests_total.labels(code=str(status), method=method, host=self._host).inc()

            if status < 400:
                return _decode(payload, response_type)
            error = error_from_status(status, payload, request=request_label, retry_after=retry_after)
            if isinstance(error, Unauthorized) and not refreshed and self._config.token_source.rotates:
                # A rotated service-account token: re-read it and try once more (the request was not
                # processed, so this is safe for every verb).
                refreshed = True
                continue
            if status in _RETRYABLE_STATUS and retries_left > 0:
                retries_left -= 1
                delay = backoff.next_delay()
                if isinstance(error, TooManyRequests) and error.retry_after is not None:
                    delay = min(error.retry_after, _MAX_RETRY_AFTER)
                log.debug("%s: %s; retrying in %.2fs", request_label, error.reason, delay)
                await self._clock.sleep(delay)
                continue
            if isinstance(error, Unauthorized):
                raise Unauthorized(
                    error.status,
                    error.reason,
                    f"{error.message} (credentials from {self._config.source or 'the configuration'} were rejected: "
                    "token expired or unknown, or client certificate not trusted)",
                    error.details,
                    request=request_label,
                )
            raise error

    async def _watch_stream(
        self, resource: Resource, path: str, params: dict[str, str], *, accept: str | None = None
    ) -> AsyncGenerator[WatchEvent, None]:
        url = self._base_url.with_path(path, encoded=True)
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._request_timeout, sock_read=self._watch_idle_timeout
        )
        request_label = f"WATCH {path}"
        refreshed = False
        while True:
            if self._limiter is not None:
                await self._limiter.acquire(resource, "watch")
            self.request_counts[("watch", resource.plural)] += 1
            self.namespace_request_counts[("watch", resource.plural, namespace_of_path(path))] += 1
            try:
                response = await self._http("watches").request(
                    "GET",
                    url,
                    params=params,
                    headers=self._headers(refresh=refreshed, accept=accept),
                    timeout=timeout,
                    server_hostname=self._config.tls_server_name,
                    proxy=self._config.proxy_url,
                )
            except (aiohttp.ClientError, TimeoutError) as exc:
                self._requests_total.labels(code="<error>", method="GET", host=self._host).inc()
                raise self._transport_error(exc, "GET", path, watch=True) from None
            self._requests_total.labels(code=str(response.status), method="GET", host=self._host).inc()
            if response.status == 401 and not refreshed and self._config.token_source.rotates:
                response.release()
                refreshed = True
                continue
            break

        async with response:
            if response.status >= 400:
                try:
                    payload = await response.read()
                except (aiohttp.ClientError, TimeoutError):
                    payload = b""
                raise error_from_status(response.status, payload, request=request_label)
            buffer = bytearray()
            try:
                async for chunk in response.content.iter_any():
                    buffer += chunk
                    start = 0
                    while (end := buffer.find(b"\n", start)) >= 0:
                        line = bytes(buffer[start:end])
                        start = end + 1
                        if line.strip():
                            yield _watch_event(line, resource, request_label)
                    del buffer[:start]
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise self._transport_error(exc, "GET", path, watch=True) from None
            if buffer.strip():
                yield _watch_event(bytes(buffer), resource, request_label)

    def _transport_error(self, exc: BaseException, method: str, path: str, *, watch: bool = False) -> TransportError:
        if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
            if watch and not isinstance(exc, aiohttp.ConnectionTimeoutError):
                return RequestTimeout(
                    f"watch {path} on {self.server}: silent for {self._watch_idle_timeout:g}s, presumed dead"
                )
            if isinstance(exc, aiohttp.ConnectionTimeoutError):
                return RequestTimeout(f"cannot reach {self.server}: connect timed out after {self._request_timeout:g}s")
            return RequestTimeout(f"{method} {path} on {self.server}: no response within {self._request_timeout:g}s")
        detail: str
        if isinstance(exc, aiohttp.ClientConnectorCertificateError):
            cert_error = exc.certificate_error
            reason = getattr(cert_error, "verify_message", None) or getattr(cert_error, "reason", None) or cert_error
            detail = f"TLS certificate verification failed ({reason}); is the certificate authority right?"
        elif isinstance(exc, aiohttp.ClientConnectorSSLError | aiohttp.ClientSSLError):
            detail = f"TLS handshake failed ({_ssl_reason(exc)})"
        elif isinstance(exc, aiohttp.ClientConnectorDNSError):
            detail = f"cannot resolve host {self._base_url.host}"
        elif isinstance(exc, aiohttp.ClientConnectorError):
            detail = _os_reason(exc.os_error)
        elif isinstance(exc, aiohttp.ServerDisconnectedError):
            detail = "the server closed the connection"
        elif isinstance(exc, aiohttp.ClientPayloadError):
            detail = "the response was cut off"
        elif isinstance(exc, aiohttp.ClientOSError):
            detail = _os_reason(exc)
        else:
            detail = str(exc) or type(exc).__name__
        if isinstance(exc, aiohttp.ClientConnectorError):
            return ConnectionFailed(f"cannot reach {self.server}: {detail}")
        return ConnectionFailed(f"{method} {path} on {self.server}: {detail}")


def namespace_of_path(path: str) -> str:
    """The namespace an API path is in, ``""`` for a cluster-wide one (pure):
    ``/api/v1/namespaces/team-a/secrets/gh`` is in ``team-a``; ``/api/v1/namespaces/team-a`` (the namespace
    itself) and ``/api/v1/secrets`` in none."""
    parts = path.split("/")
    for index, part in enumerate(parts[:-2]):
        if part == "namespaces":
            return parts[index + 1]
    return ""


def _counted(resource: Resource, subresource: str | None) -> str:
    return f"{resource.plural}/{subresource}" if subresource else resource.plural


def _os_reason(error: OSError) -> str:
    # asyncio's strerror ("Connect call failed (...)") hides the cause; the errno names it.
    text = (os.strerror(error.errno) if error.errno else error.strerror) or str(error) or type(error).__name__
    return text[:1].lower() + text[1:]


def _ssl_reason(exc: BaseException) -> str:
    inner = getattr(exc, "os_error", None) or exc
    if isinstance(inner, ssl.SSLError):
        return str(inner.reason or inner.strerror or inner).lower().replace("_", " ")
    return str(inner) or type(inner).__name__


def _decode(payload: bytes, content_type: str) -> Any:
    if not payload:
        return None
    if "json" in content_type or payload[:1] in (b"{", b"["):
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError:
            pass
    return payload.decode("utf-8", errors="replace")


def _as_object(result: Any) -> dict[str, Any]:
    if not isinstance(result, dict):
        raise ApiError(
            0, "UnexpectedResponse", f"expected a JSON object from the API server, got {type(result).__name__}"
        )
    return result


def _with_type(obj: Mapping[str, Any], resource: Resource) -> dict[str, Any]:
    body = dict(obj)
    body.setdefault("apiVersion", resource.api_version)
    body.setdefault("kind", resource.kind)
    return body


def _watch_event(line: bytes, resource: Resource, request_label: str) -> WatchEvent:
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError:
        raise ApiError(0, "UnexpectedResponse", f"{request_label}: undecodable watch event") from None
    event_type = raw.get("type") if isinstance(raw, dict) else None
    obj = raw.get("object") if isinstance(raw, dict) else None
    if not isinstance(event_type, str) or not isinstance(obj, dict):
        raise ApiError(0, "UnexpectedResponse", f"{request_label}: malformed watch event")
    if event_type == "ERROR":
        code = obj.get("code")
        raise error_from_status(code if isinstance(code, int) else 500, obj, request=request_label)
    if event_type != "BOOKMARK":
        obj.setdefault("apiVersion", resource.api_version)
        obj.setdefault("kind", resource.kind)
    return WatchEvent(type=event_type, object=obj)
