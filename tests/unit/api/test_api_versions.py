"""The version gate: which ``app.kubernetes.io/version`` labels a controller build manages (api/versions.py)."""

from __future__ import annotations

import pytest

from arc_scaleset.api.versions import ARC_CHART_VERSIONS, accepts_version_label

BUILD = "0.1.0"  # this project's version at the time of writing; ARC's and ours do not overlap

# ARC's released chart versions (gha-runner-scale-set-<v> tags), and whether a controller of BUILD manages them.
ARC_RELEASES = {
    "0.2.0": False,
    "0.3.0": False,
    "0.4.0": False,
    "0.5.0": False,
    "0.6.0": False,
    "0.6.1": False,
    "0.7.0": False,
    "0.8.0": False,
    "0.8.1": False,
    "0.8.2": False,
    "0.8.3": False,
    "0.9.0": True,
    "0.9.1": True,
    "0.9.2": True,
    "0.9.3": True,
    "0.10.0": True,
    "0.10.1": True,
    "0.11.0": True,
    "0.12.0": True,
    "0.12.1": True,
    "0.13.0": True,
    "0.13.1": True,
    "0.14.0": True,
    "0.14.1": True,
    "0.14.2": True,
}


@pytest.mark.parametrize(("label", "managed"), sorted(ARC_RELEASES.items()))
def test_arcs_chart_versions_from_0_9_0_through_0_14_x_are_managed(label: str, managed: bool) -> None:
    assert accepts_version_label(label, BUILD) is managed
    assert (label in ARC_CHART_VERSIONS) is managed


@pytest.mark.parametrize(
    ("label", "build", "managed"),
    [
        # ARC's range, whatever this build's version
        ("0.14.9", BUILD, True),  # a later patch of the last supported minor
        ("0.14", BUILD, True),  # a missing patch counts as 0, as in ARC's rule
        ("0.15.0", BUILD, False),  # a later ARC minor: its objects may differ, not checked yet
        ("1.0.0", BUILD, False),
        ("0.8.3", BUILD, False),
        ("0.14.2-rc1", BUILD, False),  # pre-releases are not releases
        ("v0.14.2", BUILD, False),
        ("00.14.2", BUILD, False),
        # this project's own versions, by ARC's rule for a build (same major and minor, dev and canary builds)
        (BUILD, BUILD, True),
        ("0.1.7", BUILD, True),
        ("0.1", BUILD, True),
        ("0.2.0", BUILD, False),
        ("0.2.0", "0.2.3", True),
        ("anything", "dev", True),
        ("0.15.0", "canary-abc123", True),
        ("weird", "weird", True),
        ("weird", BUILD, False),
        # no label: an object written by hand has nothing to compare
        (None, BUILD, True),
        ("", BUILD, True),
    ],
)
def test_the_gate_manages_arcs_range_and_this_projects_versions_only(
    label: str | None, build: str, managed: bool
) -> None:
    assert accepts_version_label(label, build) is managed


@pytest.mark.parametrize("label", ["0.8.3", "0.15.0", "1.2.3", "v0.14.2", "weird"])
def test_accepting_any_version_label_manages_every_version(label: str) -> None:
    assert accepts_version_label(label, BUILD, accept_any=True)


def test_the_range_reads_as_the_readme_states_it() -> None:
    assert str(ARC_CHART_VERSIONS) == "0.9.0 through 0.14.x"
