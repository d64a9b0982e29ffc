"""When a pass of an EphemeralRunnerSet reads its runner proxy Secret (ephemeralrunnerset/proxy.py): only when the
data it should hold changed since this process last found or wrote it there, or that was long ago."""

from __future__ import annotations

import asyncio

from arc_scaleset.clock import FakeClock
from arc_scaleset.controllers.ephemeralrunnerset.proxy import ProxySecretCheck, check_due, data_digest

DATA = {"http_proxy": "aHR0cDovL3U6cEBwcm94eTozMTI4", "https_proxy": "", "no_proxy": ""}


def test_a_set_never_checked_reads_its_runner_proxy_secret() -> None:
    assert check_due(None, 0.0, data_digest(DATA), now=5.0, recheck_after=300.0)


def test_unchanged_data_checked_recently_is_not_read_again() -> None:
    digest = data_digest(DATA)
    assert not check_due(digest, 100.0, digest, now=399.0, recheck_after=300.0)


def test_unchanged_data_is_read_again_once_the_check_is_old_so_a_hand_edit_is_put_back() -> None:
    digest = data_digest(DATA)
    assert check_due(digest, 100.0, digest, now=400.0, recheck_after=300.0)


def test_a_rotated_proxy_password_is_read_at_once() -> None:
    rotated = {**DATA, "http_proxy": "aHR0cDovL3U6cTJAcHJveHk6MzEyOA=="}
    assert check_due(data_digest(DATA), 100.0, data_digest(rotated), now=101.0, recheck_after=300.0)


def test_the_digest_does_not_depend_on_key_order_and_holds_no_data() -> None:
    reordered = dict(reversed(list(DATA.items())))
    assert data_digest(reordered) == data_digest(DATA)
    assert DATA["http_proxy"] not in data_digest(DATA)


def test_the_check_remembers_what_was_put_in_line_and_when() -> None:
    clock = FakeClock()
    check = ProxySecretCheck(clock=clock, recheck_after=60.0)
    digest = data_digest(DATA)
    assert check.due(digest)
    check.in_line(digest)
    assert not check.due(digest)
    asyncio.run(clock.advance(60.0))
    assert check.due(digest)
