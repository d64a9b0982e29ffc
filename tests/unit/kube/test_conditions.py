"""Status conditions: transitions, in-place updates, purity."""

from __future__ import annotations

import copy
import datetime as dt

import pytest

from arc_scaleset.kube.conditions import get_condition, is_condition_true, remove_condition, set_condition
from arc_scaleset.observability.logging import register_secret, unregister_secret

T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=5)


def _ready(conditions: list[dict[str, object]] | None, status: str, *, now: dt.datetime, reason: str = "Ok",
           message: str = "", generation: int = 1) -> list[dict[str, object]]:  # fmt: skip
    return set_condition(
        conditions, type="Ready", status=status, reason=reason, message=message,  # type: ignore[arg-type]
        observed_generation=generation, now=now,
    )  # fmt: skip


def test_a_new_condition_records_its_transition_time() -> None:
    conditions = _ready(None, "True", now=T0)
    assert conditions == [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Ok",
            "message": "",
            "lastTransitionTime": "2026-01-01T12:00:00Z",
            "observedGeneration": 1,
        }
    ]


def test_same_status_keeps_the_transition_time_but_updates_the_rest() -> None:
    first = _ready(None, "False", now=T0, reason="Pending", message="waiting")
    second = _ready(first, "False", now=T1, reason="StillPending", message="still waiting", generation=2)
    assert second[0]["lastTransitionTime"] == "2026-01-01T12:00:00Z"
    assert (second[0]["reason"], second[0]["message"], second[0]["observedGeneration"]) == (
        "StillPending",
        "still waiting",
        2,
    )


def test_status_change_moves_the_transition_time() -> None:
    first = _ready(None, "False", now=T0)
    second = _ready(first, "True", now=T1)
    assert second[0]["lastTransitionTime"] == "2026-01-01T12:05:00Z"


def test_other_conditions_keep_their_place_and_the_input_is_not_modified() -> None:
    existing = [
        {"type": "A", "status": "True", "reason": "R", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"},
        {
            "type": "Ready",
            "status": "False",
            "reason": "R",
            "message": "",
            "lastTransitionTime": "2025-01-01T00:00:00Z",
        },
        {"type": "B", "status": "True", "reason": "R", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"},
    ]
    snapshot = copy.deepcopy(existing)
    updated = _ready(existing, "True", now=T1)  # type: ignore[arg-type]
    assert existing == snapshot
    assert [c["type"] for c in updated] == ["A", "Ready", "B"]
    assert updated[1]["status"] == "True"


def test_get_and_is_true_and_remove() -> None:
    conditions = _ready(None, "True", now=T0)
    assert get_condition(conditions, "Ready") == conditions[0]
    assert get_condition(conditions, "Missing") is None
    assert is_condition_true(conditions, "Ready")
    assert not is_condition_true(_ready(None, "Unknown", now=T0), "Ready")
    assert remove_condition(conditions, "Ready") == []


def test_invalid_status_or_missing_reason_is_refused() -> None:
    with pytest.raises(ValueError, match="True, False or Unknown"):
        _ready(None, "true", now=T0)
    with pytest.raises(ValueError, match="needs a reason"):
        _ready(None, "True", now=T0, reason="")


def test_naive_timestamps_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        _ready(None, "True", now=dt.datetime(2026, 1, 1))


def test_a_condition_message_never_carries_a_secret() -> None:
    registered = "registered-credential-" + "9c1e4f7a2b"
    jwt_token = "eyJhbGciOiJIUzI1NiJ9.eyJ0aWQiOjF9.c2lnbmF0dXJl"
    register_secret(registered)
    try:
        (condition,) = _ready(
            None,
            "False",
            now=T0,
            reason="GitHubRequestFailed",
            message=f"GitHub answered 400: echo {registered}; Authorization: Bearer {jwt_token}",
        )
    finally:
        unregister_secret(registered)
    message = str(condition["message"])
    assert registered not in message
    assert jwt_token not in message
    assert message.startswith("GitHub answered 400: echo [REDACTED]")
