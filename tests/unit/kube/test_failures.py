"""A reconcile that keeps failing is reported (kube/failures.py and the controller runtime), on a fake clock:
after 3 failed passes or 60 s, once per distinct error, and again when a pass succeeds."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from arc_scaleset.clock import FakeClock
from arc_scaleset.kube.conditions import set_condition
from arc_scaleset.kube.controller import Controller, Request, Result
from arc_scaleset.kube.errors import Invalid
from arc_scaleset.kube.failures import (
    ERROR_TEXT_LIMIT,
    Failure,
    FailurePolicy,
    FailureTracker,
    failure_reason,
    pass_failure,
)
from arc_scaleset.kube.informer import Informer
from arc_scaleset.kube.resources import CONFIG_MAPS, Resource
from arc_scaleset.kube.workqueue import ItemExponentialRateLimiter
from arc_scaleset.observability.logging import register_secret, unregister_secret
from arc_scaleset_lab.harness.waiting import eventually

KEY = Request("ns", "a")
REFUSED = Invalid(422, "Invalid", 'EphemeralRunnerSet.actions.github.com "a" is invalid: spec.patchID: Required value')


def no_informers(_: Resource) -> list[Informer]:
    return []


@dataclass
class Recorder:
    """What a FailureReporter (:class:`Reporter`) was told."""

    failing: list[tuple[Failure, bool]] = field(default_factory=list)
    recovered: list[Failure] = field(default_factory=list)


class Reporter:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    async def failing(self, key: Request, failure: Failure, *, announce: bool) -> None:
        self.recorder.failing.append((failure, announce))

    async def recovered(self, key: Request, failure: Failure) -> None:
        self.recorder.recovered.append(failure)


# -- the tracker ------------------------------------------------------------------------------------------------


def test_a_failure_is_persistent_from_the_third_failed_pass_in_a_row() -> None:
    tracker = FailureTracker(clock=FakeClock())
    assert tracker.failed(KEY, REFUSED) is None
    assert tracker.failed(KEY, REFUSED) is None
    failure = tracker.failed(KEY, REFUSED)
    assert failure is not None
    assert (failure.reason, failure.attempts) == ("Invalid", 3)
    assert "spec.patchID: Required value" in failure.message


async def test_a_failure_is_persistent_sixty_seconds_after_the_first_failed_pass() -> None:
    clock = FakeClock()
    tracker = FailureTracker(clock=clock)
    started = clock.now()
    assert tracker.failed(KEY, REFUSED) is None
    await clock.advance(59.9)
    assert tracker.judge(KEY, REFUSED) is None
    await clock.advance(0.1)
    failure = tracker.failed(KEY, REFUSED)
    assert failure is not None
    assert failure.attempts == 2
    assert failure.since == started


def test_judging_a_pass_changes_nothing_and_agrees_with_recording_it() -> None:
    tracker = FailureTracker(clock=FakeClock())
    tracker.failed(KEY, REFUSED)
    tracker.failed(KEY, REFUSED)
    assert tracker.judge(KEY, REFUSED) == tracker.judge(KEY, REFUSED)
    assert tracker.judge(KEY, REFUSED) == tracker.failed(KEY, REFUSED)


def test_the_same_error_is_announced_once_and_another_error_again() -> None:
    tracker = FailureTracker(policy=FailurePolicy(attempts=1), clock=FakeClock())
    first = tracker.failed(KEY, REFUSED)
    assert first is not None
    assert tracker.announce(KEY, first)
    again = tracker.failed(KEY, REFUSED)
    assert again is not None
    assert not tracker.announce(KEY, again)
    other = tracker.failed(KEY, TimeoutError("the API server did not answer"))
    assert other is not None
    assert other.reason == "TimeoutError"
    assert tracker.announce(KEY, other)


def test_a_success_ends_the_run_and_gives_back_the_last_failure_reported() -> None:
    tracker = FailureTracker(policy=FailurePolicy(attempts=1), clock=FakeClock())
    failure = tracker.failed(KEY, REFUSED)
    assert failure is not None
    tracker.announce(KEY, failure)
    assert tracker.succeeded(KEY) == failure
    assert tracker.succeeded(KEY) is None, "nothing left to take back"
    assert len(tracker) == 0
    tracker.failed(KEY, REFUSED)
    assert tracker.succeeded(KEY) is None, "a failure never reported needs no recovery"


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (REFUSED, "Invalid"),
        (ValueError("x"), "ValueError"),
        (type("Odd", (Exception,), {"reason": "not a reason!"})(), "Odd"),
    ],
)
def test_the_reason_is_the_errors_own_when_usable_as_a_condition_reason(exc: Exception, reason: str) -> None:
    assert failure_reason(exc) == reason


PROXY_PASSWORD = "correct-horse-battery-staple-42"
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5" * 4


@pytest.mark.parametrize("secret", [PROXY_PASSWORD, GITHUB_TOKEN], ids=["registered-secret", "github-token"])
def test_a_secret_that_straddles_the_cut_of_a_long_error_reaches_no_condition_or_event(secret: str) -> None:
    # The text kept is cut at ERROR_TEXT_LIMIT characters; a secret across the cut, masked only after it, would
    # leave its first characters behind, which neither the registered value nor a token pattern matches.
    register_secret(PROXY_PASSWORD)
    try:
        text = f"{'x' * (ERROR_TEXT_LIMIT - len('ValueError: ') - 12)} {secret} and more after it"
        tracker = FailureTracker(clock=FakeClock(), policy=FailurePolicy(attempts=1))
        failure = tracker.failed(KEY, ValueError(text))
        assert failure is not None
        written = set_condition(
            [],
            type="Failing",
            status="True",
            reason=failure.reason,
            message=failure.message,
            observed_generation=None,
            now=FakeClock().now(),
        )
        assert secret[:8] not in str(written)
        assert secret[:8] not in failure.message
        assert "[REDACTED]" in failure.message
    finally:
        unregister_secret(PROXY_PASSWORD)


# -- the controller -----------------------------------------------------------------------------------------------


async def test_a_reconcile_failing_for_a_minute_is_reported_once_and_its_recovery_too() -> None:
    clock = FakeClock()
    recorder = Recorder()
    passes: list[Failure | None] = []
    healthy = False

    async def reconcile(request: Request) -> Result:
        if healthy:
            return Result()
        # What a reconciler writing its own status learns inside the failing pass.
        passes.append(pass_failure(REFUSED))
        raise REFUSED

    controller = Controller(
        "demo", CONFIG_MAPS, reconcile, clock=clock, failure_reporter=Reporter(recorder),
        rate_limiter=ItemExponentialRateLimiter(base=40.0, cap=40.0),
    )  # fmt: skip
    controller.start(no_informers)
    controller.enqueue(KEY)
    await eventually(lambda: len(passes) == 1 and clock.sleepers == 1)
    assert passes == [None]
    assert recorder.failing == []
    await clock.advance(40.0)
    await eventually(lambda: len(passes) == 2 and clock.sleepers == 1)
    assert passes[-1] is None, "two passes within 40 s are not persistent yet"
    assert recorder.failing == []
    await clock.advance(40.0)
    await eventually(lambda: len(recorder.failing) == 1 and clock.sleepers == 1)
    failure, announce = recorder.failing[0]
    assert announce
    assert failure.reason == "Invalid"
    assert failure.attempts == 3
    assert passes[-1] == failure, "the pass's own status write says what the reporter is told"
    await clock.advance(40.0)
    await eventually(lambda: len(recorder.failing) == 2 and clock.sleepers == 1)
    assert recorder.failing[1][1] is False, "the same error is announced once"

    healthy = True
    await clock.advance(40.0)
    await eventually(lambda: recorder.recovered == [recorder.failing[1][0]])
    await eventually(lambda: controller.queue.processing == 0)
    assert len(controller.failures) == 0
    await controller.stop()


async def test_errors_the_reconcile_reports_itself_are_never_reported_again() -> None:
    clock = FakeClock()
    recorder = Recorder()
    calls = 0

    async def reconcile(request: Request) -> Result:
        nonlocal calls
        calls += 1
        raise REFUSED

    controller = Controller(
        "demo", CONFIG_MAPS, reconcile, clock=clock, failure_reporter=Reporter(recorder), self_reported=(Invalid,),
        rate_limiter=ItemExponentialRateLimiter(base=1.0, cap=1.0),
    )  # fmt: skip
    controller.start(no_informers)
    controller.enqueue(KEY)
    for expected in range(1, 5):
        await eventually(lambda n=expected: calls == n and clock.sleepers == 1)  # type: ignore[misc]
        await clock.advance(1.0)
    assert recorder.failing == []
    await controller.stop()


async def test_a_reporter_that_fails_does_not_stop_the_retries() -> None:
    clock = FakeClock()
    calls = 0

    class Broken:
        async def failing(self, key: Request, failure: Failure, *, announce: bool) -> None:
            raise RuntimeError("the API server is down too")

        async def recovered(self, key: Request, failure: Failure) -> None:
            raise RuntimeError("still down")

    async def reconcile(request: Request) -> Result:
        nonlocal calls
        calls += 1
        if calls <= 3:
            raise REFUSED
        return Result()

    controller = Controller(
        "demo", CONFIG_MAPS, reconcile, clock=clock, failure_reporter=Broken(),
        rate_limiter=ItemExponentialRateLimiter(base=1.0, cap=1.0),
    )  # fmt: skip
    controller.start(no_informers)
    controller.enqueue(KEY)
    for expected in range(1, 4):
        await eventually(lambda n=expected: calls == n and clock.sleepers == 1)  # type: ignore[misc]
        await clock.advance(1.0)
    await eventually(lambda: calls == 4 and controller.queue.processing == 0)
    await controller.stop()
