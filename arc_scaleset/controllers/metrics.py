"""The controller's own metrics: ``gha_controller_*`` gauges, ARC's names and labels.

One :class:`ControllerMetrics` per registry (a registry refuses duplicate names). Every gauge carries the
labels ``name``, ``namespace``, ``repository``, ``organization``, ``enterprise``; :func:`scale_set_labels`
builds them from an object's labels (the URL labels the controller writes) so dashboards written for ARC
work unchanged. With ``enabled=False`` (``--metrics-addr=0``) the families exist but nothing is recorded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge

from arc_scaleset.api.keys import (
    LABEL_GITHUB_ENTERPRISE,
    LABEL_GITHUB_ORGANIZATION,
    LABEL_GITHUB_REPOSITORY,
    EphemeralRunnerPhase,
)

METRIC_LABELS = ("name", "namespace", "repository", "organization", "enterprise")

# Runner gauges by phase: the three ARC published from the ERS, plus the per-phase ones of ARC #4557.
_RUNNER_PHASE_HELP: Mapping[EphemeralRunnerPhase, str] = {
    EphemeralRunnerPhase.PENDING: "Number of ephemeral runners in a pending state.",
    EphemeralRunnerPhase.RUNNING: "Number of ephemeral runners in a running state.",
    EphemeralRunnerPhase.FAILED: "Number of ephemeral runners in a failed state.",
    EphemeralRunnerPhase.SUCCEEDED: "Number of ephemeral runners in a succeeded state.",
    EphemeralRunnerPhase.OUTDATED: "Number of ephemeral runners in an outdated state.",
}


def scale_set_labels(name: str, namespace: str, object_labels: Mapping[str, str] | None) -> dict[str, str]:
    """The metric labels of a scale set's object: its name/namespace and the URL labels it carries."""
    labels = object_labels or {}
    return {
        "name": name,
        "namespace": namespace,
        "repository": labels.get(LABEL_GITHUB_REPOSITORY, ""),
        "organization": labels.get(LABEL_GITHUB_ORGANIZATION, ""),
        "enterprise": labels.get(LABEL_GITHUB_ENTERPRISE, ""),
    }


class ControllerMetrics:
    """The ``gha_controller_*`` families in ``registry``.

    - ``ephemeral_runners[phase]``: gauges ``gha_controller_<phase>_ephemeral_runners`` (pending, running,
      failed, succeeded, outdated); name/namespace are the scale set's (ERS ``scale-set-name`` /
      ``scale-set-namespace`` labels).
    - ``running_listeners``: ``gha_controller_running_listeners``, 1 while a listener container runs, 0
      otherwise; name/namespace are the AutoscalingListener's.
    - ``listener_restarts``: ``gha_controller_listener_restarts_total`` (beyond ARC): listener pods the
      controller recreated after a failure, eviction or node loss.
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, enabled: bool = True) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.enabled = enabled
        self.ephemeral_runners: dict[EphemeralRunnerPhase, Gauge] = {
            phase: Gauge(
                f"gha_controller_{phase.value.lower()}_ephemeral_runners",
                help_text,
                METRIC_LABELS,
                registry=self.registry,
            )
            for phase, help_text in _RUNNER_PHASE_HELP.items()
        }
        self.running_listeners = Gauge(
            "gha_controller_running_listeners",
            "Number of listeners in a running state.",
            METRIC_LABELS,
            registry=self.registry,
        )
        self.listener_restarts = Counter(
            "gha_controller_listener_restarts",
            "Listener pods recreated by the controller after a failure, an eviction or a lost node.",
            METRIC_LABELS,
            registry=self.registry,
        )

    def set_runner_count(self, phase: EphemeralRunnerPhase, labels: Mapping[str, str], count: int) -> None:
        if self.enabled:
            self.ephemeral_runners[phase].labels(**labels).set(count)

    def add_runner_count(self, phase: EphemeralRunnerPhase, labels: Mapping[str, str], delta: int) -> None:
        if self.enabled:
            self.ephemeral_runners[phase].labels(**labels).inc(delta)

    def set_listener_running(self, labels: Mapping[str, str], running: bool) -> None:
        if self.enabled:
            self.running_listeners.labels(**labels).set(1 if running else 0)

    def count_listener_restart(self, labels: Mapping[str, str]) -> None:
        if self.enabled:
            self.listener_restarts.labels(**labels).inc()

    def forget(self, labels: Mapping[str, str]) -> None:
        """Drop every series of one scale set / listener (it was deleted)."""
        values = tuple(labels[key] for key in METRIC_LABELS)
        for gauge in (*self.ephemeral_runners.values(), self.running_listeners, self.listener_restarts):
            with contextlib.suppress(KeyError):
                gauge.remove(*values)
