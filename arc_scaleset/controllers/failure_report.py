"""A reconcile that keeps failing, told on its object: ``Degraded`` and a Warning Event (docs/controllers.md,
"No silent failure").

The controller runtime decides when a failure is persistent and which ones are new
(:mod:`arc_scaleset.kube.failures`); this module is the per-kind :class:`~arc_scaleset.kube.failures.FailureReporter`
that writes it:

- while it lasts: ``Degraded`` ``True`` with the error's reason and its (masked) text, written only when the
  stored condition says something else, and a Warning Event once per distinct error;
- on the first pass that succeeds after it: a Normal Event (``ReconcileRecovered``), and ``Degraded`` back to
  ``False`` when it still shows that failure (a reconciler that derives ``Degraded`` on its passes has usually
  rewritten it already; then it is left as that pass wrote it).

Kinds without ``status.conditions`` (the EphemeralRunner) get the Events only. The condition write is a
read-modify-write of ``status.conditions`` under the object's ``resourceVersion`` (retried against a fresh read
on a conflict), so it never replaces conditions a reconciler wrote in between.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.kube.conditions import format_time, get_condition, set_condition
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.failures import Failure
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.resources import Resource
from arc_scaleset.kube.retry import retry_on_conflict
from arc_scaleset.kube.views import ObjectView, sequence

CONDITION_DEGRADED: Final = "Degraded"
REASON_RECOVERED: Final = "ReconcileRecovered"
_COMPARED: Final = ("status", "reason", "message")

Conditions = list[dict[str, Any]]
Derive = Callable[[Sequence[Mapping[str, Any]], int, dt.datetime], Conditions | None]


def failing_conditions(
    conditions: Sequence[Mapping[str, Any]] | None, failure: Failure, *, generation: int, now: dt.datetime
) -> Conditions | None:
    """``conditions`` with ``Degraded`` ``True`` for ``failure``; ``None`` when it says so already."""
    updated = set_condition(
        conditions,
        type=CONDITION_DEGRADED,
        status="True",
        reason=failure.reason,
        message=failure.message,
        observed_generation=generation,
        now=now,
    )
    return None if _says_the_same(get_condition(conditions, CONDITION_DEGRADED), updated) else updated


def recovered_conditions(
    conditions: Sequence[Mapping[str, Any]] | None, failure: Failure, *, generation: int, now: dt.datetime
) -> Conditions | None:
    """``conditions`` with ``Degraded`` ``False`` when it still shows ``failure``; ``None`` when it shows anything
    else (a reconciler's own verdict, which is newer)."""
    shown = failing_conditions([], failure, generation=generation, now=now)
    if not _says_the_same(get_condition(conditions, CONDITION_DEGRADED), shown or []):
        return None
    return set_condition(
        conditions,
        type=CONDITION_DEGRADED,
        status="False",
        reason=REASON_RECOVERED,
        message=f"the last reconcile succeeded; it had failed since {format_time(failure.since)}",
        observed_generation=generation,
        now=now,
    )


def _says_the_same(existing: Mapping[str, Any] | None, conditions: Sequence[Mapping[str, Any]]) -> bool:
    mine = get_condition(conditions, CONDITION_DEGRADED) or {}
    return existing is not None and all(existing.get(field) == mine.get(field) for field in _COMPARED)


class ReconcileFailureReporter:
    """The :class:`~arc_scaleset.kube.failures.FailureReporter` of one primary kind (``resource``);
    ``conditions=False`` for a kind whose status has no conditions (Events only)."""

    def __init__(self, ctx: ControllerContext, resource: Resource, *, conditions: bool = True) -> None:
        self._ctx = ctx
        self._resource = resource
        self._conditions = conditions

    async def failing(self, key: Request, failure: Failure, *, announce: bool) -> None:
        def derive(conditions: Sequence[Mapping[str, Any]], generation: int, now: dt.datetime) -> Conditions | None:
            return failing_conditions(conditions, failure, generation=generation, now=now)

        obj = await self._write(key, derive)
        if obj is not None and announce:
            await self._ctx.events.event(
                obj, type="Warning", reason=failure.reason, note=failure.message, action="Reconcile"
            )

    async def recovered(self, key: Request, failure: Failure) -> None:
        def derive(conditions: Sequence[Mapping[str, Any]], generation: int, now: dt.datetime) -> Conditions | None:
            return recovered_conditions(conditions, failure, generation=generation, now=now)

        obj = await self._write(key, derive)
        if obj is not None:
            note = f"reconciling succeeds again; it had failed since {format_time(failure.since)}: {failure.error}"
            await self._ctx.events.event(obj, type="Normal", reason=REASON_RECOVERED, note=note, action="Reconcile")

    async def _write(self, key: Request, derive: Derive) -> Object | None:
        """The object as last read (``None``: gone), with its ``Degraded`` condition written as ``derive`` says."""
        kube, resource = self._ctx.kube, self._resource
        found: Object | None = None

        async def attempt() -> None:
            nonlocal found
            found = None
            try:
                found = obj = await kube.get(resource, key.name, namespace=key.namespace or None)
            except NotFound:
                return
            if not self._conditions:
                return
            view = ObjectView(obj)
            conditions = derive(sequence(view.status.get("conditions")), view.generation, self._ctx.clock.now())
            if conditions is None:
                return
            body = {"metadata": {"resourceVersion": view.resource_version}, "status": {"conditions": conditions}}
            try:
                found = await kube.patch(
                    resource, view.name, body, namespace=view.namespace or None, subresource="status"
                )
            except NotFound:
                found = None

        await retry_on_conflict(attempt, clock=self._ctx.clock)
        return found
