"""Semantic equality for this API's objects: Kubernetes' rules plus the field rules of ARC's own types.

:mod:`arc_scaleset.kube.semantic` compares decoded JSON by JSON key, and knows the keys of Kubernetes' types
only. ARC's specs embed those types (pod templates) in types of their own, whose optional fields are Go
pointers and whose ``map[string]...`` fields are Go maps. :data:`ARC_FIELDS` states those keys; it is read
off the pydantic models, through the convention :mod:`arc_scaleset.api.common` documents for them:

- ``X | None = None`` for anything but a list or a dict is a Go pointer (``*ProxyConfig``, ``*int``);
- ``dict[str, V]`` (optional or not) is a Go map;
- a field holding a Kubernetes type (a ``PodTemplateSpec``, marked with ``k8s_schema``) is a pointer when
  optional, and what is inside it is Kubernetes' business (:data:`~arc_scaleset.kube.semantic.KUBERNETES_FIELDS`).

The rules are per key, whatever object the key is in, so a key that is a pointer in one type and not in
another (``maxRunners``: ``*int`` in the AutoscalingRunnerSet, ``int`` in the AutoscalingListener;
``template``) is left out: it then compares as an ordinary field, which can only be more lenient than Go.

Only specs are read. Status is written by the controllers and never compared for drift, and several status
fields are optional here only so that this controller never writes them (ARC's runner counts), which would
read as pointers.
"""

from __future__ import annotations

import types
from collections import defaultdict
from collections.abc import Iterable
from typing import Annotated, Any, Final, Union, get_args, get_origin

from pydantic import BaseModel, WithJsonSchema
from pydantic.fields import FieldInfo

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.api.common import K8S_SCHEMA_MARKER, ApiModel, KubeObject, json_name
from arc_scaleset.api.ephemeralrunner import EphemeralRunner
from arc_scaleset.api.ephemeralrunnerset import EphemeralRunnerSet
from arc_scaleset.kube.semantic import KUBERNETES_FIELDS, FieldRules, Semantic

__all__ = ["ARC_FIELDS", "ARC_SEMANTIC", "deep_derivative", "deep_equal", "field_rules_of"]

_PLAIN: Final = "plain"
_POINTER: Final = "pointer"
_SLICE: Final = "slice"
_MAP: Final = "map"


def field_rules_of(kinds: Iterable[type[KubeObject]]) -> FieldRules:
    """The pointer and map keys of the specs of ``kinds`` (and of every model they contain), as Go sees them.

    A key counts only when it has the same kind everywhere it appears in these types.
    """
    kinds_by_key: defaultdict[str, set[str]] = defaultdict(set)
    seen: set[type[BaseModel]] = set()

    def walk(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, field in model.model_fields.items():
            kind, nested = _classify(field)
            kinds_by_key[field.alias or json_name(name)].add(kind)
            for nested_model in nested:
                walk(nested_model)

    for kind in kinds:
        _, spec_models = _classify(kind.model_fields["spec"])
        for spec_model in spec_models:
            walk(spec_model)
    return FieldRules(
        pointers=frozenset(key for key, found in kinds_by_key.items() if found == {_POINTER}),
        maps=frozenset(key for key, found in kinds_by_key.items() if found == {_MAP}),
    )


def _classify(field: FieldInfo) -> tuple[str, tuple[type[ApiModel], ...]]:
    """The Go kind of ``field`` (plain, pointer, slice or map) and the API models found in its type."""
    annotation: Any = field.annotation
    metadata = list(field.metadata)
    optional = False
    if get_origin(annotation) in (Union, types.UnionType):
        members = [member for member in get_args(annotation) if member is not type(None)]
        optional = len(members) < len(get_args(annotation))
        if len(members) == 1:
            annotation = members[0]
    if get_origin(annotation) is Annotated:
        annotation, *extra = get_args(annotation)
        metadata.extend(extra)
    if any(_is_kubernetes_type(item) for item in metadata):
        return (_POINTER if optional else _PLAIN), ()
    origin = get_origin(annotation) or annotation
    nested = tuple(_api_models_in(annotation))
    if origin is list:
        return _SLICE, nested
    if origin is dict:
        return _MAP, nested
    return (_POINTER if optional and field.default is None else _PLAIN), nested


def _is_kubernetes_type(item: object) -> bool:
    return isinstance(item, WithJsonSchema) and K8S_SCHEMA_MARKER in (item.json_schema or {})


def _api_models_in(annotation: Any) -> Iterable[type[ApiModel]]:
    if isinstance(annotation, type) and issubclass(annotation, ApiModel):
        yield annotation
    for argument in get_args(annotation):
        yield from _api_models_in(argument)


ARC_FIELDS: Final = field_rules_of((AutoscalingRunnerSet, EphemeralRunnerSet, EphemeralRunner, AutoscalingListener))
"""The pointer and map keys of ARC's specs (``proxy``, ``githubServerTLS``, ``listenerTemplate``, ``counters``...)."""

ARC_SEMANTIC: Final = Semantic(KUBERNETES_FIELDS | ARC_FIELDS)
"""Semantic equality for ARC's objects and any part of them."""

deep_equal: Final = ARC_SEMANTIC.deep_equal
"""``Semantic.DeepEqual`` for ARC's objects (see :func:`arc_scaleset.kube.semantic.deep_equal`)."""
deep_derivative: Final = ARC_SEMANTIC.deep_derivative
"""``Semantic.DeepDerivative`` for ARC's objects (see :func:`arc_scaleset.kube.semantic.deep_derivative`)."""
