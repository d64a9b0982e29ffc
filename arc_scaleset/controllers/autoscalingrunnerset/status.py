"""The AutoscalingRunnerSet's status, derived on every reconcile and written once at its end.

``phase`` and ``observedGeneration`` follow ARC #4636: while ``metadata.generation > status.observedGeneration``
the phase is ``Pending``; when a pass finds every child in line with the spec the phase is ``Running`` and
``observedGeneration`` catches up. Beyond ARC, three conditions say why:

- ``Ready``: the scale set is registered and its runner set and listener match the spec.
- ``Progressing``: a change is being applied (reason says which step: ``RegisteringScaleSet``,
  ``CreatingEphemeralRunnerSet``, ``RollingOutRevision``, ``RecreatingListener``...).
- ``Degraded``: the last pass failed (reason: a configuration error's reason, or ``GitHubUnavailable``...);
  retried with backoff until the input is fixed.

Every condition carries ``observedGeneration``; ``lastTransitionTime`` moves only when a status flips.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from arc_scaleset.api.keys import AutoscalingRunnerSetPhase
from arc_scaleset.kube.conditions import ConditionStatus, set_condition

CONDITION_READY = "Ready"
CONDITION_PROGRESSING = "Progressing"
CONDITION_DEGRADED = "Degraded"


@dataclass
class ReconcileReport:
    """What a reconcile pass found; the shell fills it in as phases run, the status is derived from it."""

    generation: int
    observed_generation: int
    stored_phase: str
    complete: bool = False
    """Every step found its child in line with the spec (the pass reached the end)."""
    progress: tuple[str, str] | None = None
    """(reason, message) of the step that acted or waits."""
    problem: tuple[str, str] | None = None
    """(reason, message) of the failure that ended the pass."""
    ready_message: str = ""

    @property
    def spec_changed(self) -> bool:
        return self.generation > self.observed_generation

    @property
    def phase_in_effect(self) -> str:
        """The phase this pass works under: ``Pending`` when the spec changed (or on a new object)."""
        if self.spec_changed or not self.stored_phase:
            return AutoscalingRunnerSetPhase.PENDING
        return self.stored_phase


Verdict = tuple[str, ConditionStatus, str, str]
"""(condition type, status, reason, message)."""

UP_TO_DATE: tuple[Verdict, Verdict] = (
    (CONDITION_PROGRESSING, "False", "UpToDate", "every child matches the spec"),
    (CONDITION_DEGRADED, "False", "AsExpected", "no problem found"),
)


def condition_verdicts(report: ReconcileReport) -> list[Verdict]:
    """What each condition says after this pass; a condition the pass learned nothing about is left out."""
    if report.complete and report.problem is None:
        ready = report.ready_message or "the scale set is registered and up to date"
        return [(CONDITION_READY, "True", "Running", ready), *UP_TO_DATE]
    verdicts: list[Verdict] = []
    if report.problem is not None:
        reason, message = report.problem
        verdicts += [(CONDITION_DEGRADED, "True", reason, message), (CONDITION_READY, "False", reason, message)]
    else:
        verdicts.append(UP_TO_DATE[1])
    if report.progress is not None:
        reason, message = report.progress
        verdicts.append((CONDITION_PROGRESSING, "True", reason, message))
        if report.problem is None:
            verdicts.append((CONDITION_READY, "False", reason, message))
    return verdicts


def derive_status(current: Mapping[str, Any] | None, report: ReconcileReport, *, now: dt.datetime) -> dict[str, Any]:
    """The full status to store for this pass (compare with the current one before writing)."""
    status: dict[str, Any] = dict(current or {})
    if report.complete and report.problem is None:
        status["phase"] = AutoscalingRunnerSetPhase.RUNNING.value
        status["observedGeneration"] = report.generation
    else:
        status["phase"] = report.phase_in_effect
        status.setdefault("observedGeneration", report.observed_generation)
    conditions = status.get("conditions")
    for kind, value, reason, message in condition_verdicts(report):
        conditions = set_condition(
            conditions,
            type=kind,
            status=value,
            reason=reason,
            message=message,
            observed_generation=report.generation,
            now=now,
        )
    status["conditions"] = conditions
    return status


def status_patch(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> dict[str, Any]:
    """The changed top-level status fields (``{}`` when nothing changed)."""
    have = current or {}
    return {key: value for key, value in desired.items() if have.get(key) != value}
