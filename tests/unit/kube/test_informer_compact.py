"""What the manager's caches keep of an object (:func:`arc_scaleset.kube.informer.compact`)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.kube.informer import MAX_INTERNED_LENGTH, Store, compact


def runner_pod(name: str) -> dict[str, Any]:
    """A runner pod as the API server sends it: decoded from JSON, so no string is shared with another pod."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "arc-runners",
            "uid": f"uid-{name}",
            "resourceVersion": "42",
            "labels": {"actions.github.com/scale-set-name": "linux", "app.kubernetes.io/component": "runner"},
            "annotations": {"actions.github.com/patch-id": "3"},
            "ownerReferences": [{"kind": "EphemeralRunner", "name": name, "uid": f"er-{name}", "controller": True}],
            "managedFields": [{"manager": "arc-scaleset", "operation": "Update", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {"containers": [{"name": "runner", "image": "ghcr.io/actions/actions-runner:2.330.0"}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "runner", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}],
        },
    }
    decoded: dict[str, Any] = orjson.loads(orjson.dumps(pod))
    return decoded


def test_a_cached_object_keeps_everything_but_its_managed_fields() -> None:
    received = runner_pod("runner-a")
    expected = copy.deepcopy(received)
    del expected["metadata"]["managedFields"]

    assert compact(received) == expected


def test_runners_cached_side_by_side_share_their_repeated_strings() -> None:
    first, second = compact(runner_pod("runner-a")), compact(runner_pod("runner-b"))

    assert first["spec"]["containers"][0]["image"] is second["spec"]["containers"][0]["image"]
    assert (
        first["metadata"]["labels"]["app.kubernetes.io/component"]
        is second["metadata"]["labels"]["app.kubernetes.io/component"]
    )
    assert first["status"]["conditions"][0]["status"] is second["status"]["conditions"][0]["status"]
    assert first["metadata"]["name"] != second["metadata"]["name"]


def test_runners_in_the_label_index_share_its_values() -> None:
    store = Store()
    store.upsert(compact(runner_pod("runner-a")))
    store.upsert(compact(runner_pod("runner-b")))

    found = store.by_label("app.kubernetes.io/component", "runner")

    assert sorted(o["metadata"]["name"] for o in found) == ["runner-a", "runner-b"]
    # What each cached object was indexed under is kept with it: one shared string per label, not one per runner.
    first, second = (sorted(store._indexed[("arc-runners", name)]["label"]) for name in ("runner-a", "runner-b"))
    assert all(a is b for a, b in zip(first, second, strict=True))


def test_long_strings_are_kept_as_they_are() -> None:
    long_value = "x" * (MAX_INTERNED_LENGTH + 1)
    obj = compact({"metadata": {"name": "a", "annotations": {"big": long_value}}})

    assert obj["metadata"]["annotations"]["big"] == long_value


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_compact_changes_no_value_but_the_managed_fields(body: dict[str, Any]) -> None:
    obj = {**body, "metadata": {"name": "a", "managedFields": [{"manager": "m"}]}}
    expected = {**copy.deepcopy(body), "metadata": {"name": "a"}}

    assert compact(obj) == expected
