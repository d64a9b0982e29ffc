"""The version gate: may this controller build manage an object labelled with another version?

An AutoscalingRunnerSet carries its chart's version in ``app.kubernetes.io/version``. This controller manages:

- the versions of ARC's charts whose CRDs and objects it serves, :data:`ARC_CHART_VERSIONS` (0.9.0 through
  0.14.x), so an install made by ARC's chart moves over unchanged (docs/differences-from-arc.md);
- its own versions, by ARC's rule for a build and its charts (:func:`is_version_allowed`);
- an object without the label (written by hand: nothing to compare);
- any version at all when the controller runs with ``--accept-any-version-label``.

Anything else keeps the ``UnsupportedVersion`` condition: reported, never deleted (ARC deletes the scale set).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

DEV_BUILD = "dev"
_CANARY_PREFIX = "canary-"
# MAJOR[.MINOR[.PATCH]], digits only, no leading zeros, no "v" and no pre-release or build suffix.
_PLAIN_SEMVER = re.compile(r"(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*))?)?")


def _parse(version: str) -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` of a plain version (a missing minor or patch counts as 0), else ``None``."""
    match = _PLAIN_SEMVER.fullmatch(version)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2) or 0), int(match.group(3) or 0)


@dataclass(frozen=True)
class VersionRange:
    """Plain versions from ``first`` through every patch release of ``last_minor`` (both included)."""

    first: tuple[int, int, int]
    last_minor: tuple[int, int]

    def __contains__(self, version: object) -> bool:
        parsed = _parse(version) if isinstance(version, str) else None
        return parsed is not None and self.first <= parsed and parsed[:2] <= self.last_minor

    def __str__(self) -> str:
        return f"{'.'.join(map(str, self.first))} through {'.'.join(map(str, self.last_minor))}.x"


ARC_CHART_VERSIONS: Final = VersionRange(first=(0, 9, 0), last_minor=(0, 14))
"""The ARC chart versions (``gha-runner-scale-set`` 0.9.0 through 0.14.x) whose AutoscalingRunnerSets this
controller manages as they are.

Why these: 0.9.0 is the release whose CRDs had to be reinstalled (its changelog says so: the shape of the
objects since), and 0.14.x is the latest release line, whose spec fields these CRDs serve. Objects written by
the releases in between carry a subset of those fields. An ARC release after 0.14 may change the objects; it
is added here once checked."""


def is_version_allowed(resource_version: str, build_version: str) -> bool:
    """ARC's rule: whether a controller of ``build_version`` manages an object whose ``app.kubernetes.io/version``
    label is ``resource_version``.

    Allowed: a ``dev`` build, equal strings, a ``canary-`` build, or two plain versions with the same major
    and minor (a missing minor counts as 0). Anything unparsable otherwise is refused.
    """
    if build_version == DEV_BUILD or resource_version == build_version or build_version.startswith(_CANARY_PREFIX):
        return True
    resource = _parse(resource_version)
    build = _parse(build_version)
    return resource is not None and build is not None and resource[:2] == build[:2]


def accepts_version_label(label: str | None, build_version: str, *, accept_any: bool = False) -> bool:
    """Whether a controller of ``build_version`` manages an AutoscalingRunnerSet whose
    ``app.kubernetes.io/version`` label is ``label`` (``None``: no label).

    True for no (or an empty) label, when ``accept_any`` (``--accept-any-version-label``), for a version in
    :data:`ARC_CHART_VERSIONS`, and for what :func:`is_version_allowed` allows for this build.
    """
    if accept_any or not label:
        return True
    return label in ARC_CHART_VERSIONS or is_version_allowed(label, build_version)
