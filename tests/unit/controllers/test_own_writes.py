"""OwnWrites: a status write diffs against the controller's own last write until the cache shows it."""

from __future__ import annotations

from arc_scaleset.controllers.own_writes import OwnWrites
from arc_scaleset.kube.informer import Object


def version(rv: str) -> Object:
    return {"metadata": {"name": "arc-runners", "resourceVersion": rv}}


def test_nothing_written_answers_the_cached_object() -> None:
    cached = version("1")
    assert OwnWrites().freshest(cached) is cached


def test_a_cache_behind_the_passs_own_writes_answers_the_last_write() -> None:
    writes = OwnWrites()
    read = version("1")
    finalizer_added = version("2")
    writes.wrote(read, finalizer_added)  # the pass's finalizer, made against what the cache showed
    assert writes.freshest(read) is finalizer_added
    status_written = version("3")
    writes.wrote(finalizer_added, status_written)
    # The cache may show either replaced version next: both are behind the status write.
    assert writes.freshest(version("1")) is status_written
    assert writes.freshest(version("2")) is status_written


def test_a_cache_that_caught_up_or_shows_another_writer_is_believed_and_the_memory_dropped() -> None:
    writes = OwnWrites()
    writes.wrote(version("1"), version("2"))
    someone_else = version("7")
    assert writes.freshest(someone_else) is someone_else
    # Forgotten: a version the old writes replaced is no longer answered with their result.
    stale = version("1")
    assert writes.freshest(stale) is stale
