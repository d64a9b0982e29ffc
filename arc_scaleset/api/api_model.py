"""The base class of every API model (:class:`ApiModel`) and the JSON naming it applies (:func:`json_name`).

Apart from :mod:`arc_scaleset.api.common` so that a module needing one small model (the CRDs'
``MetricsConfig``, :mod:`arc_scaleset.api.metrics_config`) need not build every value type of the kinds;
:mod:`arc_scaleset.api.common` re-exports both names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["ApiModel", "json_name"]

# JSON names that are not the plain camelCase of the Python name (ARC's Go field tags).
_IRREGULAR_JSON_NAMES = {
    "patch_id": "patchID",
    "finished_runner_cleanup_patch_id": "finishedRunnerCleanupPatchID",
    "github_server_tls": "githubServerTLS",
}


def json_name(field_name: str) -> str:
    """The JSON (camelCase) name of a model field."""
    return _IRREGULAR_JSON_NAMES.get(field_name) or to_camel(field_name)


class ApiModel(BaseModel):
    """Base of every API model: camelCase JSON names, unknown fields ignored, Python names accepted too.

    Assigning a field (``status.phase = "Running"``) marks it as set, so :meth:`to_json` writes it. Note that
    ``model_copy(update=...)`` takes Python names only (``job_id``, not ``jobId``) and does not validate.
    """

    model_config = ConfigDict(
        alias_generator=json_name,
        populate_by_name=True,
        extra="ignore",
        serialize_by_alias=True,
        # A string literal under a field is its description, which the CRD schema (and `kubectl explain`) shows.
        use_attribute_docstrings=True,
    )

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Self:
        """Read a decoded JSON object (from the API server or a manifest); raises ``pydantic.ValidationError``."""
        return cls.model_validate(dict(obj))

    def to_json(self) -> dict[str, Any]:
        """The JSON form with camelCase keys, holding only the fields that were set (never invented defaults)."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")
