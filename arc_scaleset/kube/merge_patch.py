"""The JSON merge patch (RFC 7386) between two objects. A module of its own, apart from the API client, so
that the controllers' pure decisions can compute a patch without importing anything that talks to the API
server (the import contracts in pyproject.toml hold them to that)."""

from __future__ import annotations

import copy
from typing import Any


def merge_patch(original: Any, desired: Any) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``original`` into ``desired`` (two JSON objects).

    Keys missing from ``desired`` become ``null`` (delete); nested objects recurse; lists and scalars are
    replaced whole when they differ. ``{}`` means no change.
    """
    if not isinstance(original, dict) or not isinstance(desired, dict):
        raise TypeError("merge_patch compares two JSON objects")
    patch: dict[str, Any] = {}
    for key, value in desired.items():
        if key not in original:
            patch[key] = copy.deepcopy(value)
        elif isinstance(value, dict) and isinstance(original[key], dict):
            nested = merge_patch(original[key], value)
            if nested:
                patch[key] = nested
        elif value != original[key] or type(value) is not type(original[key]):
            patch[key] = copy.deepcopy(value)
    for key in original:
        if key not in desired:
            patch[key] = None
    return patch
