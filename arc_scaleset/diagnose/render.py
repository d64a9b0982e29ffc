"""Plain-text rendering of ``status`` documents and ``explain`` findings: aligned columns, no colour, so the
output reads the same in a terminal, a pipe and a pasted issue (the operator does not depend on rich)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Final

from arc_scaleset.diagnose.printable import printable
from arc_scaleset.diagnose.rules import Finding, format_age
from arc_scaleset.kube.views import parse_timestamp

LABEL_WIDTH: Final = 12
EVENTS_SHOWN: Final = 10


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{key} {value}" for key, value in counts.items()) or "none"


def _ago(value: object, now: dt.datetime, missing: str = "never") -> str:
    moment = parse_timestamp(value)
    return f"{format_age(now - moment)} ago" if moment else missing


def render_status(doc: Mapping[str, Any]) -> str:
    """One screen for one scale set (``summary.summarize``'s document).

    Each line goes through :func:`~.printable.printable`: what the objects say (messages, notes, names) is
    written by tenants, and no control character of theirs reaches the terminal, a line feed included.
    """
    now = parse_timestamp(doc.get("takenAt")) or dt.datetime.now(dt.UTC)
    lines: list[str] = []

    def row(label: str, text: str) -> None:
        lines.append(f"  {label:<{LABEL_WIDTH}}{text}")

    phase = doc.get("phase") or "no status"
    lines.append(
        f"AutoscalingRunnerSet {doc['namespace']}/{doc['name']}: {phase} "
        f"(generation {doc['generation']}, observed {doc['observedGeneration']})"
    )
    github = doc["github"]
    scale_set = f"scale set {github['scaleSetId']}" if github["scaleSetId"] else "scale set not registered"
    row("GitHub", f'{scale_set} "{github["scaleSetName"]}", runner group {github["runnerGroup"]}')
    row("", f"{github['configUrl']} (runners: {github['runnersPage']})")
    maximum = doc["maxRunners"] if doc["maxRunners"] is not None else "unbounded"
    desired = doc["desiredRunners"] if doc["desiredRunners"] is not None else "-"
    runners = doc["runners"]
    row(
        "Runners",
        f"min {doc['minRunners']}, max {maximum}, desired {desired}; {runners['total']} exist, {runners['busy']} busy",
    )
    row("", f"by phase: {_counts(runners['byPhase'])}; by revision: {_counts(runners['byRevision'])}")
    runner_set = doc["runnerSet"]
    if runner_set is None:
        row("RunnerSet", "none")
    else:
        rolling = " (rolling out)" if runner_set["desiredRevision"] > runner_set["appliedRevision"] else ""
        others = f"; {runner_set['others']} older set(s) draining" if runner_set["others"] else ""
        row(
            "RunnerSet",
            f"{runner_set['name']}: {runner_set['phase'] or '-'}, replicas {runner_set['replicas']}, patch ID "
            f"{runner_set['patchId']}, revision desired {runner_set['desiredRevision']} applied "
            f"{runner_set['appliedRevision']}{rolling}{others}",
        )
        capacity = runner_set["capacity"]
        if capacity is not None:
            why = f" ({capacity['limitedBy']}: {capacity['message']})" if capacity["limitedBy"] else ""
            row("Capacity", f"GitHub is told {capacity['advertised']} runners{why}")
    warm = doc.get("warmCapacity")
    if warm is not None:
        row("Warm pool", _warm_pool(warm))
        if warm["preemptionEvents"]:
            row("", f"runner pods took placeholders' room ({warm['preemptionEvents']} Event(s), last "
                    f"{_ago(warm['lastPreemption'], now)})")  # fmt: skip
    listener = doc["listener"]
    if listener is None:
        row("Listener", "none")
    else:
        where = f"{listener['namespace']}/{listener['name']}" if listener["name"] else "(AutoscalingListener unseen)"
        row("Listener", f"{where}, pod {listener['podPhase'] or 'missing'}")
        standby = listener.get("standby")
        if standby is not None:
            holder = f"active {standby['leaseHolder']}" if standby["leaseHolder"] else "no pod holds the Lease"
            ready = "ready" if standby["ready"] else (standby["podPhase"] or "missing")
            row("", f"standby: {holder}; standby pod {standby['pod'] or '(none)'} {ready}")
        if listener["pollingSince"]:
            # Only state changes are recorded (docs/listener.md): "polling since" is true, a "last poll" time is not.
            row("", f"session Polling since {_ago(listener['pollingSince'], now)}, no failed poll reported since")
        elif listener["session"]:
            error = f", last error {listener['lastError']}" if listener["lastError"] else ""
            polled = _ago(listener["lastSuccessfulPoll"], now, "")
            row(
                "",
                f"session {listener['session']} for {_ago(listener['since'], now).removesuffix(' ago')}, "
                + (f"last successful poll {polled}" if polled else "no successful poll before it")
                + error,
            )
        else:
            row("", "session: not reported yet")
        for condition in listener["conditions"]:
            row("", _condition(condition))
    for index, condition in enumerate(doc["conditions"]):
        row("Conditions" if index == 0 else "", _condition(condition))
    if not doc["conditions"]:
        row("Conditions", "none")
    events = doc["events"][:EVENTS_SHOWN]
    lines.append(f"  Events (newest first, {len(events)} of {len(doc['events'])}):" if events else "  Events: none")
    for event in events:
        count = f" (x{event['count']})" if event["count"] > 1 else ""
        lines.append(
            f"    {_ago(event['time'], now):<9} {event['type']:<8} {event['reason']:<26} "
            f"{event['kind']}/{event['name']}: {event['note']}{count}"
        )
    for note in doc.get("notes") or []:
        lines.append(f"  note: {note}")
    return _join(lines)


def _warm_pool(warm: Mapping[str, Any]) -> str:
    if warm["status"] is None:
        return "asked for, not reported yet (does the controller run with --warm-capacity?)"
    if warm["status"] == "True":
        return str(warm["message"])
    return f"no placeholders ({warm['reason']}): {warm['message']}"


def _join(lines: Sequence[str]) -> str:
    """The screen: the lines, each made printable, joined by the only newlines that reach the terminal."""
    return "\n".join(printable(line) for line in lines)


def _condition(condition: Mapping[str, Any]) -> str:
    message = f": {condition['message']}" if condition["message"] else ""
    return f"{condition['type']}={condition['status']} {condition['reason']}{message}"


def render_findings(namespace: str, name: str, findings: Sequence[Finding]) -> str:
    """``explain``'s lines for one scale set: severity, then the finding (printable, as :func:`render_status`)."""
    lines = [f"AutoscalingRunnerSet {namespace}/{name}:"]
    lines += [f"  {finding.severity.value:<8}{finding.line}" for finding in findings]
    return _join(lines)
