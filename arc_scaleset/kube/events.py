"""Recording Kubernetes Events (``events.k8s.io/v1``) about objects, without flooding the API.

An event repeated for the same object (same type, reason, action and note) within ``dedup_window``
becomes a series: the existing Event's ``series.count`` and ``series.lastObservedTime`` are bumped instead
of creating another Event. Each object also has its own token bucket (like client-go's spam filter:
a burst of 25, then one event per 5 minutes), so a hot error loop costs a bounded number of writes.

Recording never raises into the caller: an event is a side note, and a failure to write one (RBAC, a
namespace being deleted, an API hiccup) is logged and dropped.

A note often quotes an error from GitHub or a proxy, so it is masked exactly as a log line is
(:func:`arc_scaleset.observability.logging.redact`) before anything else: Events are readable by anyone who
can list them in the namespace, and no credential may reach them (docs/github.md, "Secrets").
"""

from __future__ import annotations

import collections
import datetime as dt
import logging
import secrets
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import KubeError, NotFound
from arc_scaleset.kube.resources import EVENTS
from arc_scaleset.kube.views import ObjectView
from arc_scaleset.observability.logging import redact

log = logging.getLogger(__name__)

NOTE_LIMIT_BYTES: Final = 1024
_SHORT_FIELD_LIMIT: Final = 128
_MAX_TRACKED: Final = 4096

EventType = Literal["Normal", "Warning"]


def micro_time(moment: dt.datetime) -> str:
    """``metav1.MicroTime`` text: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def truncate_utf8(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, on a character boundary (the API counts bytes)."""
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", errors="ignore")


@dataclass
class _Series:
    namespace: str
    name: str
    count: int
    last_seen: float


class _Bucket:
    def __init__(self, burst: int, refill_seconds: float, now: float) -> None:
        self.tokens = float(burst)
        self.updated = now
        self._burst = burst
        self._refill = refill_seconds

    def take(self, now: float) -> bool:
        self.tokens = min(self._burst, self.tokens + (now - self.updated) / self._refill)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class EventRecorder:
    """Writes Events on behalf of ``component`` (the ``reportingController``, e.g. ``"arc-scaleset.dev/controller"``).

    ``instance`` is the ``reportingInstance`` (default: the host name, i.e. the pod name in a cluster).
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        component: str,
        clock: Clock = REAL_CLOCK,
        instance: str | None = None,
        dedup_window: float = 600.0,
        burst: int = 25,
        refill_seconds: float = 300.0,
    ) -> None:
        if not component:
            raise ValueError("an EventRecorder needs a component name")
        self._client = client
        self._component = component[:_SHORT_FIELD_LIMIT]
        self._instance = (instance or socket.gethostname() or component)[:_SHORT_FIELD_LIMIT]
        self._clock = clock
        self._dedup_window = dedup_window
        self._burst = burst
        self._refill = refill_seconds
        self._series: collections.OrderedDict[tuple[str, ...], _Series] = collections.OrderedDict()
        self._buckets: collections.OrderedDict[tuple[str, str, str], _Bucket] = collections.OrderedDict()
        self.dropped = 0
        """Events not written because of the per-object limit or an API error (for tests and metrics)."""

    async def event(
        self,
        regarding: Mapping[str, Any],
        *,
        type: EventType,
        reason: str,
        note: str,
        action: str,
    ) -> None:
        """Record that ``action`` happened to ``regarding`` (an object as read from the API).

        ``reason`` is a short CamelCase cause, ``note`` the human explanation (masked of secrets, then cut to
        1024 bytes), ``type``
        ``"Normal"`` or ``"Warning"``. Never raises (except on a programming error in the arguments).
        """
        if type not in ("Normal", "Warning"):
            raise ValueError(f"event type must be Normal or Warning, not {type!r}")
        view = ObjectView(regarding)
        name, namespace = view.name, view.namespace
        if not name:
            raise ValueError("cannot record an event about an object without metadata.name")
        # Masked before it is cut, so a secret across the cut cannot leave its first half behind.
        note = truncate_utf8(redact(note), NOTE_LIMIT_BYTES)
        reason = reason[:_SHORT_FIELD_LIMIT]
        action = action[:_SHORT_FIELD_LIMIT]
        object_key = (view.uid, namespace, name)
        series_key = (*object_key, view.kind, type, reason, action, note)
        now = self._clock.monotonic()

        series = self._series.get(series_key)
        repeat = series is not None and now - series.last_seen <= self._dedup_window
        if series is not None and repeat:
            # Counted even when the write below is rate-limited, so the next write carries the true count.
            series.count += 1
            series.last_seen = now
            self._series.move_to_end(series_key)
        if not self._allow(object_key, now):
            self.dropped += 1
            log.debug("event %s for %s/%s dropped by the per-object rate limit", reason, namespace, name)
            return
        try:
            if series is not None and repeat:
                try:
                    await self._bump(series)
                    return
                except NotFound:
                    # The Event expired (the API server's event TTL) or was deleted: start a new one.
                    pass
            created = await self._create(regarding, type=type, reason=reason, note=note, action=action)
            created_view = ObjectView(created)
            self._remember(
                series_key,
                _Series(
                    namespace=created_view.namespace,
                    name=created_view.name,
                    count=1,
                    last_seen=now,
                ),
            )
        except KubeError as exc:
            self.dropped += 1
            log.warning(
                "could not record event %s for %s %s/%s: %s", reason, regarding.get("kind"), namespace, name, exc
            )
        except Exception:  # an event must never break the caller's reconcile
            self.dropped += 1
            log.exception("unexpected failure recording event %s for %s/%s", reason, namespace, name)

    def _allow(self, object_key: tuple[str, str, str], now: float) -> bool:
        bucket = self._buckets.get(object_key)
        if bucket is None:
            bucket = _Bucket(self._burst, self._refill, now)
            self._buckets[object_key] = bucket
            if len(self._buckets) > _MAX_TRACKED:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(object_key)
        return bucket.take(now)

    def _remember(self, key: tuple[str, ...], series: _Series) -> None:
        self._series[key] = series
        self._series.move_to_end(key)
        while len(self._series) > _MAX_TRACKED:
            self._series.popitem(last=False)

    async def _create(
        self, regarding: Mapping[str, Any], *, type: EventType, reason: str, note: str, action: str
    ) -> dict[str, Any]:
        view = ObjectView(regarding)
        name = view.name
        # Cluster-scoped objects get their events in "default", as kubectl and client-go do.
        namespace = view.namespace or "default"
        reference: dict[str, Any] = {"kind": regarding.get("kind"), "name": name}
        for field, value in (
            ("apiVersion", view.api_version),
            ("namespace", view.namespace),
            ("uid", view.uid),
        ):
            if value:
                reference[field] = value
        event_name = f"{name[:230]}.{secrets.token_hex(8)}"
        body = {
            "apiVersion": EVENTS.api_version,
            "kind": EVENTS.kind,
            "metadata": {"name": event_name, "namespace": namespace},
            "eventTime": micro_time(self._clock.now()),
            "reportingController": self._component,
            "reportingInstance": self._instance,
            "action": action,
            "reason": reason,
            "note": note,
            "type": type,
            "regarding": reference,
        }
        return await self._client.create(EVENTS, body, namespace=namespace)

    async def _bump(self, series: _Series) -> None:
        await self._client.patch(
            EVENTS,
            series.name,
            {"series": {"count": series.count, "lastObservedTime": micro_time(self._clock.now())}},
            namespace=series.namespace,
        )
