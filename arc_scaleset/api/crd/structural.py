"""Pydantic JSON schema -> structural OpenAPI v3 schema for a CustomResourceDefinition.

Pydantic writes JSON Schema 2020-12 with ``$defs``/``$ref``, ``anyOf: [X, {type: null}]`` for optional fields,
titles and defaults. A CRD needs a structural schema: every node inlined, one ``type`` per node. This module
converts, keeping the validation keywords and ``x-kubernetes-*`` extensions a model declares, and expands the
fields marked with :data:`arc_scaleset.api.common.K8S_SCHEMA_MARKER` into the Kubernetes type's own schema.

Defaults are dropped on purpose: the API server would write them into stored objects, and a default lives in
the code that reads the field (the models' zero values), not in the stored data.
"""

from __future__ import annotations

from typing import Any, Final

from arc_scaleset.api.common import K8S_SCHEMA_MARKER
from arc_scaleset.api.crd import k8s_schema

_COPIED: Final = frozenset(
    {
        "description",
        "type",
        "required",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "pattern",
        "enum",
        "format",
        "x-kubernetes-validations",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
    }
)
_DROPPED: Final = frozenset({"title", "default", "$defs"})
_HANDLED: Final = frozenset({"$ref", "anyOf", "properties", "items", "additionalProperties", K8S_SCHEMA_MARKER})


class NotStructuralError(ValueError):
    """The model's JSON schema has a shape a structural CRD schema cannot express."""


def to_structural(schema: dict[str, Any], *, k8s_descriptions: bool = False) -> dict[str, Any]:
    """Convert a pydantic ``model_json_schema(by_alias=True)`` result (with its ``$defs``) to structural form.

    ``k8s_descriptions`` keeps the descriptions inside expanded Kubernetes types (large: about 250 kB per pod
    template).
    """
    converted = _Converter(schema.get("$defs", {}), k8s_descriptions=k8s_descriptions).node(schema, (), where="$")
    return canonical_order(converted)


# Keyword order in the output: what a node is first, then its constraints, then its children. A fixed order
# keeps the generated YAML readable and stable whatever order the inputs came in.
_KEY_ORDER: Final = (
    "description",
    "type",
    "format",
    "anyOf",
    "x-kubernetes-int-or-string",
    "pattern",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "default",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
    "required",
    "items",
    "additionalProperties",
    "properties",
)
_RANK: Final = {key: rank for rank, key in enumerate(_KEY_ORDER)}


def canonical_order(schema: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``schema`` with keywords in a fixed order (property names keep their order)."""
    ordered: dict[str, Any] = {}
    for key in sorted(schema, key=lambda k: (_RANK.get(k, len(_KEY_ORDER)), k)):
        value = schema[key]
        if key == "properties":
            value = {name: canonical_order(prop) for name, prop in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            value = canonical_order(value)
        elif key == "anyOf":
            value = [canonical_order(branch) for branch in value]
        elif isinstance(value, list):
            value = [dict(v) if isinstance(v, dict) else v for v in value]
        ordered[key] = value
    return ordered


class _Converter:
    def __init__(self, definitions: dict[str, Any], *, k8s_descriptions: bool) -> None:
        self._definitions = definitions
        self._k8s_descriptions = k8s_descriptions

    def node(self, source: dict[str, Any], stack: tuple[str, ...], *, where: str) -> dict[str, Any]:
        unknown = set(source) - _COPIED - _DROPPED - _HANDLED
        if unknown:
            raise NotStructuralError(f"{where}: unsupported JSON schema keywords {sorted(unknown)}")
        siblings = {key: value for key, value in source.items() if key in _COPIED}

        if "$ref" in source:
            name = source["$ref"].rsplit("/", 1)[-1]
            if name in stack:
                raise NotStructuralError(f"{where}: recursive model {' -> '.join((*stack, name))}")
            return {**self.node(self._definitions[name], (*stack, name), where=where), **siblings}
        if "anyOf" in source:
            branches = [branch for branch in source["anyOf"] if branch != {"type": "null"}]
            if len(branches) != 1:
                raise NotStructuralError(f"{where}: a union of several types ({source['anyOf']!r})")
            return {**self.node(branches[0], stack, where=where), **siblings}
        if K8S_SCHEMA_MARKER in source:
            expanded = k8s_schema.structural_schema(source[K8S_SCHEMA_MARKER], descriptions=self._k8s_descriptions)
            expanded.pop("description", None)
            return {
                **siblings,
                **expanded,
                **({"description": siblings["description"]} if "description" in siblings else {}),
            }

        schema = dict(siblings)
        if "type" not in schema or not isinstance(schema["type"], str):
            raise NotStructuralError(f"{where}: needs exactly one type, has {source.get('type')!r}")
        if source.get("properties"):
            # An empty `properties` is left out: the API server drops it, and the stored CRD would differ.
            schema["properties"] = {
                name: self.node(prop, stack, where=f"{where}.{name}") for name, prop in source["properties"].items()
            }
        if "items" in source:
            schema["items"] = self.node(source["items"], stack, where=f"{where}[]")
        additional = source.get("additionalProperties")
        if isinstance(additional, dict):
            schema["additionalProperties"] = self.node(additional, stack, where=f"{where}{{}}")
        elif additional is True:
            # dict[str, Any]: free-form data, kept as written.
            schema["x-kubernetes-preserve-unknown-fields"] = True
        return schema
