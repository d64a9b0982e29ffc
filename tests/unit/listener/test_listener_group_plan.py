"""The shared listener's pure decisions: which members to start, stop and replace, and the group's probes."""

from __future__ import annotations

import base64
import hashlib

from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.listener.group_plan import (
    GroupPlan,
    MemberProgress,
    Wanted,
    group_liveness,
    group_readiness,
    plan_members,
    wanted_members,
)


def secret(**configs: bytes) -> dict[str, object]:
    return {"data": {name: base64.b64encode(raw).decode() for name, raw in configs.items()}}


def digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def test_a_secret_asks_for_one_member_per_key_with_the_decoded_config() -> None:
    wanted = wanted_members(secret(a=b'{"x": 1}', b=b"{}"))
    assert {name: w.raw for name, w in wanted.items()} == {"a": b'{"x": 1}', "b": b"{}"}
    assert wanted["a"].digest == digest(b'{"x": 1}')


def test_a_deleted_secret_or_one_without_data_asks_for_no_member() -> None:
    assert wanted_members(None) == {}
    assert wanted_members({"metadata": {"name": "s"}}) == {}
    assert wanted_members({"data": None}) == {}


def test_a_value_that_is_not_base64_becomes_an_empty_config_rather_than_vanishing() -> None:
    wanted = wanted_members({"data": {"a": "not base64!"}})
    assert wanted["a"].raw == b""


def test_a_wanted_config_never_shows_its_credentials_in_its_repr() -> None:
    raw = b'{"github_token": "ghp_secret_value_123456"}'
    assert "ghp_secret" not in repr(Wanted(raw=raw, digest=digest(raw)))


def test_new_keys_start_removed_keys_stop_changed_keys_are_replaced_and_the_rest_is_untouched() -> None:
    wanted = wanted_members(secret(keep=b"1", changed=b"new", added=b"3"))
    running = {"keep": digest(b"1"), "changed": digest(b"old"), "removed": digest(b"4")}
    assert plan_members(wanted, running) == GroupPlan(start=("added",), stop=("removed",), replace=("changed",))


def test_nothing_to_do_when_the_secret_matches_the_running_members() -> None:
    wanted = wanted_members(secret(a=b"1", b=b"2"))
    plan = plan_members(wanted, {"a": digest(b"1"), "b": digest(b"2")})
    assert plan.empty


configs = st.dictionaries(st.sampled_from("abcdefg"), st.binary(max_size=4), max_size=7)


@given(before=configs, after=configs)
def test_applying_the_plan_gives_exactly_the_wanted_members_and_touches_only_what_changed(
    before: dict[str, bytes], after: dict[str, bytes]
) -> None:
    running = {name: digest(raw) for name, raw in before.items()}
    wanted = wanted_members(secret(**after))
    plan = plan_members(wanted, running)
    touched = {*plan.start, *plan.stop, *plan.replace}
    result = {name: d for name, d in running.items() if name not in plan.stop and name not in plan.replace}
    result.update({name: wanted[name].digest for name in (*plan.start, *plan.replace)})
    assert result == {name: w.digest for name, w in wanted.items()}
    assert all(before.get(name) != after.get(name) for name in touched)
    assert len(touched) == len(plan.start) + len(plan.stop) + len(plan.replace)


def test_a_group_without_members_is_alive_and_ready() -> None:
    assert group_liveness([], now=1000.0, window=60.0)[0]
    assert group_readiness([])[0]


def test_the_group_is_alive_while_one_member_polls_even_if_the_others_never_did() -> None:
    members = [MemberProgress(started=0.0, last_poll=None), MemberProgress(started=0.0, last_poll=950.0)]
    ok, why = group_liveness(members, now=1000.0, window=60.0)
    assert ok
    assert why == "1 of 2 members made progress within 60s"


def test_a_member_just_started_counts_as_progress() -> None:
    assert group_liveness([MemberProgress(started=990.0, last_poll=None)], now=1000.0, window=60.0)[0]


def test_the_group_fails_liveness_when_no_member_has_polled_within_the_window() -> None:
    members = [MemberProgress(started=0.0, last_poll=None), MemberProgress(started=0.0, last_poll=900.0)]
    ok, why = group_liveness(members, now=1000.0, window=60.0)
    assert not ok
    assert why == "no member has polled for 100s (window 60s)"


def test_the_group_is_ready_while_one_member_holds_a_session() -> None:
    assert group_readiness([False, True, False]) == (True, "1 of 3 members hold a message session")
    assert group_readiness([False, False]) == (False, "none of 2 members holds a message session")
