"""Metadata drift by merge: what the controller wants is added, what others added survives, no loops."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.controllers.drift import alignment_patch, contains_all, merge_metadata

keys = st.sampled_from(["a", "b", "c", "x/y", "argocd.argoproj.io/app"])
maps = st.dictionaries(keys, st.sampled_from(["1", "2", "3"]), max_size=5)


def obj(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, object]:
    return {"metadata": {"labels": labels, "annotations": annotations}}


def apply(live: dict[str, str], patch: dict[str, str | None]) -> dict[str, str]:
    result = dict(live)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


@given(live_labels=maps, live_annotations=maps, want_labels=maps, want_annotations=maps)
def test_one_patch_converges_and_a_second_merge_finds_nothing(
    live_labels: dict[str, str], live_annotations: dict[str, str], want_labels: dict[str, str],
    want_annotations: dict[str, str],
) -> None:  # fmt: skip
    first = merge_metadata(obj(live_labels, live_annotations), labels=want_labels, annotations=want_annotations,
                           excluded_label_prefixes=("argocd.argoproj.io/",))  # fmt: skip
    meta = first.patch.get("metadata", {})
    labels = apply(live_labels, meta.get("labels", {}))
    annotations = apply(live_annotations, meta.get("annotations", {}))
    second = merge_metadata(obj(labels, annotations), labels=want_labels, annotations=want_annotations,
                            excluded_label_prefixes=("argocd.argoproj.io/",))  # fmt: skip
    assert not second.changed
    # Everything wanted is there, foreign keys survive, excluded prefixes are gone.
    assert contains_all(annotations, want_annotations)
    assert all(labels.get(k) == v for k, v in want_labels.items() if not k.startswith("argocd"))
    assert all(
        labels.get(k) == v for k, v in live_labels.items() if k not in want_labels and not k.startswith("argocd")
    )
    assert not any(k.startswith("argocd") for k in labels)


def test_no_patch_when_everything_wanted_is_present_alongside_foreign_keys() -> None:
    merge = merge_metadata(obj({"a": "1", "foreign": "x"}, {"n": "1"}), labels={"a": "1"}, annotations={"n": "1"})
    assert merge.patch == {}


def test_an_adopted_object_gets_one_patch_of_its_missing_labels_and_drifted_rules_against_its_version() -> None:
    live = {
        "metadata": {"name": "r", "resourceVersion": "7", "labels": {"team": "a"}},
        "rules": [{"verbs": ["get"]}],
        "extra": 1,
    }
    desired = {"metadata": {"name": "r", "labels": {"app": "x"}}, "rules": [{"verbs": ["get", "list"]}]}
    patch = alignment_patch(live, desired, replace=("rules",))
    assert patch == {
        "metadata": {"labels": {"app": "x"}, "resourceVersion": "7"},
        "rules": [{"verbs": ["get", "list"]}],
    }
    aligned = {**live, "metadata": {**live["metadata"], "labels": {"team": "a", "app": "x"}}, "rules": desired["rules"]}
    assert alignment_patch(aligned, desired, replace=("rules",)) is None, "a foreign label and field are no drift"
