"""The shared listener's grouping rule: which scale sets share a listener, and the names of the group's objects."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api import listener_group
from arc_scaleset.api.listener_group import GroupKey, group_id, group_key, group_object_name, group_of, is_shared


def _spec(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "githubConfigUrl": "https://github.com/org",
        "githubConfigSecret": "github-credentials",
        "runnerScaleSetId": 1,
        "autoscalingRunnerSetNamespace": "team-a",
        "autoscalingRunnerSetName": "set-a",
        "ephemeralRunnerSetName": "set-a",
        "maxRunners": 5,
        "minRunners": 0,
        "image": "arc-scaleset:1",
    }
    spec.update(overrides)
    return {key: value for key, value in spec.items() if value is not None}


def test_only_the_annotation_value_true_opts_in() -> None:
    assert is_shared({"listener.arc-scaleset.dev/shared": "true"})
    assert not is_shared({"listener.arc-scaleset.dev/shared": "True"})
    assert not is_shared({"listener.arc-scaleset.dev/shared": ""})
    assert not is_shared({})
    assert not is_shared(None)


def test_sets_that_differ_only_in_per_set_fields_share_a_key() -> None:
    first = group_key(_spec())
    second = group_key(
        _spec(
            githubConfigUrl="https://github.com/org/repo",
            runnerScaleSetId=2,
            autoscalingRunnerSetName="set-b",
            ephemeralRunnerSetName="set-b",
            maxRunners=9,
            minRunners=1,
            metrics={"counters": {}},
            githubServerTLS={"certificateFrom": {"configMapKeyRef": {"name": "ca", "key": "ca.crt"}}},
        )
    )
    assert first is not None
    assert first == second
    assert second is not None
    assert group_id(first) == group_id(second)


@pytest.mark.parametrize(
    "change",
    [
        {"autoscalingRunnerSetNamespace": "team-b"},
        {"githubConfigSecret": "other-credentials"},
        {"vaultConfig": {"type": "azure_key_vault"}},
        {"image": "arc-scaleset:2"},
        {"imagePullSecrets": [{"name": "pull"}]},
        {"template": {"spec": {"nodeSelector": {"pool": "listeners"}}}},
        {"serviceAccountMetadata": {"labels": {"team": "a"}}},
        {"roleMetadata": {"annotations": {"a": "b"}}},
        {"roleBindingMetadata": {"labels": {"x": "y"}}},
        {"configSecretMetadata": {"labels": {"x": "y"}}},
    ],
)
def test_namespace_credentials_or_pod_shape_make_another_group(change: dict[str, Any]) -> None:
    base, changed = group_key(_spec()), group_key(_spec(**change))
    assert base is not None
    assert changed is not None
    assert base != changed
    assert group_id(base) != group_id(changed)


def test_unset_and_null_fields_are_alike() -> None:
    assert group_key(_spec()) == group_key({**_spec(), "template": None, "vaultConfig": None})


def test_key_ignores_the_order_of_keys_in_nested_objects() -> None:
    one = group_key(_spec(template={"spec": {"a": 1, "b": 2}}))
    other = group_key(_spec(template={"spec": {"b": 2, "a": 1}}))
    assert one == other


@pytest.mark.parametrize(
    "spec",
    [
        _spec(proxy={"https": {"url": "http://proxy:3128"}}),
        _spec(autoscalingRunnerSetNamespace=""),
        _spec(githubConfigSecret=""),
    ],
    ids=["proxy", "no-namespace", "no-credentials"],
)
def test_sets_that_cannot_share_have_no_key(spec: dict[str, Any]) -> None:
    assert group_key(spec) is None


def test_group_id_is_a_stable_short_hash() -> None:
    key = GroupKey(namespace="team-a", credentials='{"githubConfigSecret":"s"}', pod_shape='{"image":"i"}')
    assert group_id(key) == group_id(GroupKey(key.namespace, key.credentials, key.pod_shape))
    assert len(group_id(key)) == 10
    assert set(group_id(key)) <= set("0123456789abcdef")
    # Fixed across releases: a controller upgrade must not regroup every shared listener.
    assert group_id(key) == "be7a5532c6"


def test_group_objects_are_named_after_the_group() -> None:
    assert group_object_name("0123456789") == "arc-shared-listener-0123456789"
    assert listener_group.member_key("set-a-abcd1234-listener") == "set-a-abcd1234-listener"


def test_a_set_belongs_to_a_group_only_when_opted_in_and_shareable() -> None:
    shared = {"listener.arc-scaleset.dev/shared": "true"}
    key = group_key(_spec())
    assert key is not None
    assert group_of(shared, _spec()) == group_id(key)
    assert group_of({}, _spec()) is None
    assert group_of(shared, _spec(proxy={"http": {"url": "http://proxy"}})) is None


def test_a_keys_shards_are_groups_of_their_own_and_shard_0_keeps_the_keys_id() -> None:
    key = GroupKey(namespace="team-a", credentials='{"githubConfigSecret":"s"}', pod_shape='{"image":"i"}')
    assert group_id(key, 0) == group_id(key) == "be7a5532c6"  # sets already in a group stay in it
    ids = {group_id(key, shard) for shard in range(50)}
    assert len(ids) == 50
    assert all(len(shard_id) == 10 and set(shard_id) <= set("0123456789abcdef") for shard_id in ids)
    other = GroupKey(namespace="team-b", credentials=key.credentials, pod_shape=key.pod_shape)
    assert ids.isdisjoint({group_id(other, shard) for shard in range(50)}), "shards never cross keys"


@pytest.mark.parametrize(
    ("value", "shard"),
    [(None, 0), ("0", 0), ("3", 3), ("999", 999), ("1000", 0), ("-1", 0), ("+2", 0), ("2.0", 0), ("٣", 0), ("", 0)],
)
def test_a_listener_names_its_shard_with_a_decimal_below_the_bound(value: str | None, shard: int) -> None:
    annotations = {} if value is None else {listener_group.ANNOTATION_GROUP_SHARD: value}
    assert listener_group.shard_of(annotations) == shard


def test_a_set_in_a_shard_belongs_to_that_shards_group() -> None:
    shared = {"listener.arc-scaleset.dev/shared": "true"}
    key = group_key(_spec())
    assert key is not None
    assert group_of(shared, _spec(), 2) == group_id(key, 2)
    assert group_of({}, _spec(), 2) is None
