"""Which shard of its key's groups a scale set joins: a group's config Secret stays under the 1 MiB a Secret may
hold (docs/listener.md, "Shared listener"; issue 30). Pure.

Every set of one :class:`~arc_scaleset.api.listener_group.GroupKey` could share one listener, but the group's
config Secret holds one ``config.json`` per member: about 700 bytes with a PAT, about 2.3 KB with a GitHub App
(each carries the private key), more with a CA bundle. So the key's sets are spread over shards, groups of their
own (:func:`~arc_scaleset.api.listener_group.group_id` of the key and the shard), each with a pod and a Secret,
and :func:`choose_shard` decides, by these rules, in order:

1. **A set keeps the shard it is in.** When its listener exists and is in a shard of this very key, that shard
   is the answer, however full: a set is never moved, so no session of a set that did not change has a gap
   ("no gap for the sets that did not change", issue 30). A set that changes key (credentials, pod shape) has no
   shard of the new key and goes by rule 2.
2. **A set that joins goes to the lowest-numbered shard with room** (:func:`has_room`), counting from 0, whose
   ID is the key's alone, as before there were shards: a key whose sets fit one group has one group, with the ID
   it always had. Shards emptied by departures fill again first.
3. **Room**: the shard has fewer than ``max_members`` members (0: no limit by count), and with one member more
   its config Secret, at the average size of the configs it holds now, stays within ``budget_bytes``. A shard
   whose Secret holds nothing yet has room.
4. A shard no set is in has room; when no shard below :data:`~arc_scaleset.api.listener_group.MAX_SHARDS` has
   room, the last one.

The member counts include the seats of listeners the controller is making and its cache does not show yet
(:mod:`arc_scaleset.controllers.shard_seats`), so the count limit is exact; the Secret's size is what the cache
shows, so sets that join at once may pass the size budget by a few configs: it is well under the Secret's limit
for that (:data:`SAFE_SECRET_BYTES`).

Standard library only: the listener process imports :mod:`arc_scaleset.api.listener_group`, not this module, but
it is part of the same contract.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from arc_scaleset.api.listener_group import MAX_SHARDS

SAFE_SECRET_BYTES: Final = 900 * 1024
"""The size a group's config Secret is kept under: 124 KiB below the API server's 1 MiB for a Secret's data,
for the keys' names and for members that join before the cache shows the others."""


@dataclass(frozen=True)
class ShardLoad:
    """One shard as the controller sees it: ``members``, the listeners labelled with its group (other than the
    choosing set's); ``published`` keys in its config Secret, of ``published_bytes`` in all (names and values)."""

    members: int = 0
    published: int = 0
    published_bytes: int = 0


def has_room(load: ShardLoad, *, max_members: int, budget_bytes: int) -> bool:
    """Rule 3: whether one more member fits ``load``'s shard."""
    if max_members > 0 and load.members >= max_members:
        return False
    if not load.published:
        return True
    per_member = load.published_bytes / load.published
    return (max(load.members, load.published) + 1) * per_member <= budget_bytes


def choose_shard(
    kept: int | None,
    loads: Sequence[ShardLoad],
    *,
    max_members: int = 0,
    budget_bytes: int = SAFE_SECRET_BYTES,
) -> int:
    """The shard a set joins (module docstring): ``kept``, the shard of its key its listener is in (``None``: it
    has none); ``loads``, the loads of shards 0, 1, ... in order, at least up to the first with room (a shard
    past the end is empty: it has room)."""
    if kept is not None:
        return kept
    for shard, load in enumerate(loads):
        if has_room(load, max_members=max_members, budget_bytes=budget_bytes):
            return shard
    return min(len(loads), MAX_SHARDS - 1)


def secret_load(members: int, data: Mapping[str, str] | None) -> ShardLoad:
    """A shard's load from its member count and its config Secret's ``data`` (``None``: no Secret)."""
    data = data or {}
    size = sum(len(name) + len(value) for name, value in data.items())
    return ShardLoad(members=members, published=len(data), published_bytes=size)
