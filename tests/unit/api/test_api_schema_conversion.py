"""Converting schemas to structural form: Kubernetes types from kubernetes-validate, and pydantic models."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from arc_scaleset.api.crd import k8s_schema
from arc_scaleset.api.crd.k8s_schema import UnsupportedSchemaError, structural_schema
from arc_scaleset.api.crd.structural import NotStructuralError, canonical_order, to_structural


def test_a_pod_template_schema_is_self_contained_and_typed() -> None:
    schema = structural_schema("io.k8s.api.core.v1.PodTemplateSpec")
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"metadata", "spec"}
    assert "$ref" not in repr(schema)


def test_descriptions_are_optional() -> None:
    with_docs = structural_schema("io.k8s.api.core.v1.Toleration", descriptions=True)
    without = structural_schema("io.k8s.api.core.v1.Toleration", descriptions=False)
    assert "description" in with_docs["properties"]["key"]
    assert "description" not in repr(without)


def test_quantity_and_int_or_string_become_int_or_string_nodes() -> None:
    requirements = structural_schema("io.k8s.api.core.v1.ResourceRequirements", descriptions=False)
    quantity = requirements["properties"]["requests"]["additionalProperties"]
    assert quantity == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": k8s_schema.QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }
    port = structural_schema("io.k8s.api.core.v1.HTTPGetAction", descriptions=False)["properties"]["port"]
    assert port == {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}


def test_nullable_types_become_single_types() -> None:
    toleration = structural_schema("io.k8s.api.core.v1.Toleration", descriptions=False)
    assert toleration["properties"]["tolerationSeconds"] == {"type": "integer", "format": "int64"}


def test_an_unknown_definition_is_an_error() -> None:
    with pytest.raises(UnsupportedSchemaError, match="no definition"):
        structural_schema("io.k8s.api.core.v1.NoSuchThing")


def test_unknown_keywords_and_recursion_are_refused() -> None:
    definitions: dict[str, Any] = {
        "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
        "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}},
        "C": {"type": "string", "enum": ["x"]},
    }
    converter = k8s_schema._Converter(definitions, descriptions=False)
    with pytest.raises(UnsupportedSchemaError, match="recursive schema: A -> B -> A"):
        converter.definition("A", ())
    with pytest.raises(UnsupportedSchemaError, match="unsupported schema keywords"):
        converter.definition("C", ())


def test_a_list_map_key_without_a_known_default_is_refused() -> None:
    definitions: dict[str, Any] = {
        "Holder": {
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {"$ref": "#/$defs/Item"},
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["key"],
                }
            },
        },
        "Item": {"type": "object", "properties": {"key": {"type": "string"}}},
    }
    with pytest.raises(UnsupportedSchemaError, match="neither required nor defaulted"):
        k8s_schema._Converter(definitions, descriptions=False).definition("Holder", ())


def test_the_whole_pod_template_closure_converts() -> None:
    # Every definition reachable from PodTemplateSpec converts without an unknown keyword; this fails first
    # when a newer kubernetes-validate release adds a keyword the conversion must learn.
    structural_schema("io.k8s.api.core.v1.PodTemplateSpec", descriptions=True)
    assert "io.k8s.api.core.v1.PodSpec" in k8s_schema.definition_names()


class Inner(BaseModel):
    value: int | None = None


class Outer(BaseModel):
    inner: Inner | None = None
    names: list[str] = []
    free: dict[str, Any] = {}


def test_pydantic_optionals_refs_titles_and_defaults_are_flattened() -> None:
    schema = to_structural(Outer.model_json_schema())
    assert schema == {
        "type": "object",
        "properties": {
            "inner": {"type": "object", "properties": {"value": {"type": "integer"}}},
            "names": {"type": "array", "items": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }


class Union(BaseModel):
    either: int | str


def test_a_real_union_is_not_structural() -> None:
    with pytest.raises(NotStructuralError, match="union"):
        to_structural(Union.model_json_schema())


def test_canonical_order_puts_children_last() -> None:
    ordered = canonical_order({"properties": {"b": {"type": "string"}}, "required": ["b"], "type": "object"})
    assert list(ordered) == ["type", "required", "properties"]
