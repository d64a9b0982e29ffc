"""The informer's Store: lookups and indexes stay right through adds, updates and removals."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arc_scaleset.kube.informer import Store, copy_of


def obj(
    name: str,
    namespace: str = "ns",
    *,
    rv: str = "1",
    labels: dict[str, str] | None = None,
    owner_uid: str | None = None,
    controller: bool = True,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "resourceVersion": rv}
    if labels is not None:
        meta["labels"] = labels
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "p", "uid": owner_uid, "controller": controller}
        ]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def names(objects: list[Any]) -> set[str]:
    return {o["metadata"]["name"] for o in objects}


def test_get_finds_an_object_by_namespace_and_name() -> None:
    store = Store()
    store.upsert(obj("a", "one"))
    store.upsert(obj("a", "two", rv="7"))
    found = store.get("two", "a")
    assert found is not None
    assert found["metadata"]["resourceVersion"] == "7"
    assert store.get("three", "a") is None
    assert len(store) == 2


def test_cluster_scoped_objects_are_found_with_no_namespace() -> None:
    store = Store()
    store.upsert({"metadata": {"name": "n1", "resourceVersion": "1"}})
    assert store.get(None, "n1") is not None
    assert store.get("", "n1") is not None
    assert ("", "n1") in store


def test_list_by_namespace_follows_updates_and_removals() -> None:
    store = Store()
    store.upsert(obj("a", "one"))
    store.upsert(obj("b", "one"))
    store.upsert(obj("c", "two"))
    assert names(store.list("one")) == {"a", "b"}
    assert names(store.list()) == {"a", "b", "c"}
    store.remove(("one", "a"))
    assert names(store.list("one")) == {"b"}
    assert store.list("nowhere") == []


def test_by_owner_indexes_only_the_controller_reference() -> None:
    store = Store()
    store.upsert(obj("child", owner_uid="u1"))
    store.upsert(obj("not-controlled", owner_uid="u1", controller=False))
    assert names(store.by_owner("u1")) == {"child"}
    store.upsert(obj("child", owner_uid="u2", rv="2"))
    assert store.by_owner("u1") == []
    assert names(store.by_owner("u2")) == {"child"}


def test_by_label_follows_label_changes() -> None:
    store = Store()
    store.upsert(obj("a", labels={"app": "x", "tier": "web"}))
    store.upsert(obj("b", labels={"app": "y"}))
    assert names(store.by_label("app", "x")) == {"a"}
    store.upsert(obj("a", labels={"app": "y"}, rv="2"))
    assert store.by_label("app", "x") == []
    assert store.by_label("tier", "web") == []
    assert names(store.by_label("app", "y")) == {"a", "b"}


def test_a_custom_index_covers_objects_stored_before_it_was_added() -> None:
    store = Store()
    store.upsert(obj("a", labels={"size": "big"}))
    store.upsert(obj("b"))
    store.add_index("size", lambda o: [o["metadata"].get("labels", {}).get("size", "none")])
    assert names(store.by_index("size", "big")) == {"a"}
    assert names(store.by_index("size", "none")) == {"b"}
    store.upsert(obj("c", labels={"size": "big"}))
    assert names(store.by_index("size", "big")) == {"a", "c"}


def test_an_index_name_is_used_once_and_unknown_ones_are_refused() -> None:
    store = Store()
    with pytest.raises(ValueError, match="already exists"):
        store.add_index("namespace", lambda o: [])
    with pytest.raises(KeyError, match="no index named"):
        store.by_index("missing", "x")


def test_upsert_and_remove_return_the_previous_object() -> None:
    store = Store()
    first = obj("a", rv="1")
    assert store.upsert(first) is None
    assert store.upsert(obj("a", rv="2")) is first
    removed = store.remove(("ns", "a"))
    assert removed is not None
    assert removed["metadata"]["resourceVersion"] == "2"
    assert store.remove(("ns", "a")) is None


def test_copy_of_is_deep_and_detached_from_the_cache() -> None:
    store = Store()
    store.upsert(obj("a", labels={"k": "v"}))
    cached = store.get("ns", "a")
    assert cached is not None
    mine = copy_of(cached)
    mine["metadata"]["labels"]["k"] = "changed"
    assert cached["metadata"]["labels"]["k"] == "v"
    assert mine["metadata"]["name"] == "a"


LABEL_VALUES = st.sampled_from(["x", "y", "z"])
OPS = st.lists(
    st.tuples(
        st.sampled_from(["upsert", "remove"]),
        st.sampled_from(["n1", "n2"]),
        st.sampled_from(["a", "b", "c", "d"]),
        LABEL_VALUES,
        st.sampled_from(["u1", "u2", None]),
    ),
    max_size=60,
)


@settings(max_examples=200)
@given(OPS)
def test_indexes_always_agree_with_a_full_scan(ops: list[tuple[str, str, str, str, str | None]]) -> None:
    store = Store()
    for step, (op, namespace, name, label, owner) in enumerate(ops):
        if op == "upsert":
            store.upsert(obj(name, namespace, rv=str(step), labels={"l": label}, owner_uid=owner))
        else:
            store.remove((namespace, name))
    everything = store.list()
    assert len(everything) == len(store)
    for namespace in ("n1", "n2"):
        expected = [o for o in everything if o["metadata"]["namespace"] == namespace]
        assert sorted(map(id, store.list(namespace))) == sorted(map(id, expected))
    for value in ("x", "y", "z"):
        expected = [o for o in everything if o["metadata"]["labels"]["l"] == value]
        assert sorted(map(id, store.by_label("l", value))) == sorted(map(id, expected))
    for uid in ("u1", "u2"):
        expected = [o for o in everything if (o["metadata"].get("ownerReferences") or [{}])[0].get("uid") == uid]
        assert sorted(map(id, store.by_owner(uid))) == sorted(map(id, expected))
