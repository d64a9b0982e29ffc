"""Creation expectations: a runner the set deleted itself is no longer awaited, the others still are."""

from __future__ import annotations

from arc_scaleset.controllers.ephemeralrunnerset.expectations import CreationExpectations

NEVER = 24 * 3600.0


def _never_seen(name: str) -> bool:
    return False


def test_runners_the_set_deleted_before_any_pass_saw_them_do_not_hold_it_up() -> None:
    expectations = CreationExpectations(timeout=NEVER)
    expectations.expect(["a", "b"])
    expectations.discard("a")
    expectations.discard("b")
    assert expectations.outstanding(seen=_never_seen) == 0


def test_a_created_runner_not_deleted_is_still_awaited_until_the_cache_shows_it() -> None:
    expectations = CreationExpectations(timeout=NEVER)
    expectations.expect(["a", "b"])
    expectations.discard("a")
    assert expectations.outstanding(seen=_never_seen) == 1
    assert expectations.outstanding(seen=lambda name: name == "b") == 0


def test_discarding_a_name_never_expected_changes_nothing() -> None:
    expectations = CreationExpectations(timeout=NEVER)
    expectations.discard("a")
    expectations.expect(["x"])
    expectations.discard("y")
    assert expectations.outstanding(seen=_never_seen) == 1
