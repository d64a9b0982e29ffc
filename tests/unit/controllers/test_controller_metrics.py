"""The controller's ``gha_controller_*`` metrics: state gauges from the current objects, counters for transitions."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from arc_scaleset.api.job_timeline import Phase
from arc_scaleset.controllers.metrics import (
    DELETED_REASONS,
    ControllerMetrics,
    DeletedReason,
    scale_set_states,
)
from arc_scaleset.controllers.runner_classification import RunnerView


def _set(name: str, uid: str, *, revision: int = 0, applied: int = 0, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": uid,
        "labels": {
            "actions.github.com/scale-set-name": "arc",
            "actions.github.com/scale-set-namespace": "ns",
            "actions.github.com/organization": "org",
        },
    }
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"actionableRevision": revision},
        "status": {"appliedActionableRevision": applied},
    }


def _runners(**phases: int) -> list[RunnerView]:
    return [RunnerView(name=f"{phase}-{i}", phase=phase) for phase, n in phases.items() for i in range(n)]


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    full = {"name": "arc", "namespace": "ns", "repository": "", "organization": "org", "enterprise": ""} | labels
    return registry.get_sample_value(name, full)


def test_runner_gauges_sum_every_set_of_a_scale_set_and_revisions_come_from_the_live_set() -> None:
    runners = {
        "new": _runners(Running=2, Pending=1, Succeeded=1),
        "old": _runners(Running=1, Failed=1, Outdated=1),
    }
    sets = [_set("new", "new", revision=3, applied=2), _set("old", "old", revision=4, applied=4, deleting=True)]

    [state] = scale_set_states(sets, lambda s: runners[s["metadata"]["uid"]])

    assert (state.labels["name"], state.labels["organization"]) == ("arc", "org")
    assert {phase.value: count for phase, count in state.runners.items()} == {
        "Pending": 1, "Running": 3, "Failed": 1, "Succeeded": 1, "Outdated": 1,
    }  # fmt: skip
    assert (state.desired_revision, state.applied_revision) == (3, 2)


def test_state_gauges_show_the_current_objects_at_each_scrape_and_a_deleted_scale_set_has_none() -> None:
    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry)
    cluster: dict[str, Any] = {"sets": [_set("arc", "u1", revision=2, applied=1)], "runners": _runners(Running=2)}
    metrics.observe_scale_sets(lambda: scale_set_states(cluster["sets"], lambda _s: cluster["runners"]))

    assert _value(registry, "gha_controller_running_ephemeral_runners") == 2
    assert _value(registry, "gha_controller_desired_revision") == 2
    assert _value(registry, "gha_controller_applied_revision") == 1

    cluster["runners"] = _runners(Running=1, Pending=4)
    assert _value(registry, "gha_controller_running_ephemeral_runners") == 1
    assert _value(registry, "gha_controller_pending_ephemeral_runners") == 4

    cluster["sets"] = []
    assert _value(registry, "gha_controller_pending_ephemeral_runners") is None
    assert _value(registry, "gha_controller_desired_revision") is None


def test_transition_counters_count_and_are_forgotten_with_the_scale_set() -> None:
    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry)
    labels = {"name": "arc", "namespace": "ns", "repository": "", "organization": "org", "enterprise": ""}
    metrics.count_created(labels, 3)
    metrics.count_done("Succeeded", labels)
    metrics.count_done("Failed", labels)
    metrics.count_done("Running", labels)  # not a transition that is counted
    metrics.count_deleted(labels, DeletedReason.SUCCEEDED)
    metrics.count_deleted(labels, DeletedReason.SCALE_DOWN)

    assert _value(registry, "gha_controller_ephemeral_runners_created_total") == 3
    assert _value(registry, "gha_controller_ephemeral_runners_succeeded_total") == 1
    assert _value(registry, "gha_controller_ephemeral_runners_failed_total") == 1
    assert _value(registry, "gha_controller_ephemeral_runners_deleted_total", reason="scale_down") == 1

    metrics.forget(labels)
    assert _value(registry, "gha_controller_ephemeral_runners_created_total") is None
    assert _value(registry, "gha_controller_ephemeral_runners_deleted_total", reason="succeeded") is None


def test_a_scale_sets_counters_and_its_listeners_restarts_start_at_zero_before_any_transition() -> None:
    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry)
    labels = {"name": "arc", "namespace": "ns", "repository": "", "organization": "org", "enterprise": ""}
    metrics.start_scale_set(labels)
    metrics.start_scale_set(labels)  # every pass calls it: nothing is reset
    metrics.set_listener_running(labels, True)

    for counter in ("created", "succeeded", "failed"):
        assert _value(registry, f"gha_controller_ephemeral_runners_{counter}_total") == 0
    for reason in DELETED_REASONS:
        assert _value(registry, "gha_controller_ephemeral_runners_deleted_total", reason=reason) == 0
    assert _value(registry, "gha_controller_listener_restarts_total") == 0

    metrics.count_done("Failed", labels)
    metrics.start_scale_set(labels)
    assert _value(registry, "gha_controller_ephemeral_runners_failed_total") == 1
    metrics.forget(labels)
    assert _value(registry, "gha_controller_ephemeral_runners_failed_total") is None
    assert _value(registry, "gha_controller_ephemeral_runners_deleted_total", reason="quota") is None


def test_disabled_metrics_record_nothing() -> None:
    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry, enabled=False)
    metrics.observe_scale_sets(lambda: scale_set_states([_set("arc", "u1")], lambda _s: _runners(Running=1)))
    metrics.count_created({"name": "arc", "namespace": "ns", "repository": "", "organization": "", "enterprise": ""})

    assert "gha_controller_running_ephemeral_runners" not in {m.name for m in registry.collect()}
    assert registry.get_sample_value("gha_controller_ephemeral_runners_created_total", {"name": "arc"}) is None


def test_a_runner_deleted_by_both_its_set_and_its_own_controller_is_counted_once() -> None:
    metrics = ControllerMetrics()
    labels = {"name": "s", "namespace": "n", "repository": "", "organization": "", "enterprise": ""}

    metrics.count_deleted(labels, DeletedReason.SUCCEEDED, runner="n/r1")
    metrics.count_deleted(labels, DeletedReason.SUCCEEDED, runner="n/r1")
    metrics.count_deleted(labels, DeletedReason.SCALE_DOWN, runner="n/r2")

    assert metrics.runners_deleted.labels(**labels, reason=DeletedReason.SUCCEEDED)._value.get() == 1
    assert metrics.runners_deleted.labels(**labels, reason=DeletedReason.SCALE_DOWN)._value.get() == 1


def test_a_jobs_wait_is_observed_in_every_phase_and_forgotten_with_the_scale_set() -> None:
    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry)
    labels = {"name": "arc", "namespace": "ns", "repository": "", "organization": "org", "enterprise": ""}
    metrics.observe_job_wait(labels, {Phase.NODE: 41.0, Phase.RUNNER_REGISTRATION: 3.0})

    name = "gha_controller_job_wait_phase_seconds"
    assert _value(registry, f"{name}_sum", phase="node") == 41
    assert _value(registry, f"{name}_count", phase="node") == 1
    assert _value(registry, f"{name}_sum", phase="runner_registration") == 3
    # Every phase is observed for every job (0 where it did not wait), so quantiles compare the same jobs.
    assert _value(registry, f"{name}_count", phase="acquisition") == 1
    assert _value(registry, f"{name}_bucket", phase="acquisition", le="0.5") == 1
    assert _value(registry, f"{name}_bucket", phase="node", le="30.0") == 0

    metrics.forget(labels)
    assert _value(registry, f"{name}_count", phase="node") is None
