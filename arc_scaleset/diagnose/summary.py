"""The ``status`` document of one scale set: a pure function of a :class:`~.snapshot.Snapshot`.

The same document is printed as JSON or YAML (``-o json|yaml``) and rendered as text; its keys are camelCase
like the objects it comes from. Free text taken from objects (condition messages, Event notes) is masked with
the log redaction (:func:`arc_scaleset.observability.logging.redact`): it is written by controllers that
already mask it, and a second mask costs nothing. No Secret is read, and the listener's session ID is left
out (``status`` output is pasted into issues).
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any, Final

from arc_scaleset.api.keys import (
    ANNOTATION_RUNNER_GROUP_NAME,
    ANNOTATION_RUNNER_SCALE_SET_ID,
    ANNOTATION_RUNNER_SCALE_SET_NAME,
    CONDITION_CAPACITY_LIMITED,
    EphemeralRunnerPhase,
)
from arc_scaleset.api.listener_state import ListenerPhase
from arc_scaleset.api.views import EphemeralRunnerSetView, EphemeralRunnerView
from arc_scaleset.api.warm_capacity import (
    CONDITION_WARM_CAPACITY,
    EVENT_WARM_PLACEHOLDER_PREEMPTED,
    EVENT_WARM_POOL_RESIZED,
)
from arc_scaleset.diagnose.snapshot import EventRecord, Snapshot
from arc_scaleset.kube.conditions import format_time, get_condition
from arc_scaleset.kube.views import ObjectView, PodView, integer, mapping, parse_int, sequence, string
from arc_scaleset.observability.logging import redact

EVENT_LIMIT: Final = 20
"""Events kept in the document, newest first."""

DEFAULT_RUNNER_GROUP: Final = "Default"


def runner_phase(runner: Mapping[str, Any]) -> str:
    """The runner's phase, ``Pending`` before its first status write; ``Deleting`` while it goes away."""
    view = EphemeralRunnerView(runner)
    if view.is_deleting:
        return "Deleting"
    return view.phase or EphemeralRunnerPhase.PENDING


def runners_page(config_url: str) -> str:
    """Where the scale set's runners are listed on GitHub: the settings page under the configuration URL
    (organization, repository or ``enterprises/<name>``)."""
    return f"{config_url.rstrip('/')}/settings/actions/runners" if config_url else ""


def _capacity(status: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the listener tells GitHub the set can run, and why it is below ``maxRunners`` (docs/capacity.md);
    ``None`` before the controller published a figure."""
    advertised = status.get("advertisedCapacity")
    if not isinstance(advertised, int) or isinstance(advertised, bool):
        return None
    limited = get_condition(sequence(status.get("conditions")), CONDITION_CAPACITY_LIMITED) or {}
    if limited.get("status") != "True":
        return {"advertised": advertised, "limitedBy": None, "message": None}
    return {
        "advertised": advertised,
        "limitedBy": string(limited.get("reason")),
        "message": redact(string(limited.get("message"))),
    }


def _warm_capacity(
    spec: Mapping[str, Any], status: Mapping[str, Any], events: list[EventRecord]
) -> dict[str, Any] | None:
    """The warm pool the scale set belongs to, its size and why (the ``WarmCapacity`` condition the warm-pool
    controller writes, docs/capacity.md), what this set asks for, and the placeholder preemptions and resizes its
    Events tell; ``None`` when the set neither asks for warm capacity nor carries the condition."""
    asked = mapping(spec.get("warmCapacity")) if spec.get("warmCapacity") is not None else None
    condition = get_condition(sequence(status.get("conditions")), CONDITION_WARM_CAPACITY)
    if asked is None and condition is None:
        return None
    preempted = [e for e in events if e.reason == EVENT_WARM_PLACEHOLDER_PREEMPTED]
    resized = next((e for e in events if e.reason == EVENT_WARM_POOL_RESIZED), None)
    return {
        "asked": dict(asked) if asked is not None else None,
        "status": string(condition.get("status")) if condition else None,
        "reason": string(condition.get("reason")) if condition else None,
        "message": redact(string(condition.get("message"))) if condition else None,
        # Each Event counts its repeats; a preemption Event names how many placeholders it was about.
        "preemptionEvents": sum(e.count for e in preempted),
        "lastPreemption": format_time(preempted[0].time) if preempted and preempted[0].time else None,
        "lastResize": redact(resized.note) if resized else None,
    }


def _conditions(obj: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    out = []
    for condition in sequence(ObjectView(obj or {}).status.get("conditions")):
        if not isinstance(condition, Mapping):
            continue
        out.append(
            {
                "type": string(condition.get("type")),
                "status": string(condition.get("status")),
                "reason": string(condition.get("reason")),
                "message": redact(string(condition.get("message"))),
                "lastTransitionTime": string(condition.get("lastTransitionTime")) or None,
            }
        )
    return out


def summarize(snapshot: Snapshot) -> dict[str, Any]:
    """The status document (see the module docstring): identity, bounds, desired and actual runners, revision,
    listener, conditions and the newest Events."""
    ars = ObjectView(snapshot.scale_set)
    spec = ars.spec
    current = snapshot.current_runner_set
    ers = EphemeralRunnerSetView(current) if current is not None else None
    by_phase: collections.Counter[str] = collections.Counter()
    by_revision: collections.Counter[int] = collections.Counter()
    busy = 0
    for runner in snapshot.runners:
        view = EphemeralRunnerView(runner)
        by_phase[runner_phase(runner)] += 1
        by_revision[view.revision] += 1
        busy += view.has_job and not view.is_done
    config_url = string(spec.get("githubConfigUrl"))
    scale_set_id = parse_int(ars.annotation(ANNOTATION_RUNNER_SCALE_SET_ID)) or None
    state = snapshot.listener_state
    listener_pod = PodView(snapshot.listener_pod) if snapshot.listener_pod is not None else None
    listener: dict[str, Any] | None = None
    if snapshot.listener is not None or state is not None:
        al = ObjectView(snapshot.listener or {})
        listener = {
            "name": al.name or None,
            "namespace": al.namespace or None,
            "pod": listener_pod.name if listener_pod else None,
            "podPhase": listener_pod.phase if listener_pod else None,
            "session": state.state.value if state else None,
            "sessionOwner": state.owner if state else None,
            "since": format_time(state.since) if state else None,
            # The listener writes its state when it changes, never per poll (docs/listener.md): ``Polling`` since
            # a time is the true statement (every poll since has succeeded, or it would be ``Failing``), and
            # ``lastSuccessfulPoll`` is the last success *before* the state was entered, not the latest poll.
            "pollingSince": format_time(state.since) if state and state.state is ListenerPhase.POLLING else None,
            "lastSuccessfulPoll": format_time(state.last_successful_poll)
            if state and state.last_successful_poll
            else None,
            "lastError": state.last_error_class if state else None,
            "conditions": _conditions(snapshot.listener),
            "standby": _standby(snapshot),
        }
    return {
        "namespace": ars.namespace,
        "name": ars.name,
        "phase": string(ars.status.get("phase")) or None,
        "generation": ars.generation,
        "observedGeneration": integer(ars.status.get("observedGeneration")),
        "github": {
            "configUrl": config_url,
            "scaleSetId": scale_set_id,
            "scaleSetName": ars.annotation(ANNOTATION_RUNNER_SCALE_SET_NAME)
            or string(spec.get("runnerScaleSetName"))
            or ars.name,
            "runnerGroup": ars.annotation(ANNOTATION_RUNNER_GROUP_NAME)
            or string(spec.get("runnerGroup"))
            or DEFAULT_RUNNER_GROUP,
            "runnersPage": runners_page(config_url),
        },
        "minRunners": integer(spec.get("minRunners")),
        "maxRunners": integer(spec.get("maxRunners")) if spec.get("maxRunners") is not None else None,
        "desiredRunners": ers.replicas if ers else None,
        "runners": {
            "total": len(snapshot.runners),
            "busy": busy,
            "byPhase": dict(sorted(by_phase.items())),
            "byRevision": {str(revision): count for revision, count in sorted(by_revision.items())},
        },
        "runnerSet": {
            "name": ers.name,
            "phase": ers.phase or None,
            "replicas": ers.replicas,
            "patchId": ers.patch_id,
            "desiredRevision": ers.actionable_revision,
            "appliedRevision": ers.applied_actionable_revision,
            "others": len(snapshot.runner_sets) - 1,
            "capacity": _capacity(ers.status),
        }
        if ers
        else None,
        "listener": listener,
        "warmCapacity": _warm_capacity(spec, ars.status, snapshot.events_newest_first()),
        "conditions": _conditions(snapshot.scale_set),
        "events": [
            {**event.to_json(), "note": redact(event.note)} for event in snapshot.events_newest_first()[:EVENT_LIMIT]
        ],
        "notes": list(snapshot.notes),
        "takenAt": format_time(snapshot.taken_at),
    }


def _standby(snapshot: Snapshot) -> dict[str, Any] | None:
    """With a standby listener: the pod standing by, whether it runs, and whether the active pod holds the Lease
    (``None``: no standby)."""
    if snapshot.standby_pod is None and not snapshot.lease_holder:
        return None
    pod = PodView(snapshot.standby_pod) if snapshot.standby_pod is not None else None
    return {
        "pod": pod.name if pod else None,
        "podPhase": pod.phase if pod else None,
        "ready": pod is not None and pod.phase == "Running" and not pod.is_deleting,
        "leaseHolder": snapshot.lease_holder or None,
    }
