"""What a listener's pass may take as still in line without reading its own Secrets (child_secrets.py): pure."""

from __future__ import annotations

from arc_scaleset.controllers.autoscalinglistener.child_secrets import (
    Checked,
    fingerprint,
    listener_of,
    still_holds,
)


def test_a_secret_still_holds_what_was_seen_while_the_watch_shows_no_other_version() -> None:
    read = Checked(version="7", wanted="a", watched="7")
    assert still_holds(read, "a", "7")
    assert not still_holds(read, "a", "8")  # someone else changed it
    assert not still_holds(read, "b", "7")  # the pass wants something else now: read it
    assert not still_holds(read, "a", None)  # not watched, or the watch is not running
    assert not still_holds(None, "a", "7")


def test_a_write_is_taken_at_its_word_until_the_watch_shows_a_version_after_it() -> None:
    written = Checked(version="8", wanted="a", watched="7")
    assert still_holds(written, "a", "7")  # the watch has not caught up with the write, and has seen nothing after
    assert still_holds(written, "a", "8")
    assert not still_holds(written, "a", "9")


def test_only_a_listeners_config_and_proxy_secrets_name_a_listener() -> None:
    assert listener_of("arc-runners-754b578d-listener-config") == "arc-runners-754b578d-listener"
    assert listener_of("arc-runners-754b578d-listener-proxy") == "arc-runners-754b578d-listener"
    assert listener_of("sh.helm.release.v1.arc.v1") is None
    assert listener_of("-config") is None


def test_the_digest_of_a_desired_secret_depends_on_its_content_not_its_key_order() -> None:
    one = {"metadata": {"name": "x", "labels": {"a": "1", "b": "2"}}, "data": {"config.json": "e30="}}
    same = {"data": {"config.json": "e30="}, "metadata": {"labels": {"b": "2", "a": "1"}, "name": "x"}}
    other = {"metadata": {"name": "x", "labels": {"a": "1", "b": "2"}}, "data": {"config.json": "e31="}}
    assert fingerprint(one) == fingerprint(same)
    assert fingerprint(one) != fingerprint(other)
    assert "e30=" not in fingerprint(one)
