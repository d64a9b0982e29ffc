"""Does a new CRD break objects stored under an old one?

:func:`breaking_changes` compares two versions of one CustomResourceDefinition and lists what would make an
object that was valid under the old schema lose data or fail validation under the new one: a removed version
or field, a narrowed type, a field that became required, a tightened bound, pattern or enum, a changed list
merge type. Additions (new optional fields, widened types, new printer columns) are not reported. CEL rules
are not reported either: the API server ratchets them (an unchanged value is not re-validated on update).

This is deliberately simple: it compares schemas node by node, and knows nothing about conversion webhooks.
"""

from __future__ import annotations

from typing import Any

_NAME_FIELDS = ("kind", "plural", "listKind", "singular")


def breaking_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable descriptions of the breaking differences from ``old`` to ``new`` (empty when none)."""
    problems: list[str] = []
    old_spec, new_spec = old["spec"], new["spec"]
    if old_spec.get("group") != new_spec.get("group"):
        problems.append(f"group changed from {old_spec.get('group')!r} to {new_spec.get('group')!r}")
    if old_spec.get("scope") != new_spec.get("scope"):
        problems.append(f"scope changed from {old_spec.get('scope')!r} to {new_spec.get('scope')!r}")
    for field in _NAME_FIELDS:
        before, after = old_spec["names"].get(field), new_spec["names"].get(field)
        if before != after:
            problems.append(f"names.{field} changed from {before!r} to {after!r}")

    new_versions = {version["name"]: version for version in new_spec["versions"]}
    for version in old_spec["versions"]:
        name = version["name"]
        if name not in new_versions:
            problems.append(f"version {name} removed")
            continue
        candidate = new_versions[name]
        if version.get("served") and not candidate.get("served"):
            problems.append(f"version {name} no longer served")
        if version.get("storage") and not candidate.get("storage"):
            problems.append(f"version {name} is no longer the storage version")
        if "status" in version.get("subresources", {}) and "status" not in candidate.get("subresources", {}):
            problems.append(f"version {name}: status subresource removed")
        old_schema = version.get("schema", {}).get("openAPIV3Schema", {})
        new_schema = candidate.get("schema", {}).get("openAPIV3Schema", {})
        problems.extend(f"{name}: {problem}" for problem in schema_breaking_changes(old_schema, new_schema))
    return problems


def schema_breaking_changes(old: dict[str, Any], new: dict[str, Any], path: str = "") -> list[str]:
    """The breaking differences between two structural schemas, each prefixed with its field path."""
    here = path or "."
    if _preserves_unknown(new):
        return []  # everything is kept below this node
    problems: list[str] = []

    old_type, new_type = _type_of(old), _type_of(new)
    if old_type != new_type and new_type != "int-or-string":
        return [f"{here}: type narrowed from {old_type} to {new_type}"]
    if _preserves_unknown(old):
        problems.append(f"{here}: no longer preserves unknown fields")

    problems.extend(f"{here}: {problem}" for problem in _tightened_constraints(old, new))

    if old.get("x-kubernetes-list-type", "atomic") != new.get("x-kubernetes-list-type", "atomic") or old.get(
        "x-kubernetes-list-map-keys"
    ) != new.get("x-kubernetes-list-map-keys"):
        problems.append(f"{here}: list type changed")

    newly_required = set(new.get("required", ())) - set(old.get("required", ()))
    problems.extend(f"{path}.{name}: became required" for name in sorted(newly_required))

    old_properties, new_properties = old.get("properties", {}), new.get("properties", {})
    for name, old_property in old_properties.items():
        if name not in new_properties:
            problems.append(f"{path}.{name}: field removed")
        else:
            problems.extend(schema_breaking_changes(old_property, new_properties[name], f"{path}.{name}"))
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(old.get(key), dict):
            if not isinstance(new.get(key), dict):
                problems.append(f"{here}: {key} schema removed")
            else:
                problems.extend(schema_breaking_changes(old[key], new[key], f"{path}{suffix}"))
    return problems


def _preserves_unknown(schema: dict[str, Any]) -> bool:
    return bool(schema.get("x-kubernetes-preserve-unknown-fields"))


def _type_of(schema: dict[str, Any]) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    return str(schema.get("type", "any"))


def _tightened_constraints(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    problems = []
    for key in ("minimum", "minLength", "minItems", "minProperties"):
        if key in new and (key not in old or new[key] > old[key]):
            problems.append(f"{key} raised to {new[key]}")
    for key in ("maximum", "maxLength", "maxItems", "maxProperties"):
        if key in new and (key not in old or new[key] < old[key]):
            problems.append(f"{key} lowered to {new[key]}")
    if "pattern" in new and new["pattern"] != old.get("pattern"):
        problems.append(f"pattern changed to {new['pattern']!r}")
    if "enum" in new and ("enum" not in old or not set(map(repr, old["enum"])) <= set(map(repr, new["enum"]))):
        problems.append(f"enum narrowed to {new['enum']!r}")
    if "format" in new and new["format"] != old.get("format"):
        problems.append(f"format changed to {new['format']!r}")
    return problems
