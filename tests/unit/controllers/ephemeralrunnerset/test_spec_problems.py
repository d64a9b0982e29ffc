"""What an EphemeralRunnerSet's spec holds back: a template above the size bound or one the API server refuses
creates no runner, replicas above the ceiling still create up to it; one condition names the first cause."""

from __future__ import annotations

from arc_scaleset.controllers.ephemeralrunnerset.spec_problems import spec_verdict

OVERSIZED = ("RunnerTemplateTooLarge", "the runner pod template ... is above the controller's bound")
ABOVE_CEILING = ("ReplicasAboveCeiling", "spec.replicas 50 is above the controller's ceiling")


def test_nothing_wrong_creates_and_names_no_problem() -> None:
    verdict = spec_verdict(oversized=None, rejection=None, above_ceiling=None)
    assert (verdict.problem, verdict.may_create) == (None, True)


def test_a_template_above_the_size_bound_creates_nothing_and_is_named_before_anything_else() -> None:
    verdict = spec_verdict(oversized=OVERSIZED, rejection="spec.volumes: Invalid", above_ceiling=ABOVE_CEILING)
    assert (verdict.problem, verdict.may_create) == (OVERSIZED, False)


def test_a_template_the_api_server_refuses_creates_nothing_and_quotes_the_refusal() -> None:
    verdict = spec_verdict(
        oversized=None, rejection="spec.volumes[0].name: Required value", above_ceiling=ABOVE_CEILING
    )
    assert verdict.may_create is False
    assert verdict.problem is not None
    reason, message = verdict.problem
    assert reason == "InvalidRunnerTemplate"
    assert "the API server refuses the runner pod: spec.volumes[0].name: Required value" in message
    assert "no runner is created (nor registered on GitHub)" in message


def test_replicas_above_the_ceiling_are_named_and_runners_are_still_created_up_to_it() -> None:
    verdict = spec_verdict(oversized=None, rejection=None, above_ceiling=ABOVE_CEILING)
    assert (verdict.problem, verdict.may_create) == (ABOVE_CEILING, True)
