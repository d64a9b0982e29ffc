"""Kubernetes built-in type schemas (PodTemplateSpec, PodSpec, ...) in the structural form a CRD needs.

The source is the OpenAPI data shipped with the ``kubernetes-validate`` package (JSON Schema, one ``$defs``
table per Kubernetes release). A CRD schema must be *structural*: no ``$ref``, one non-null ``type`` per node,
``anyOf``/``oneOf`` only as value validation. The conversion:

- resolves every ``$ref`` by inlining (the PodTemplateSpec closure has no cycles; one would raise);
- ``type: [X, "null"]`` becomes ``type: X`` (the API server drops nulls of non-nullable fields, as the
  built-in API ignores them);
- ``Quantity`` and ``IntOrString`` (``oneOf`` string/number) become ``x-kubernetes-int-or-string`` nodes; a
  Quantity also gets the pattern of the Quantity grammar, so ``cpu: lots`` is rejected at admission rather
  than when the pod is created;
- keeps ``x-kubernetes-list-type``/``list-map-keys``/``map-type`` (server-side apply merges templates by
  them). The API server requires every list-map key to be required or defaulted; the two keys the Pod API
  defaults itself (a container port's ``protocol``, an image pull secret's ``name``) get those defaults;
- drops what a CRD cannot carry (``x-kubernetes-patch-*``, ``x-kubernetes-unions``) and, on request,
  descriptions (the largest part of the schema, and documented with the Pod API anyway);
- narrows an embedded ``ObjectMeta`` to the fields a template may use (labels, annotations, name, namespace,
  finalizers), as controller-gen's ``generateEmbeddedObjectMeta`` does for ARC's CRDs.

Any keyword this module does not know raises :class:`UnsupportedSchemaError`, so a newer schema release that adds
one is noticed by the unit tests instead of slipping into the CRDs.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any, Final

import orjson

KUBERNETES_SCHEMA_RELEASE: Final = "v1.37.0"
_SCHEMA_DIRECTORY: Final = f"{KUBERNETES_SCHEMA_RELEASE}-local"

QUANTITY: Final = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING: Final = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
OBJECT_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

# The Quantity grammar of k8s.io/apimachinery: a signed decimal number and an optional suffix (binary SI,
# decimal SI, or a decimal exponent).
QUANTITY_PATTERN: Final = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$"

_EMBEDDED_OBJECT_META_FIELDS: Final = ("annotations", "finalizers", "labels", "name", "namespace")

# List-map keys that are neither required nor defaulted in the OpenAPI data, with the default the Pod API
# applies to them (so the defaulted object equals what the Pod API would make of it).
_LIST_MAP_KEY_DEFAULTS: Final[dict[str, dict[str, Any]]] = {
    "io.k8s.api.core.v1.ContainerPort": {"protocol": "TCP"},
    "io.k8s.api.core.v1.LocalObjectReference": {"name": ""},
}

_COPIED: Final = frozenset({"format", "x-kubernetes-list-type", "x-kubernetes-map-type", "x-kubernetes-list-map-keys"})
_DROPPED: Final = frozenset({"x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key", "x-kubernetes-unions"})
_HANDLED: Final = frozenset({"$ref", "type", "description", "properties", "items", "additionalProperties", "required"})


class UnsupportedSchemaError(ValueError):
    """The Kubernetes schema data uses something the structural conversion does not handle."""


@functools.cache
def _definitions() -> dict[str, Any]:
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema" / _SCHEMA_DIRECTORY / "_definitions.json"
    data: dict[str, Any] = orjson.loads(root.read_bytes())["$defs"]
    return data


def definition_names() -> frozenset[str]:
    """Every definition name in the schema data (``io.k8s.api.core.v1.PodSpec``, ...)."""
    return frozenset(_definitions())


def structural_schema(definition: str, *, descriptions: bool = True) -> dict[str, Any]:
    """The structural CRD schema of the Kubernetes type ``definition``; a fresh copy on every call."""
    definitions = _definitions()
    if definition not in definitions:
        raise UnsupportedSchemaError(
            f"no definition {definition!r} in the Kubernetes {KUBERNETES_SCHEMA_RELEASE} schema"
        )
    return _Converter(definitions, descriptions=descriptions).definition(definition, ())


class _Converter:
    def __init__(self, definitions: dict[str, Any], *, descriptions: bool) -> None:
        self._definitions = definitions
        self._descriptions = descriptions

    def definition(self, name: str, stack: tuple[str, ...]) -> dict[str, Any]:
        if name in stack:
            raise UnsupportedSchemaError(f"recursive schema: {' -> '.join((*stack, name))}")
        if name == QUANTITY:
            return {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "pattern": QUANTITY_PATTERN,
                "x-kubernetes-int-or-string": True,
            }
        if name == INT_OR_STRING:
            return {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
        schema = self.node(self._definitions[name], (*stack, name), where=name)
        if name == OBJECT_META:
            kept = {key: schema["properties"][key] for key in _EMBEDDED_OBJECT_META_FIELDS}
            schema["properties"] = kept
        return schema

    def node(self, source: dict[str, Any], stack: tuple[str, ...], *, where: str) -> dict[str, Any]:
        unknown = set(source) - _COPIED - _DROPPED - _HANDLED
        if unknown:
            raise UnsupportedSchemaError(f"{where}: unsupported schema keywords {sorted(unknown)}")
        if "$ref" in source:
            resolved = self.definition(source["$ref"].rsplit("/", 1)[-1], stack)
            if self._descriptions and "description" in source:
                resolved = {
                    "description": source["description"],
                    **{k: v for k, v in resolved.items() if k != "description"},
                }
            return resolved

        schema: dict[str, Any] = {}
        if self._descriptions and "description" in source:
            schema["description"] = source["description"]
        if "type" in source:
            schema["type"] = _single_type(source["type"], where)
        if "properties" in source:
            schema["properties"] = {
                name: self.node(prop, stack, where=f"{where}.{name}") for name, prop in source["properties"].items()
            }
        if "required" in source:
            schema["required"] = list(source["required"])
        if "items" in source:
            schema["items"] = self.node(source["items"], stack, where=f"{where}[]")
        additional = source.get("additionalProperties")
        if isinstance(additional, dict):
            schema["additionalProperties"] = self.node(additional, stack, where=f"{where}{{}}")
        elif additional is not None:
            raise UnsupportedSchemaError(f"{where}: additionalProperties {additional!r}")
        for key in sorted(_COPIED & set(source)):
            # Copy lists: the same source list must not end up shared between nodes of the output.
            value = source[key]
            schema[key] = list(value) if isinstance(value, list) else value
        if schema.get("x-kubernetes-list-type") == "map":
            _default_list_map_keys(schema, source, where)
        if "type" not in schema:
            raise UnsupportedSchemaError(f"{where}: no type")
        return schema


def _single_type(value: str | list[str], where: str) -> str:
    types = [value] if isinstance(value, str) else [t for t in value if t != "null"]
    if len(types) != 1:
        raise UnsupportedSchemaError(f"{where}: type {value!r} is not a single type")
    return types[0]


def _default_list_map_keys(schema: dict[str, Any], source: dict[str, Any], where: str) -> None:
    item_definition = source["items"].get("$ref", "").rsplit("/", 1)[-1]
    items = schema["items"]
    required = set(items.get("required", ()))
    for key in schema["x-kubernetes-list-map-keys"]:
        if key in required or "default" in items["properties"][key]:
            continue
        default = _LIST_MAP_KEY_DEFAULTS.get(item_definition, {})
        if key not in default:
            raise UnsupportedSchemaError(f"{where}: list-map key {key!r} is neither required nor defaulted")
        items["properties"][key]["default"] = default[key]
