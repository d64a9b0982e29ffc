"""Optimistic-concurrency writes: retry a read-modify-write when someone else wrote first.

:func:`retry_on_conflict` is client-go's ``RetryOnConflict`` with ``DefaultBackoff`` (at most 4 attempts,
sleeps of about 10 ms, 50 ms and 250 ms, each stretched by up to 10 %); :func:`update_with_retry` is the
read-modify-write it usually wraps, done against the API itself (never a cache) with the read
``resourceVersion`` as the lock. A plain merge patch without ``resourceVersion`` never conflicts, which is
why the lock is always sent: without it the retry would be dead code and a stale writer would win.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypeVar

from arc_scaleset.backoff import Backoff
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.client import KubeClient, PatchType
from arc_scaleset.kube.errors import Conflict
from arc_scaleset.kube.merge_patch import merge_patch
from arc_scaleset.kube.resources import Resource
from arc_scaleset.kube.views import ObjectView

T = TypeVar("T")


def default_backoff() -> Backoff:
    """client-go's ``retry.DefaultBackoff``: 10 ms, x5 per step, up to 10 % jitter."""
    return Backoff(base=0.010, factor=5.0, cap=10.0, jitter=0.1)


async def retry_on_conflict(
    fn: Callable[[], Awaitable[T]],
    *,
    attempts: int = 4,
    backoff: Backoff | None = None,
    clock: Clock = REAL_CLOCK,
) -> T:
    """Call ``fn`` until it does not raise :class:`Conflict`, at most ``attempts`` times in total.

    Sleeps on ``clock`` between attempts using ``backoff`` (default :func:`default_backoff`). After the
    last attempt the final :class:`Conflict` propagates, so a workqueue can requeue the key. Any other
    exception propagates at once. ``fn`` must re-read what it writes: retrying a write computed from the
    same stale read would only conflict again.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    delays = backoff if backoff is not None else default_backoff()
    for attempt in range(1, attempts + 1):
        try:
            return await fn()
        except Conflict:
            if attempt == attempts:
                raise
        await clock.sleep(delays.next_delay())
    raise AssertionError("unreachable")  # pragma: no cover


async def update_with_retry(
    client: KubeClient,
    resource: Resource,
    name: str,
    *,
    namespace: str | None = None,
    mutate: Callable[[dict[str, Any]], dict[str, Any] | None],
    subresource: str | None = None,
    method: Literal["patch", "replace"] = "patch",
    attempts: int = 4,
    backoff: Backoff | None = None,
    clock: Clock = REAL_CLOCK,
    seen: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Read ``name`` from the API, let ``mutate`` change a deep copy, write it back under an optimistic lock.

    ``mutate`` receives the freshly read object (its own copy, safe to modify) and returns the desired
    object (usually the same dict, modified), or ``None`` when nothing needs to change -- then nothing is
    written and the result is ``None``. ``mutate`` runs once per attempt, on that attempt's read (or on
    ``seen``, below), so it must be a pure function of the object it receives.

    ``seen``: the object as the caller already has it (a cache, a write's answer), with its
    ``resourceVersion``. The first attempt is made against it without a read: when it is current, one request
    instead of two; when it is not, the lock refuses the write and the next attempts read as above. (A
    ``None`` from ``mutate`` on ``seen`` is taken as is: ``seen`` already shows the change.)

    ``method="patch"`` sends a JSON merge patch of the differences plus ``metadata.resourceVersion``
    (the lock); ``"replace"`` PUTs the whole object. Either way a concurrent write makes the server answer
    409 and the read-mutate-write runs again (up to ``attempts``); the final :class:`Conflict` propagates.
    :class:`NotFound` propagates at once. Returns the object as the server stored it.
    """

    unread = copy.deepcopy(dict(seen)) if seen is not None and ObjectView(seen).resource_version else None

    async def attempt() -> dict[str, Any] | None:
        nonlocal unread
        current, unread = unread or await client.get(resource, name, namespace=namespace), None
        desired = mutate(copy.deepcopy(current))
        if desired is None:
            return None
        resource_version = ObjectView(current).resource_version or None
        if method == "replace":
            body = copy.deepcopy(desired)
            body.setdefault("metadata", {})["resourceVersion"] = resource_version
            return await client.replace(resource, body, subresource=subresource)
        patch = merge_patch(current, desired)
        if not patch:
            return None
        patch.setdefault("metadata", {})["resourceVersion"] = resource_version
        return await client.patch(
            resource,
            name,
            patch,
            namespace=namespace,
            patch_type=PatchType.MERGE,
            subresource=subresource,
        )

    return await retry_on_conflict(attempt, attempts=attempts, backoff=backoff, clock=clock)
