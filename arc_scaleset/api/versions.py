"""The version gate: may this controller build manage an object labelled with another version?"""

from __future__ import annotations

import re

DEV_BUILD = "dev"
_CANARY_PREFIX = "canary-"
# MAJOR[.MINOR[.PATCH]], digits only, no leading zeros, no "v" and no pre-release or build suffix.
_PLAIN_SEMVER = re.compile(r"(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*))?)?")


def _major_minor(version: str) -> tuple[int, int] | None:
    match = _PLAIN_SEMVER.fullmatch(version)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2) or 0)


def is_version_allowed(resource_version: str, build_version: str) -> bool:
    """Whether a controller of ``build_version`` manages an object whose ``app.kubernetes.io/version`` label is
    ``resource_version``.

    Allowed: a ``dev`` build, equal strings, a ``canary-`` build, or two plain versions with the same major
    and minor (a missing minor counts as 0). Anything unparsable otherwise is refused.
    """
    if build_version == DEV_BUILD or resource_version == build_version or build_version.startswith(_CANARY_PREFIX):
        return True
    resource = _major_minor(resource_version)
    build = _major_minor(build_version)
    return resource is not None and resource == build
