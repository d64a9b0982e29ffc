"""Label value trimming, label and annotation merging, URL labels, and the version gate."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.api import keys
from arc_scaleset.api.labels import filter_and_merge_labels, github_url_labels, merge_annotations, trim_label_value
from arc_scaleset.api.versions import is_version_allowed


def test_a_value_longer_than_63_characters_becomes_58_characters_and_trim() -> None:
    value = "a" * 64
    assert trim_label_value(value) == "a" * 58 + "-trim"
    assert len(trim_label_value(value)) == 63


def test_a_value_of_exactly_63_characters_is_kept() -> None:
    assert trim_label_value("b" * 63) == "b" * 63


def test_leading_and_trailing_separators_are_stripped() -> None:
    assert trim_label_value("-_.my-org._-") == "my-org"
    assert trim_label_value("my_org.name") == "my_org.name"


def test_a_long_value_is_cut_without_stripping_separators() -> None:
    # ARC strips separators only from values that fit; a long one is cut as is.
    assert trim_label_value("-" + "x" * 70) == "-" + "x" * 57 + "-trim"


@given(st.text(alphabet="abc-_.", max_size=120))
def test_trimmed_values_always_fit_a_label(value: str) -> None:
    assert len(trim_label_value(value)) <= 63


def test_overwrite_wins_over_base() -> None:
    merged = filter_and_merge_labels(
        {"team": "a", "app.kubernetes.io/component": "mine"}, {"app.kubernetes.io/component": "runner"}
    )
    assert merged == {"team": "a", "app.kubernetes.io/component": "runner"}


def test_keys_with_an_excluded_prefix_are_dropped_from_both_sides() -> None:
    merged = filter_and_merge_labels(
        {"argocd.argoproj.io/instance": "x", "team": "a"},
        {"argocd.argoproj.io/other": "y", "kept": "b"},
        excluded_prefixes=["argocd.argoproj.io/"],
    )
    assert merged == {"team": "a", "kept": "b"}


def test_merging_two_missing_maps_gives_none_but_empty_maps_give_empty() -> None:
    assert filter_and_merge_labels(None, None) is None
    assert filter_and_merge_labels({}, None) == {}
    assert merge_annotations(None, None) is None
    assert merge_annotations(None, {}) == {}


def test_merging_does_not_modify_its_inputs() -> None:
    base = {"a": "1"}
    overwrite = {"a": "2"}
    assert merge_annotations(base, overwrite) == {"a": "2"}
    assert base == {"a": "1"}


def test_annotations_merge_overwrites_and_keeps_foreign_keys() -> None:
    assert merge_annotations({"foreign": "x", "k": "old"}, {"k": "new"}) == {"foreign": "x", "k": "new"}


def test_url_labels_of_an_organization() -> None:
    assert github_url_labels("", "my-org", "") == {keys.LABEL_GITHUB_ORGANIZATION: "my-org"}


def test_url_labels_of_a_repository_and_an_enterprise() -> None:
    assert github_url_labels("", "my-org", "my-repo") == {
        keys.LABEL_GITHUB_ORGANIZATION: "my-org",
        keys.LABEL_GITHUB_REPOSITORY: "my-repo",
    }
    assert github_url_labels("my-enterprise", "", "") == {keys.LABEL_GITHUB_ENTERPRISE: "my-enterprise"}


def test_url_label_values_are_trimmed() -> None:
    assert github_url_labels("", "_org_", "r" * 100) == {
        keys.LABEL_GITHUB_ORGANIZATION: "org",
        keys.LABEL_GITHUB_REPOSITORY: "r" * 58 + "-trim",
    }


@pytest.mark.parametrize(
    ("label", "build", "allowed"),
    [
        ("0.14.2", "dev", True),
        ("anything", "dev", True),
        ("0.14.2", "0.14.2", True),
        ("weird", "weird", True),
        ("0.13.0", "canary-abc123", True),
        ("0.14.0", "0.14.2", True),
        ("0.14.9", "0.14.2", True),
        ("0.14", "0.14.2", True),
        ("1", "1.0.3", True),
        ("0.13.1", "0.14.2", False),
        ("1.14.2", "0.14.2", False),
        ("v0.14.2", "0.14.2", False),
        ("0.14.2-rc1", "0.14.2", False),
        ("00.14.2", "0.14.2", False),
        ("", "0.14.2", False),
        ("0.14.2", "canary", False),
    ],
)
def test_version_gate(label: str, build: str, allowed: bool) -> None:
    assert is_version_allowed(label, build) is allowed
