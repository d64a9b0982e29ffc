"""Label and annotation derivation: value trimming, the merges the resource builders use, URL labels.

Callers pass user-supplied metadata as *base* and the controller's computed keys as *overwrite*, so the keys
the controller relies on always win over what a user wrote.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from arc_scaleset.api.keys import LABEL_GITHUB_ENTERPRISE, LABEL_GITHUB_ORGANIZATION, LABEL_GITHUB_REPOSITORY

LABEL_VALUE_MAX_LENGTH = 63
_TRIM_SUFFIX = "-trim"


def trim_label_value(value: str) -> str:
    """Fit ``value`` into a label value as ARC does.

    Longer than 63 characters: the first 58 characters plus ``-trim``. Otherwise: leading and trailing ``-``,
    ``_`` and ``.`` removed (a label value must start and end with an alphanumeric character).
    """
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        return value[: LABEL_VALUE_MAX_LENGTH - len(_TRIM_SUFFIX)] + _TRIM_SUFFIX
    return value.strip("-_.")


def filter_and_merge_labels(
    base: Mapping[str, str] | None,
    overwrite: Mapping[str, str] | None,
    excluded_prefixes: Iterable[str] = (),
) -> dict[str, str] | None:
    """``base`` updated with ``overwrite``, without keys that start with one of ``excluded_prefixes``.

    ``None`` when both inputs are ``None`` (an empty mapping is not ``None``: the result is then ``{}``).
    The exclusion applies to keys from both inputs (``--exclude-label-propagation-prefix``).
    """
    if base is None and overwrite is None:
        return None
    prefixes = tuple(excluded_prefixes)
    merged = {**(base or {}), **(overwrite or {})}
    return {key: value for key, value in merged.items() if not key.startswith(prefixes)} if prefixes else merged


def merge_annotations(base: Mapping[str, str] | None, overwrite: Mapping[str, str] | None) -> dict[str, str] | None:
    """``base`` updated with ``overwrite``; ``None`` when both are ``None``."""
    if base is None and overwrite is None:
        return None
    return {**(base or {}), **(overwrite or {})}


def github_url_labels(enterprise: str, organization: str, repository: str) -> dict[str, str]:
    """The enterprise/organization/repository labels of a parsed config URL; empty parts get no label.

    Takes the parts rather than the URL so that URL parsing stays in one place
    (``arc_scaleset.github.config_url.parse_config_url``).
    """
    labels: dict[str, str] = {}
    for key, value in (
        (LABEL_GITHUB_ENTERPRISE, enterprise),
        (LABEL_GITHUB_ORGANIZATION, organization),
        (LABEL_GITHUB_REPOSITORY, repository),
    ):
        if value:
            labels[key] = trim_label_value(value)
    return labels
