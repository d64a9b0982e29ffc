"""The Degraded condition a persistent reconcile failure writes, and takes back (controllers/failure_report.py)."""

from __future__ import annotations

import datetime as dt

from arc_scaleset.controllers.failure_report import failing_conditions, recovered_conditions
from arc_scaleset.kube.conditions import get_condition, set_condition
from arc_scaleset.kube.failures import Failure

T0 = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
LEAKY = Failure(
    reason="Invalid",
    error="422 Invalid: https://x-access-token:ghs_abcdefghijklmnopqrstuvwxyz0123456789@github.com refused",
    since=T0,
    attempts=3,
)


def test_a_persistent_failure_is_degraded_with_its_reason_and_masked_text_written_once() -> None:
    conditions = failing_conditions([], LEAKY, generation=4, now=T0)
    assert conditions is not None
    degraded = get_condition(conditions, "Degraded")
    assert degraded is not None
    assert (degraded["status"], degraded["reason"], degraded["observedGeneration"]) == ("True", "Invalid", 4)
    assert "ghs_abcdefghijklmnopqrstuvwxyz0123456789" not in degraded["message"]
    assert failing_conditions(conditions, LEAKY, generation=4, now=T0 + dt.timedelta(minutes=1)) is None


def test_recovery_clears_degraded_only_while_it_still_shows_the_failure() -> None:
    failing = failing_conditions([], LEAKY, generation=1, now=T0)
    assert failing is not None
    cleared = recovered_conditions(failing, LEAKY, generation=1, now=T0)
    assert cleared is not None
    degraded = get_condition(cleared, "Degraded")
    assert degraded is not None
    assert (degraded["status"], degraded["reason"]) == ("False", "ReconcileRecovered")

    rewritten = set_condition(failing, type="Degraded", status="True", reason="ListenerOffline", message="offline",
                              observed_generation=1, now=T0)  # fmt: skip
    assert recovered_conditions(rewritten, LEAKY, generation=1, now=T0) is None, "a reconciler's newer verdict stands"
