"""Cost labels of a busy runner's pod: label values safe for any repository, workflow and job name."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.controllers.ephemeralrunner.cost_labels import (
    LABEL_JOB,
    LABEL_OWNER,
    LABEL_REPOSITORY,
    LABEL_WORKFLOW,
    cost_metadata,
    cost_patch,
    label_value,
    workflow_name,
)

# The API server's rule for a label value (k8s.io/apimachinery validation.IsValidLabelValue).
VALID_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

BUSY = {
    "jobRepositoryName": "octo-org/web-app",
    "jobWorkflowRef": "octo-org/web-app/.github/workflows/ci.yml@refs/heads/main",
    "jobDisplayName": "build (ubuntu, 3.12)",
    "jobId": "j-1",
}


def test_plain_names_keep_their_spelling_where_a_label_allows_it() -> None:
    assert label_value("web-app") == "web-app"
    assert label_value("octo-org/web-app") == "octo-org_web-app"
    assert label_value("build (ubuntu, 3.12)") == "build_ubuntu_3.12"


def test_leading_and_trailing_non_alphanumerics_are_dropped() -> None:
    assert label_value("--._x_.-") == "x"
    assert label_value("/// ") == ""


def test_a_long_value_is_cut_to_63_and_keeps_two_long_names_apart() -> None:
    first = label_value("a" * 100 + "1")
    second = label_value("a" * 100 + "2")
    assert len(first) == len(second) == 63
    assert first != second
    assert first == label_value("a" * 100 + "1")  # deterministic


@given(st.text(max_size=300))
def test_every_text_becomes_a_valid_label_value(text: str) -> None:
    value = label_value(text)
    assert len(value) <= 63
    assert VALID_LABEL_VALUE.match(value), value


def test_workflow_is_the_file_name_of_the_workflow_ref() -> None:
    assert workflow_name("octo-org/web-app/.github/workflows/ci.yml@refs/heads/main", "octo-org/web-app") == "ci.yml"
    assert workflow_name("other/shared/.github/workflows/deploy.yaml@v1", "octo-org/web-app") == (
        "other/shared/.github/workflows/deploy.yaml"
    )
    assert workflow_name("", "octo-org/web-app") == ""


def test_a_busy_runner_gets_labels_and_the_exact_values_as_annotations() -> None:
    labels, annotations = cost_metadata(BUSY)
    assert labels == {
        LABEL_OWNER: "octo-org",
        LABEL_REPOSITORY: "octo-org_web-app",
        LABEL_WORKFLOW: "ci.yml",
        LABEL_JOB: "build_ubuntu_3.12",
    }
    assert annotations == {
        LABEL_OWNER: "octo-org",
        LABEL_REPOSITORY: "octo-org/web-app",
        LABEL_WORKFLOW: "ci.yml",
        LABEL_JOB: "build (ubuntu, 3.12)",
    }


def test_an_idle_runner_gets_nothing() -> None:
    assert cost_metadata({"phase": "Running"}) == ({}, {})
    assert cost_patch({"status": {"phase": "Running"}}, {"metadata": {"name": "p"}}) is None


def test_the_patch_adds_what_is_missing_and_nothing_once_it_is_there() -> None:
    er = {"status": BUSY}
    pod = {"metadata": {"name": "p", "labels": {"app": "x"}}}
    patch = cost_patch(er, pod)
    assert patch is not None
    assert patch["metadata"]["labels"][LABEL_REPOSITORY] == "octo-org_web-app"
    assert patch["metadata"]["annotations"][LABEL_REPOSITORY] == "octo-org/web-app"
    labelled = {"metadata": {"name": "p", "labels": {"app": "x", **patch["metadata"]["labels"]},
                             "annotations": patch["metadata"]["annotations"]}}  # fmt: skip
    assert cost_patch(er, labelled) is None


def test_a_name_that_leaves_no_label_value_is_only_annotated_and_a_stale_label_is_removed() -> None:
    er = {"status": {**BUSY, "jobDisplayName": "***"}}
    pod = {"metadata": {"name": "p", "labels": {LABEL_JOB: "old"}}}
    patch = cost_patch(er, pod)
    assert patch is not None
    assert patch["metadata"]["labels"][LABEL_JOB] is None
    assert patch["metadata"]["annotations"][LABEL_JOB] == "***"
