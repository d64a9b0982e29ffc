"""Status conditions (``metav1.Condition``), handled as plain data.

``lastTransitionTime`` records when ``status`` last changed, not when the condition was last written, so
it only moves on a real transition; reason, message and observedGeneration are updated in place.

A message often quotes an error from GitHub or a proxy, so :func:`set_condition` masks it exactly as a log
line is masked (:func:`arc_scaleset.observability.logging.redact`): a status is readable by anyone who can
read the object, and no credential may reach it (docs/github.md, "Secrets").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from arc_scaleset.observability.logging import redact

ConditionStatus = Literal["True", "False", "Unknown"]


def format_time(moment: dt.datetime) -> str:
    """RFC 3339 in UTC with second precision, as Kubernetes writes ``metav1.Time``."""
    if moment.tzinfo is None:
        raise ValueError("condition timestamps must be timezone-aware")
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def get_condition(conditions: Sequence[Mapping[str, Any]] | None, type: str) -> dict[str, Any] | None:
    """The condition of ``type``, or ``None``."""
    for condition in conditions or []:
        if condition.get("type") == type:
            return dict(condition)
    return None


def is_condition_true(conditions: Sequence[Mapping[str, Any]] | None, type: str) -> bool:
    """Whether the condition of ``type`` exists with status ``"True"``."""
    condition = get_condition(conditions, type)
    return condition is not None and condition.get("status") == "True"


def set_condition(
    conditions: Sequence[Mapping[str, Any]] | None,
    *,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    observed_generation: int | None,
    now: dt.datetime,
) -> list[dict[str, Any]]:
    """A new list with the condition of ``type`` set (added at the end, or replaced where it was).

    The input is not modified. ``lastTransitionTime`` becomes ``now`` when the condition is new or its
    status changes; otherwise the previous value is kept. ``reason`` must be CamelCase (the API validates
    it); ``message`` is masked of secrets, then cut to the API's 32768-character limit.
    """
    if status not in ("True", "False", "Unknown"):
        raise ValueError(f"condition status must be True, False or Unknown, not {status!r}")
    if not reason:
        raise ValueError("a condition needs a reason")
    result: list[dict[str, Any]] = []
    previous: Mapping[str, Any] | None = None
    position: int | None = None
    for condition in conditions or []:
        if condition.get("type") == type and position is None:
            previous = condition
            position = len(result)
            result.append({})
        elif condition.get("type") != type:
            result.append(dict(condition))
    transition = (
        str(previous["lastTransitionTime"])
        if previous is not None and previous.get("status") == status and previous.get("lastTransitionTime")
        else format_time(now)
    )
    updated: dict[str, Any] = {
        "type": type,
        "status": status,
        "reason": reason,
        "message": redact(message)[:32768],
        "lastTransitionTime": transition,
    }
    if observed_generation is not None:
        updated["observedGeneration"] = observed_generation
    if position is None:
        result.append(updated)
    else:
        result[position] = updated
    return result


def remove_condition(conditions: Sequence[Mapping[str, Any]] | None, type: str) -> list[dict[str, Any]]:
    """A new list without the condition of ``type``."""
    return [dict(c) for c in conditions or [] if c.get("type") != type]
