"""A set's runner index (``runner_index.SetRunners``), told only which runners changed, classifies them exactly as
a fresh classification of every runner in the cache would (issue 20: a pass must not re-read every runner),
whatever the sequence of adds, updates, deletions, owner changes and deletions not yet seen; and a runner of
another namespace that claims the set's UID is never the set's."""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from arc_scaleset.controllers.ephemeralrunnerset.expectations import DeletionExpectations
from arc_scaleset.controllers.ephemeralrunnerset.runner_index import SetRunners, controller_uid
from arc_scaleset.controllers.runner_classification import RunnerView, classify
from arc_scaleset.kube.ownerrefs import Owner, children_of

NS, FOREIGN_NS = "ns", "other-team"
SET_UID, OTHER_UID = "set-uid", "other-uid"
SET = Owner(NS, "actions.github.com", "EphemeralRunnerSet", "arc", SET_UID)
PHASES = ("", "Pending", "Running", "Succeeded", "Failed", "Outdated", "Unknown")
NAMES = [f"r-{i}" for i in range(8)]
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class Cache:
    """The two reads the index makes, over a dict of objects (what the informer's store answers)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get((namespace or "", name))

    def by_owner(self, uid: str) -> list[dict[str, Any]]:
        return [obj for obj in self.objects.values() if controller_uid(obj) == uid]


change = st.tuples(
    st.sampled_from(NAMES),
    st.sampled_from((NS, NS, NS, FOREIGN_NS)),
    st.sampled_from(("put", "put", "put", "delete")),
    st.sampled_from(PHASES),
    st.booleans(),  # deleting
    st.sampled_from((SET_UID, SET_UID, SET_UID, OTHER_UID)),
    st.integers(0, 3),  # patch ID
    st.integers(0, 2),  # revision
    st.integers(0, 2),  # creation second: ties are ordered by name
    st.booleans(),  # job
)


def runner(name: str, version: int, phase: str, deleting: bool, owner: str, patch: int, revision: int,
           created: int, job: bool, *, namespace: str = NS) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "resourceVersion": str(version),
        "creationTimestamp": (T0 + dt.timedelta(seconds=created)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "ownerReferences": [
            {
                "apiVersion": "actions.github.com/v1alpha1",
                "kind": "EphemeralRunnerSet",
                "name": "arc",
                "uid": owner,
                "controller": True,
            }
        ],
        "annotations": {
            "actions.github.com/patch-id": str(patch),
            "actions.github.com/actionable-revision": str(revision),
        },
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    return {"metadata": meta, "status": {"phase": phase, "runnerId": 7, **({"jobId": "j"} if job else {})}}


@settings(max_examples=150, deadline=None)
@given(
    batches=st.lists(st.lists(change, max_size=6), min_size=1, max_size=8),
    applied=st.integers(0, 2),
    deleted=st.sets(st.sampled_from(NAMES), max_size=3),
)
def test_the_index_classifies_the_runners_as_a_fresh_classification_of_the_cache(
    batches: list[list[tuple[Any, ...]]], applied: int, deleted: set[str]
) -> None:
    cache, index, version = Cache(), SetRunners(SET), 0
    for name, namespace, _kind, *fields in batches[0]:  # runners before the index was built: the first refresh
        version += 1
        cache.objects[(namespace, name)] = runner(name, version, *fields, namespace=namespace)
    for batch in batches:
        index.refresh(cache)
        deletions = DeletionExpectations()
        for name in deleted:
            deletions.expect(name)
        fresh = [RunnerView.of(obj) for obj in children_of(cache, SET)]
        expected = classify(deletions.mark(fresh), applied_revision=applied)
        for name in deleted:
            deletions.expect(name)
        got = index.states(applied_revision=applied, deleting=deletions.unseen(index.view))
        assert got == expected
        for name, namespace, kind, *fields in batch:
            version += 1
            if kind == "delete":
                cache.objects.pop((namespace, name), None)
            else:
                cache.objects[(namespace, name)] = runner(name, version, *fields, namespace=namespace)
            index.changed(namespace, name)


def test_a_refresh_reads_only_the_runners_reported_changed() -> None:
    cache, index = Cache(), SetRunners(SET)
    cache.objects = {(NS, n): runner(n, 1, "Running", False, SET_UID, 1, 0, 0, False) for n in NAMES}
    index.refresh(cache)
    before = index.view("r-0")
    cache.objects[(NS, "r-1")] = runner("r-1", 2, "Running", True, SET_UID, 1, 0, 0, False)
    cache.objects[(NS, "r-0")] = runner("r-0", 3, "Succeeded", False, SET_UID, 1, 0, 0, False)
    index.changed(NS, "r-1")
    index.refresh(cache)
    assert index.view("r-0") is before  # not reported: not read again
    view = index.view("r-1")
    assert view is not None
    assert view.deleting
    assert len(index.states(applied_revision=0).deleting) == 1


def test_a_runner_of_another_namespace_claiming_the_sets_uid_is_not_the_sets() -> None:
    cache, index = Cache(), SetRunners(SET)
    cache.objects[(NS, "r-0")] = runner("r-0", 1, "Running", False, SET_UID, 1, 0, 0, False)
    # Another team's runner, in its own namespace, whose owner reference carries this set's UID and name.
    cache.objects[(FOREIGN_NS, "r-1")] = runner(
        "r-1", 2, "Running", False, SET_UID, 1, 0, 0, True, namespace=FOREIGN_NS
    )
    index.refresh(cache)
    index.changed(FOREIGN_NS, "r-1")
    index.refresh(cache)
    assert [view.name for view in index.states(applied_revision=0).running] == ["r-0"]
    assert len(index) == 1
