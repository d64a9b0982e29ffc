"""ObjectView and PodView: metadata read in place, tolerant of anything, never copying the cached object."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.kube.informer import Store
from arc_scaleset.kube.semantic import deep_equal
from arc_scaleset.kube.views import ObjectView, PodView, parse_int, parse_timestamp

RUNNER_SET_REF = {"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunnerSet", "name": "arc",
                  "uid": "uid-ers", "controller": True, "blockOwnerDeletion": True}  # fmt: skip

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "arc-runner-abcde",
        "namespace": "arc-runners",
        "uid": "uid-pod",
        "resourceVersion": "4711",
        "generation": 3,
        "creationTimestamp": "2026-01-01T12:00:00Z",
        "labels": {"app": "runner"},
        "annotations": {"note": "hello"},
        "finalizers": ["example.com/keep"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "uid-node"}, RUNNER_SET_REF],
    },
    "spec": {"nodeName": "node-1", "containers": [{"name": "runner"}]},
    "status": {
        "phase": "Running",
        "reason": "",
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "DisruptionTarget", "status": "False"}],
        "containerStatuses": [{"name": "runner", "state": {"running": {}}}],
    },
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
metadata_keys = st.sampled_from(
    ["name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
     "deletionGracePeriodSeconds", "labels", "annotations", "finalizers", "ownerReferences"]
)  # fmt: skip
objects = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": json_values,
        "kind": json_values,
        "metadata": st.dictionaries(metadata_keys, json_values) | json_values,
        "spec": st.dictionaries(st.sampled_from(["nodeName", "containers"]), json_values) | json_values,
        "status": st.dictionaries(
            st.sampled_from(["phase", "reason", "message", "conditions", "containerStatuses"]), json_values
        )
        | json_values,
    },
)


def read_everything(view: PodView) -> list[Any]:
    return [
        view.api_version, view.kind, view.name, view.namespace, view.key, view.uid, view.resource_version,
        view.generation, view.creation_timestamp, view.deletion_timestamp, view.is_deleting, list(view.finalizers),
        view.has_finalizer("x"), dict(view.labels), dict(view.annotations), view.label("a"), view.annotation("a"),
        list(view.owner_references), view.controller_owner, view.is_owned_by("u"), dict(view.spec),
        dict(view.status), view.phase, view.reason, view.message, view.node_name,
        view.deletion_grace_period_seconds, list(view.conditions), list(view.container_statuses),
        list(view.init_container_statuses), view.container_status("runner"), view.has_condition("Ready"),
    ]  # fmt: skip


def test_a_view_reads_every_metadata_field_of_an_api_object() -> None:
    view = ObjectView(POD)
    assert (view.api_version, view.kind) == ("v1", "Pod")
    assert (view.name, view.namespace, view.key) == (
        "arc-runner-abcde",
        "arc-runners",
        ("arc-runners", "arc-runner-abcde"),
    )
    assert (view.uid, view.resource_version, view.generation) == ("uid-pod", "4711", 3)
    assert view.creation_timestamp == dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
    assert view.deletion_timestamp is None
    assert not view.is_deleting
    assert view.label("app") == "runner"
    assert view.label("missing") == ""
    assert view.annotation("note") == "hello"
    assert view.has_finalizer("example.com/keep")
    assert not view.has_finalizer("other")
    assert view.controller_owner == RUNNER_SET_REF
    assert view.is_owned_by("uid-node")
    assert view.is_owned_by("uid-ers")
    assert not view.is_owned_by("uid-other")


def test_an_object_without_metadata_reads_as_empty_values() -> None:
    view = ObjectView({})
    assert (view.name, view.namespace, view.uid, view.resource_version, view.generation) == ("", "", "", "", 0)
    assert view.creation_timestamp is None
    assert view.deletion_timestamp is None
    assert not view.is_deleting
    assert view.labels == {}
    assert view.annotations == {}
    assert view.spec == {}
    assert view.status == {}
    assert list(view.finalizers) == []
    assert list(view.owner_references) == []
    assert view.controller_owner is None
    assert not view.is_owned_by("")


@pytest.mark.parametrize(
    "metadata",
    [
        "not a mapping",
        ["a", "list"],
        {"name": 5, "namespace": None, "uid": ["u"], "resourceVersion": 12, "generation": "3",
         "creationTimestamp": "yesterday", "labels": "app=runner", "annotations": ["x"], "finalizers": "one",
         "ownerReferences": {"uid": "u"}},
        {"generation": True, "labels": None, "ownerReferences": ["not a reference", None]},
    ],
)  # fmt: skip
def test_malformed_metadata_reads_as_empty_values_never_as_an_error(metadata: Any) -> None:
    view = ObjectView({"metadata": metadata})
    assert (view.name, view.namespace, view.uid, view.resource_version, view.generation) == ("", "", "", "", 0)
    assert view.creation_timestamp is None
    assert view.labels == {}
    assert view.annotations == {}
    assert list(view.finalizers) == []
    assert view.controller_owner is None
    assert not view.is_owned_by("u")


@given(objects)
def test_no_accessor_raises_on_any_json_object(obj: dict[str, Any]) -> None:
    read_everything(PodView(obj))


def test_the_view_wraps_the_cached_object_without_copying_it() -> None:
    store = Store()
    store.upsert(POD)
    cached = store.get("arc-runners", "arc-runner-abcde")
    assert cached is not None
    view = ObjectView(cached)
    assert view.raw is cached
    assert view.metadata is cached["metadata"]
    assert view.labels is cached["metadata"]["labels"]
    assert view.annotations is cached["metadata"]["annotations"]
    assert view.finalizers is cached["metadata"]["finalizers"]
    assert view.owner_references is cached["metadata"]["ownerReferences"]
    assert view.spec is cached["spec"]
    assert view.status is cached["status"]


def test_a_view_reads_the_object_as_it_is_now_not_as_it_was() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "r"}}
    view = ObjectView(obj)
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    assert view.is_deleting
    assert view.deletion_timestamp == dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def test_a_deletion_timestamp_that_does_not_parse_still_means_the_object_is_going_away() -> None:
    view = ObjectView({"metadata": {"deletionTimestamp": "garbled"}})
    assert view.is_deleting
    assert view.deletion_timestamp is None


def test_empty_values_are_fresh_plain_json_containers_that_compare_like_missing_fields() -> None:
    view = ObjectView({})
    # Plain dict and list: the semantic comparison and merge-patch helpers test for exactly these types.
    assert type(view.labels) is dict
    assert type(view.spec) is dict
    assert type(view.finalizers) is list
    assert deep_equal(view.spec, {"replicas": 0})
    # Never shared: what one caller does with an empty value cannot show up in another's.
    first, second = view.labels, ObjectView({}).labels
    cast(dict[str, str], first)["leak"] = "x"  # a careless caller, on purpose
    assert second == {}
    assert ObjectView({}).labels == {}


def test_the_controller_owner_is_the_one_reference_marked_controller() -> None:
    refs = [
        {"uid": "a", "controller": False},
        "junk",
        {"uid": "b", "controller": "true"},
        {"uid": "c", "controller": True},
    ]
    assert ObjectView({"metadata": {"ownerReferences": refs}}).controller_owner == {"uid": "c", "controller": True}
    assert ObjectView({"metadata": {"ownerReferences": refs[:3]}}).controller_owner is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-01-01T12:00:00Z", dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)),
        ("2026-01-01T12:00:00.123456Z", dt.datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)),
        ("2026-01-01T14:00:00+02:00", dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)),
        ("2026-01-01T12:00:00", dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)),  # naive: UTC
        (dt.datetime(2026, 1, 1, 12, 0), dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)),
        ("", None),
        ("not a time", None),
        (1767268800, None),
        (None, None),
    ],
)
def test_timestamps_read_as_aware_datetimes_or_none(value: object, expected: dt.datetime | None) -> None:
    assert parse_timestamp(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [("7", 7), (" 12 ", 12), ("-1", -1), ("", 0), ("7a", 0), (7, 0), (None, 0)]
)
def test_integer_annotations_read_as_zero_unless_they_parse(value: object, expected: int) -> None:
    assert parse_int(value) == expected


def test_a_pod_view_reads_the_status_the_controllers_judge_a_pod_by() -> None:
    pod = PodView(POD)
    assert (pod.phase, pod.reason, pod.node_name) == ("Running", "", "node-1")
    assert pod.container_status("runner") == {"name": "runner", "state": {"running": {}}}
    assert pod.container_status("sidecar") is None
    assert pod.has_condition("Ready")
    assert not pod.has_condition("DisruptionTarget")
    assert list(pod.init_container_statuses) == []


def test_a_pod_view_skips_malformed_status_entries() -> None:
    pod = PodView({"status": {"containerStatuses": ["junk", {"name": "runner"}], "conditions": [None, 3]}})
    assert pod.container_status("runner") == {"name": "runner"}
    assert not pod.has_condition("Ready")


@pytest.mark.parametrize("metadata", ["junk", None, {"labels": "app=x", "ownerReferences": "ref"}])
def test_the_store_indexes_malformed_metadata_as_empty_like_a_view_never_failing(metadata: Any) -> None:
    store = Store()
    store.upsert({"metadata": metadata})
    assert store.keys() == [("", "")]
    assert store.by_owner("ref") == []
    assert len(store.list("")) == 1
