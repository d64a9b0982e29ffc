"""The AutoscalingRunnerSet's status, derived on every reconcile and written once at its end.

``phase`` and ``observedGeneration`` follow ARC #4636: while ``metadata.generation > status.observedGeneration``
the phase is ``Pending``; when a pass finds every child in line with the spec the phase is ``Running`` and
``observedGeneration`` catches up. Beyond ARC, three conditions say why:

- ``Ready``: the scale set is registered and its runner set and listener match the spec.
- ``Progressing``: a change is being applied (reason says which step: ``RegisteringScaleSet``,
  ``CreatingEphemeralRunnerSet``, ``RollingOutRevision``, ``RecreatingListener``...).
- ``Degraded``: the last pass failed (reason: a configuration error's reason, or ``GitHubUnavailable``...);
  retried with backoff until the input is fixed. Any other error (an API server that refuses a write...) is
  ``Degraded`` once it persists (:mod:`arc_scaleset.kube.failures`: 3 passes or 60 s), with its reason and
  masked text; before that, a failed pass leaves ``Degraded`` as it was: it never says "no problem found".

Every condition carries ``observedGeneration``; ``lastTransitionTime`` moves only when a status flips. A
``Degraded`` condition of the scale set's EphemeralRunnerSet (a runner template the API server refuses...)
makes the scale set ``Degraded`` and not ``Ready`` too (:func:`runner_set_problem`). So does its listener: a
listener that is not ``Ready`` (no message session, failing polls, starting, restarting) makes the scale set not
``Ready``, and one in an outage or a crash loop (its ``Degraded``) makes it ``Degraded``, each with the listener's
reason (:func:`.listener_report.listener_problems`).

A status is written from one consistent read (:mod:`.status_write`): the patch is the diff
against the object the pass read (:func:`status_patch`, with ``phase`` and ``observedGeneration`` always
together) and carries that read's ``resourceVersion``; a newer object (this controller's own previous write
that the cache does not show yet, an edit) makes the server refuse it, and the status is derived again from
a fresh read. So no reader ever sees a combination that was never true, such as ``Pending`` at
``observedGeneration == generation``.

The runner counts (``currentRunners``, ``pendingEphemeralRunners``, ``runningEphemeralRunners``,
``failedEphemeralRunners``, ``finishedEphemeralRunners``, ``deletingEphemeralRunners``) are ARC's fields, summed
over the scale set's EphemeralRunnerSets as their controller last wrote them (:func:`scale_set_runner_counts`;
ARC copies them from its newest set only, which hides the busy runners of a set being drained). Every pass
writes them where they differ, so no value ARC left survives the first pass. Without
``--runner-counts-in-status`` (the default, as ARC's current code, #4557) they are removed instead.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from arc_scaleset.api.keys import AutoscalingRunnerSetPhase
from arc_scaleset.kube.conditions import ConditionStatus, get_condition, set_condition
from arc_scaleset.kube.failures import Failure
from arc_scaleset.kube.views import ObjectView, integer

CONDITION_READY = "Ready"
CONDITION_PROGRESSING = "Progressing"
CONDITION_DEGRADED = "Degraded"

RUNNER_COUNTS: Final = (
    ("currentRunners", "currentReplicas"),
    ("pendingEphemeralRunners", "pendingEphemeralRunners"),
    ("runningEphemeralRunners", "runningEphemeralRunners"),
    ("failedEphemeralRunners", "failedEphemeralRunners"),
    ("finishedEphemeralRunners", "finishedEphemeralRunners"),
    ("deletingEphemeralRunners", "deletingEphemeralRunners"),
)
"""(field of the AutoscalingRunnerSet's status, field of each EphemeralRunnerSet's status it sums)."""


def scale_set_runner_counts(runner_sets: Iterable[Mapping[str, Any]], *, in_status: bool) -> dict[str, int | None]:
    """The scale set's runner counts: each EphemeralRunnerSet count summed over its sets (missing = 0); with
    ``in_status`` false (``--runner-counts-in-status`` off, the default) every field ``None``, so those in status are
    removed."""
    if not in_status:
        return {name: None for name, _ in RUNNER_COUNTS}
    statuses = [ObjectView(runner_set).status for runner_set in runner_sets]
    return {name: sum(integer(status.get(source)) for status in statuses) for name, source in RUNNER_COUNTS}


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
    failed: bool = False
    """Another error ended the pass (not bad input, not GitHub): retried by the controller with backoff."""
    failure: Failure | None = None
    """That error, once it is persistent (:func:`arc_scaleset.kube.failures.pass_failure`)."""
    ready_message: str = ""
    runner_counts: dict[str, int | None] = field(default_factory=dict)
    """The runner count fields to store (:func:`scale_set_runner_counts`; ``None``: absent); empty: leave them as
    they are."""
    runner_set_problem: tuple[str, str] | None = None
    """(reason, message) of the current EphemeralRunnerSet's ``Degraded`` condition while it is true
    (:func:`runner_set_problem`): the spec reached the set, and the set cannot keep its runners; else of a set
    that names the scale set half-way (``ownership.runner_set_conflict``)."""
    listener_not_ready: tuple[str, str] | None = None
    """(reason, message) of the listener's ``Ready`` condition while it is false."""
    listener_degraded: tuple[str, str] | None = None
    """(reason, message) of the listener's ``Degraded`` condition while it is true (an outage, a crash loop)."""

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


def runner_set_problem(ers: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(reason, message) of the EphemeralRunnerSet's ``Degraded`` condition when it is ``True``, else ``None``.

    The set reports what only it can find out: a runner template the API server refuses
    (``InvalidRunnerTemplate``), ``replicas`` above the controller's ceiling (``ReplicasAboveCeiling``).
    """
    condition = get_condition(ObjectView(ers or {}).status.get("conditions"), CONDITION_DEGRADED)
    if condition is None or condition.get("status") != "True":
        return None
    return str(condition.get("reason") or "EphemeralRunnerSetDegraded"), str(condition.get("message") or "")


def condition_verdicts(report: ReconcileReport) -> list[Verdict]:
    """What each condition says after this pass; a condition the pass learned nothing about is left out.

    A complete pass whose EphemeralRunnerSet reports a problem is not ``Ready``: the spec is applied
    (``Running``, ``observedGeneration`` caught up), but runners cannot be had, and ``Degraded`` says why.
    """
    if report.complete and report.problem is None:
        if report.runner_set_problem is not None:
            reason, message = report.runner_set_problem
            return [
                (CONDITION_READY, "False", reason, message),
                UP_TO_DATE[0],
                (CONDITION_DEGRADED, "True", reason, message),
            ]
        if report.listener_not_ready is not None or report.listener_degraded is not None:
            # The spec is applied, but the listener is what brings the jobs: no listener, no runners.
            reason, message = report.listener_not_ready or report.listener_degraded or ("", "")
            degraded = report.listener_degraded
            return [
                (CONDITION_READY, "False", reason, message),
                UP_TO_DATE[0],
                (CONDITION_DEGRADED, "True", *degraded) if degraded is not None else UP_TO_DATE[1],
            ]
        ready = report.ready_message or "the scale set is registered and up to date"
        return [(CONDITION_READY, "True", "Running", ready), *UP_TO_DATE]
    verdicts: list[Verdict] = []
    problem = report.problem or _persistent(report.failure)
    if problem is not None:
        reason, message = problem
        verdicts += [(CONDITION_DEGRADED, "True", reason, message), (CONDITION_READY, "False", reason, message)]
    elif not report.failed:
        verdicts.append(UP_TO_DATE[1])
    if report.progress is not None:
        reason, message = report.progress
        verdicts.append((CONDITION_PROGRESSING, "True", reason, message))
        if problem is None:
            verdicts.append((CONDITION_READY, "False", reason, message))
    return verdicts


def _persistent(failure: Failure | None) -> tuple[str, str] | None:
    return (failure.reason, failure.message) if failure is not None else None


def derive_status(current: Mapping[str, Any] | None, report: ReconcileReport, *, now: dt.datetime) -> dict[str, Any]:
    """The full status to store for this pass (compare with the current one before writing)."""
    status: dict[str, Any] = dict(current or {})
    status.update(report.runner_counts)
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


TOGETHER: Final = ("phase", "observedGeneration")
"""Status fields that are only ever written together: a reader must never see a new ``observedGeneration``
beside a phase it was not derived with (``Pending`` at ``observedGeneration == generation``, issue 15)."""


def status_patch(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> dict[str, Any]:
    """The changed top-level status fields (``{}`` when nothing changed); when one of :data:`TOGETHER`
    changed, all of them are in the patch.

    The patch is only as good as ``current``: the reconciler sends it with ``current``'s resourceVersion,
    so a patch diffed against a stale copy is refused rather than applied to a newer status.
    """
    have = current or {}
    patch = {key: value for key, value in desired.items() if have.get(key) != value}
    if any(key in patch for key in TOGETHER):
        patch.update({key: desired[key] for key in TOGETHER if key in desired})
    return patch
