"""The EphemeralRunnerSet's ``Degraded`` condition: why the set cannot keep ``replicas`` runners.

Derived on every pass of the main path from what that pass found (:func:`degraded_conditions`), so it is
level-based: ``True`` with the reason while the cause lasts (``InvalidRunnerTemplate``: the API server
refuses the runner pod, :mod:`.template_check`; ``ReplicasAboveCeiling``: ``replicas`` above
``--max-runners-ceiling``; a configuration error that stopped the pass, such as
``GitHubAuthenticationStepFailed``: GitHub refused the credentials' authentication step, so no runner can be
removed), ``False`` (``AsExpected``) once it is gone. The AutoscalingRunnerSet controller shows a ``True`` one
on the scale set too (docs/controllers.md).

Only this controller writes the set's conditions, and a pass writes the whole list, so a write from a
cache that has not caught up with the previous pass's own write carries the same derived value: nothing
to guard with a ``resourceVersion``. A Warning Event marks each new cause (not each pass).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.kube.client import KubeClient, PatchType
from arc_scaleset.kube.conditions import get_condition, set_condition
from arc_scaleset.kube.views import ObjectView, sequence

CONDITION_DEGRADED: Final = "Degraded"
AS_EXPECTED: Final = ("AsExpected", "the runner template is accepted and replicas are within the ceiling")


def degraded_conditions(
    ers: Mapping[str, Any], problem: tuple[str, str] | None, *, now: dt.datetime
) -> list[dict[str, Any]] | None:
    """The set's conditions with ``Degraded`` derived from ``problem`` ((reason, message) or ``None``);
    ``None`` when they would not change (no ``Degraded`` yet and no problem counts as unchanged)."""
    view = ObjectView(ers)
    current = sequence(view.status.get("conditions"))
    existing = get_condition(current, CONDITION_DEGRADED)
    if problem is None and existing is None:
        return None
    reason, message = problem if problem is not None else AS_EXPECTED
    updated = set_condition(
        current,
        type=CONDITION_DEGRADED,
        status="True" if problem is not None else "False",
        reason=reason,
        message=message,
        observed_generation=view.generation,
        now=now,
    )
    mine = get_condition(updated, CONDITION_DEGRADED) or {}
    if existing is not None and all(
        existing.get(field) == mine.get(field) for field in ("status", "reason", "message")
    ):
        return None  # only observedGeneration moved (every listener patch bumps it): not worth a write
    return updated


async def patch_conditions(
    kube: KubeClient, ers: Mapping[str, Any], conditions: list[dict[str, Any]]
) -> dict[str, Any]:
    """Write the set's ``status.conditions`` (the whole list: a merge patch replaces lists); the set as stored."""
    view = ObjectView(ers)
    return await kube.patch(
        EPHEMERAL_RUNNER_SETS,
        view.name,
        {"status": {"conditions": conditions}},
        namespace=view.namespace,
        patch_type=PatchType.MERGE,
        subresource="status",
    )
