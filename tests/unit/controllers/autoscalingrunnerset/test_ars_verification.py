"""When the AutoscalingRunnerSet checks its scale set on GitHub again (verification.plan_verification): at once
for a listener's "gone" report (once per report), when nothing vouches for the ID, when the listener is missing,
on a spec change or a stale registration record, else every interval."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from arc_scaleset.controllers.autoscalingrunnerset.scope import ScaleSetMemory
from arc_scaleset.controllers.autoscalingrunnerset.verification import (
    Verification,
    VerificationInputs,
    plan_verification,
    seconds_until_verification,
)

INTERVAL = 300.0
REPORT = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
QUIET = VerificationInputs(
    scale_set_id=7, gone_report=None, listener_missing=False, spec_changed=False, record_stale=False
)


def verified(at: float = 1000.0, scale_set_id: int = 7) -> ScaleSetMemory:
    memory = ScaleSetMemory()
    memory.verified(scale_set_id, at=at)
    return memory


def test_a_recently_verified_scale_set_is_not_verified_again_until_the_interval_has_passed() -> None:
    memory = verified(at=1000.0)
    assert plan_verification(memory, QUIET, now=1000.0 + INTERVAL - 1, interval=INTERVAL) == Verification(due=False)
    assert plan_verification(memory, QUIET, now=1000.0 + INTERVAL, interval=INTERVAL) == Verification(due=True)
    assert seconds_until_verification(memory, now=1100.0, interval=INTERVAL) == INTERVAL - 100.0
    assert seconds_until_verification(memory, now=1000.0 + 2 * INTERVAL, interval=INTERVAL) == 0.0


@pytest.mark.parametrize(
    ("memory", "inputs"),
    [
        (ScaleSetMemory(), QUIET),
        (verified(scale_set_id=6), QUIET),
        (verified(), dataclasses.replace(QUIET, listener_missing=True)),
        (verified(), dataclasses.replace(QUIET, spec_changed=True)),
        (verified(), dataclasses.replace(QUIET, record_stale=True)),
    ],
    ids=["never-verified", "another-id", "listener-missing", "spec-changed", "record-stale"],
)
def test_the_scale_set_is_verified_at_once_when_nothing_vouches_for_it(
    memory: ScaleSetMemory, inputs: VerificationInputs
) -> None:
    assert plan_verification(memory, inputs, now=1001.0, interval=INTERVAL) == Verification(due=True)


def test_a_gone_report_is_acted_on_once() -> None:
    memory = verified(at=1000.0)
    inputs = dataclasses.replace(QUIET, gone_report=REPORT)
    assert plan_verification(memory, inputs, now=1001.0, interval=INTERVAL) == Verification(True, REPORT)
    memory.gone_report = REPORT  # what the verification records once it acted on the report
    assert plan_verification(memory, inputs, now=1001.0, interval=INTERVAL) == Verification(due=False)
    later = dataclasses.replace(QUIET, gone_report=REPORT + dt.timedelta(seconds=30))
    assert plan_verification(memory, later, now=1001.0, interval=INTERVAL).gone_report == later.gone_report


def test_the_next_verification_of_a_scale_set_never_verified_is_a_whole_interval_away() -> None:
    assert seconds_until_verification(ScaleSetMemory(), now=5.0, interval=INTERVAL) == INTERVAL
