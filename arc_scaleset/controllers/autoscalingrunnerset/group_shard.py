"""Which shard of its key's shared listeners a scale set's AutoscalingListener joins (part of the listener phase,
:mod:`.listener_phase`; the rules are :mod:`arc_scaleset.api.group_shards`'s).

The shell reads what the choice needs: the shard the set's listener is in now (its label and
:data:`~arc_scaleset.api.listener_group.ANNOTATION_GROUP_SHARD`), and, only for a set that joins, each shard's
members (the listener cache, by group label, and the seats of listeners it does not show yet) and its config
Secret's data (read once per change, :attr:`~arc_scaleset.controllers.context.ControllerContext.group_secrets`),
shard by shard until one has room.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.group_shards import SAFE_SECRET_BYTES, ShardLoad, choose_shard, has_room, secret_load
from arc_scaleset.api.listener_group import (
    LABEL_GROUP,
    MAX_SHARDS,
    GroupKey,
    group_id,
    group_object_name,
    shard_of,
)
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.kube.views import ObjectView


def kept_shard(live: Mapping[str, Any] | None, key: GroupKey) -> int | None:
    """The shard of ``key`` the live listener is in (``None``: there is none, or it is in no shard of this key:
    another key's, or a listener of its own). Pure."""
    if live is None:
        return None
    view = ObjectView(live)
    shard = shard_of(view.annotations)
    return shard if view.labels.get(LABEL_GROUP) == group_id(key, shard) else None


async def shard_for(ctx: ControllerContext, key: GroupKey, *, live: Mapping[str, Any] | None, own: str) -> int:
    """The shard the listener ``own`` (its name), with ``live`` its current object, joins or stays in. A set that
    joins takes a seat in its shard (:mod:`arc_scaleset.controllers.shard_seats`), so the count limit is exact
    for the sets this process places at once."""
    kept = kept_shard(live, key)
    if kept is not None:
        return kept
    max_members = ctx.settings.shared_listener_max_members
    for _ in range(MAX_SHARDS):
        shard = choose_shard(None, await _loads(ctx, key, own=own), max_members=max_members)
        group = group_id(key, shard)
        # From this count to the seat there is no await: of two passes, one takes a shard's last place, and
        # the other chooses again from loads that count it.
        full = 0 < max_members <= len(_members(ctx, group, own=own))
        if not full or shard == MAX_SHARDS - 1:
            break
    ctx.shard_seats.take(own, group, now=ctx.clock.monotonic())
    return shard


async def _loads(ctx: ControllerContext, key: GroupKey, *, own: str) -> list[ShardLoad]:
    """The loads of ``key``'s shards 0, 1, ... up to the first with room (:func:`choose_shard`'s argument)."""
    loads: list[ShardLoad] = []
    for shard in range(MAX_SHARDS):
        load = await _load(ctx, group_id(key, shard), own=own)
        loads.append(load)
        if has_room(load, max_members=ctx.settings.shared_listener_max_members, budget_bytes=SAFE_SECRET_BYTES):
            break
    return loads


async def _load(ctx: ControllerContext, group: str, *, own: str) -> ShardLoad:
    members = _members(ctx, group, own=own)
    if not members:
        return ShardLoad()
    secret = await ctx.group_secrets.get(group_object_name(group))
    return secret_load(len(members), (secret or {}).get("data"))


def _members(ctx: ControllerContext, group: str, *, own: str) -> frozenset[str]:
    """The listeners (names) in ``group`` other than ``own``: those the cache shows labelled with it, and those
    holding a seat there that it does not show yet."""
    namespace = ctx.settings.controller_namespace
    cached = {
        view.name
        for view in map(ObjectView, ctx.cache(AUTOSCALING_LISTENERS).by_label(LABEL_GROUP, group))
        if view.namespace == namespace
    }
    seated = ctx.shard_seats.holders(group, cached=cached, now=ctx.clock.monotonic())
    return frozenset((cached | seated) - {own})
