"""Which shard of its key's groups a scale set joins (api/group_shards.py): the rules of its docstring."""

from __future__ import annotations

from arc_scaleset.api.group_shards import SAFE_SECRET_BYTES, ShardLoad, choose_shard, has_room, secret_load
from arc_scaleset.api.listener_group import MAX_SHARDS

FULL = ShardLoad(members=3, published=3, published_bytes=3 * 1000)


def test_rule_1_a_set_keeps_its_shard_however_full() -> None:
    assert choose_shard(2, [FULL, FULL, FULL], max_members=3) == 2
    assert choose_shard(0, [FULL], max_members=3) == 0


def test_rule_2_a_joining_set_takes_the_lowest_shard_with_room() -> None:
    room = ShardLoad(members=1, published=1, published_bytes=1000)
    assert choose_shard(None, [], max_members=3) == 0  # the key's first set: shard 0, the key's own group ID
    assert choose_shard(None, [room], max_members=3) == 0
    assert choose_shard(None, [FULL, room], max_members=3) == 1
    assert choose_shard(None, [FULL, ShardLoad(), FULL], max_members=3) == 1  # an emptied shard fills first
    assert choose_shard(None, [FULL, FULL], max_members=3) == 2  # a new shard past the full ones


def test_rule_3_room_by_count_and_by_the_secrets_size() -> None:
    assert has_room(ShardLoad(members=2, published=2, published_bytes=2000), max_members=3, budget_bytes=10_000)
    assert not has_room(FULL, max_members=3, budget_bytes=10_000)
    assert has_room(FULL, max_members=0, budget_bytes=10_000)  # 0: no limit by count
    # By size: one more member at the average size of those published must fit the budget.
    assert has_room(FULL, max_members=0, budget_bytes=4000)
    assert not has_room(FULL, max_members=0, budget_bytes=3999)
    # Members whose keys are not published yet count at the average size too.
    assert not has_room(ShardLoad(members=5, published=3, published_bytes=3000), max_members=0, budget_bytes=5999)
    assert has_room(ShardLoad(members=5), max_members=0, budget_bytes=1)  # nothing published yet: nothing to judge


def test_a_group_with_github_app_credentials_is_bounded_below_the_secrets_limit() -> None:
    # About 2.3 KB per member with an App: a shard takes about 390 before the next one opens.
    app = 2300
    members = 0
    while has_room(ShardLoad(members, members, members * app), max_members=0, budget_bytes=SAFE_SECRET_BYTES):
        members += 1
    assert members == SAFE_SECRET_BYTES // app
    assert members * app < 1024 * 1024


def test_rule_4_when_no_shard_has_room_the_last_one() -> None:
    assert choose_shard(None, [FULL] * MAX_SHARDS, max_members=3) == MAX_SHARDS - 1


def test_a_shards_load_from_its_members_and_its_secrets_data() -> None:
    assert secret_load(2, None) == ShardLoad(members=2)
    assert secret_load(2, {"a-listener": "eHl6", "b": "eA=="}) == ShardLoad(2, 2, len("a-listener") + 4 + 1 + 4)
