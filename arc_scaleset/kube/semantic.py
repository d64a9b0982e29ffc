"""Kubernetes' ``equality.Semantic`` (``DeepEqual`` and ``DeepDerivative``) for decoded JSON.

Both take what ``orjson.loads`` gives for an API object or a part of one (dicts, lists, str, int,
float, bool, None) and answer as apimachinery's ``Semantic.DeepEqual`` / ``Semantic.DeepDerivative`` would
on the typed Go structs — as closely as JSON allows. They run on every reconcile, so they are written for
speed: identity and C-level ``==`` short-circuits first, no allocation on the equal path.

**What JSON loses, and the rules we use instead.** In Go the type of a field decides how an unset value
compares; decoded JSON has no types, so we decide by the field's JSON key (the rules are per key, whatever
object the key appears in):

1. *Missing equals null equals the zero value* (``""``, ``0``, ``false``, ``[]``, ``{}``, a struct whose
   fields are all zero) for ordinary fields: Go decodes an omitted non-pointer field to its zero value, and
   a nil slice or map equals an empty one.
2. *Pointer fields* (:data:`POINTER_FIELDS`: the optional ``*T`` fields of PodSpec, Container,
   SecurityContext, probes, volume sources and env sources) are the exception: Go keeps
   "unset" (nil) apart from "set to the zero value", so a missing/null pointer field equals only another
   missing/null one — ``automountServiceAccountToken: false``, ``runAsUser: 0`` and ``securityContext: {}``
   all differ from absent. A JSON *list* under such a key is a slice (``podAffinity.required…`` is a list,
   ``nodeAffinity.required…`` a pointer), and follows rule 1.
3. *Maps* (:data:`MAP_FIELDS`: ``labels``, ``annotations``, ``nodeSelector``, …) compare as Go maps: the
   key sets must match exactly, so ``{"a": ""}`` differs from ``{}``; any other JSON object is taken to be
   a struct, where ``{"a": ""}`` equals ``{}`` (rule 1).
4. *Quantities* compare by value (``1000m == 1``, ``1Gi == 1073741824``; see :mod:`.quantity`): the values
   of the maps in :data:`QUANTITY_MAP_FIELDS` (``limits``, ``requests``, ``overhead``, ``capacity``,
   ``allocatable``, …) and the fields in :data:`QUANTITY_FIELDS` (``sizeLimit``, ``divisor``). A value
   that does not parse as a quantity is compared as plain JSON.
5. Lists compare element by element, *in order*. Strings, numbers and booleans compare exactly (no
   trimming; a boolean never equals a number; ``1 == 1.0``).

Keys whose pointer-ness depends on the enclosing type are deliberately left out of :data:`POINTER_FIELDS`
(``resources`` is a pointer only at pod level, ``restartPolicy`` only on a container, ``image`` only as a
volume source, ``type`` only in ``hostPath``, ``readOnly``/``fsType`` only in ``csi``, ``value`` only in DNS
options): they follow rule 1, which can only make us *more* lenient than Go there (a missing value equals an
explicit zero). Timestamps are compared as text; the API server writes one canonical RFC 3339 form per
instant.

**Other APIs' types.** :func:`deep_equal` and :func:`deep_derivative` know the keys of Kubernetes' own types
(:data:`KUBERNETES_FIELDS`) and nothing else. An API whose objects embed Kubernetes types in types of its own
(a custom resource whose spec holds a pod template) states its keys as a :class:`FieldRules` and compares
with ``Semantic(KUBERNETES_FIELDS | its_rules)``; this module names no such key.

**A documented shortcut.** In :func:`deep_equal`, a container (dict or list) that is ``==`` to the other
side is equal without further work (C speed: a 3-container pod template compares in about 2 µs instead of
about 140 µs). Python's ``==`` takes ``True == 1``; no schema-valid object carries a boolean and a number in
the same field, so this only matters for malformed input, where it errs towards "equal".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.kube.quantity import InvalidQuantity, Quantity, parse_quantity

__all__ = [
    "KUBERNETES_FIELDS",
    "MAP_FIELDS",
    "POINTER_FIELDS",
    "QUANTITY_FIELDS",
    "QUANTITY_MAP_FIELDS",
    "FieldRules",
    "Semantic",
    "deep_derivative",
    "deep_equal",
]

#: JSON keys of optional (Go pointer) fields: unset differs from any set value, including the zero value.
POINTER_FIELDS: Final[frozenset[str]] = frozenset(
    {
        # PodSpec
        "activeDeadlineSeconds",
        "affinity",
        "automountServiceAccountToken",
        "dnsConfig",
        "enableServiceLinks",
        "hostUsers",
        "hostnameOverride",
        "os",
        "preemptionPolicy",
        "priority",
        "runtimeClassName",
        "securityContext",  # PodSpec and Container alike
        "setHostnameAsFQDN",
        "shareProcessNamespace",
        "terminationGracePeriodSeconds",  # PodSpec and Probe alike
        "resourceClaimName",
        "resourceClaimTemplateName",
        # Container
        "lifecycle",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
        # (Pod)SecurityContext
        "allowPrivilegeEscalation",
        "appArmorProfile",
        "capabilities",
        "fsGroup",
        "fsGroupChangePolicy",
        "privileged",
        "procMount",
        "readOnlyRootFilesystem",
        "runAsGroup",
        "runAsNonRoot",
        "runAsUser",
        "seLinuxChangePolicy",
        "seLinuxOptions",
        "seccompProfile",
        "supplementalGroupsPolicy",
        "windowsOptions",
        "gmsaCredentialSpec",
        "gmsaCredentialSpecName",
        "hostProcess",
        "runAsUserName",
        "localhostProfile",
        # probe and lifecycle handlers
        "exec",
        "httpGet",
        "tcpSocket",
        "grpc",
        "service",
        "postStart",
        "preStop",
        "sleep",
        "stopSignal",
        # env and envFrom sources
        "valueFrom",
        "fieldRef",
        "resourceFieldRef",
        "configMapKeyRef",
        "secretKeyRef",
        "fileKeyRef",
        "configMapRef",
        "secretRef",
        "optional",
        # volume sources (VolumeSource is a union of pointers) and their optional fields
        "awsElasticBlockStore",
        "azureDisk",
        "azureFile",
        "cephfs",
        "cinder",
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "fc",
        "flexVolume",
        "flocker",
        "gcePersistentDisk",
        "gitRepo",
        "glusterfs",
        "hostPath",
        "iscsi",
        "nfs",
        "persistentVolumeClaim",
        "photonPersistentDisk",
        "portworxVolume",
        "projected",
        "quobyte",
        "rbd",
        "scaleIO",
        "secret",
        "storageos",
        "vsphereVolume",
        "serviceAccountToken",
        "clusterTrustBundle",
        "podCertificate",
        "defaultMode",
        "mode",
        "sizeLimit",
        "expirationSeconds",
        "nodePublishSecretRef",
        "volumeClaimTemplate",
        "dataSource",
        "dataSourceRef",
        "storageClassName",
        "volumeMode",
        "volumeAttributesClassName",
        "mountPropagation",
        "recursiveReadOnly",
        # scheduling
        "tolerationSeconds",
        "nodeAffinity",
        "podAffinity",
        "podAntiAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "selector",
        "labelSelector",
        "namespaceSelector",
        "minDomains",
        "nodeAffinityPolicy",
        "nodeTaintsPolicy",
        # ObjectMeta and owner references
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "controller",
        "blockOwnerDeletion",
    }
)

#: JSON keys of Go map fields (key sets compare exactly; nil equals empty).
MAP_FIELDS: Final[frozenset[str]] = frozenset(
    {
        "labels",
        "annotations",
        "nodeSelector",
        "matchLabels",
        "volumeAttributes",
        "options",  # flexVolume; dnsConfig.options is a list and follows the list rules
        "data",
        "stringData",
        "binaryData",
        "parameters",
    }
)

#: JSON keys of maps whose values are quantities (compared by value).
QUANTITY_MAP_FIELDS: Final[frozenset[str]] = frozenset(
    {"limits", "requests", "overhead", "capacity", "allocatable", "allocatedResources", "hard", "used"}
)

#: JSON keys of single quantity fields (compared by value). ``sizeLimit`` is also a pointer field.
QUANTITY_FIELDS: Final[frozenset[str]] = frozenset({"sizeLimit", "divisor"})

# What a value is, as far as comparison goes; decided by the key it sits under.
_PLAIN: Final = 0  # a struct (for objects) or a plain scalar
_MAP: Final = 1
_QUANTITY_MAP: Final = 2
_QUANTITY: Final = 3

_ABSENT: Final[Any] = object()


@dataclass(frozen=True)
class FieldRules:
    """Which JSON keys hold pointers, maps, quantity maps and quantities (rules 2 to 4 of the module
    docstring); every other key is an ordinary field (rule 1).

    The rules are per key, whatever object the key appears in: list a key only when it means the same in
    every type it can meet (leaving one out can only make a comparison more lenient). ``a | b`` holds the
    keys of both.
    """

    pointers: frozenset[str] = frozenset()
    maps: frozenset[str] = frozenset()
    quantity_maps: frozenset[str] = frozenset()
    quantities: frozenset[str] = frozenset()

    def __or__(self, other: FieldRules) -> FieldRules:
        return FieldRules(
            pointers=self.pointers | other.pointers,
            maps=self.maps | other.maps,
            quantity_maps=self.quantity_maps | other.quantity_maps,
            quantities=self.quantities | other.quantities,
        )


KUBERNETES_FIELDS: Final = FieldRules(
    pointers=POINTER_FIELDS, maps=MAP_FIELDS, quantity_maps=QUANTITY_MAP_FIELDS, quantities=QUANTITY_FIELDS
)
"""The rules of Kubernetes' own types (pods, pod templates, object metadata, secrets, ...)."""

Comparison = Callable[[Any, Any], bool]


class Semantic:
    """``deep_equal`` and ``deep_derivative`` (see the module-level functions) under one :class:`FieldRules`.

    Objects that embed Kubernetes types in their own (a custom resource's spec) compare under
    ``KUBERNETES_FIELDS | their_fields``. Build one per rule set, once: the comparisons are compiled for it.
    """

    __slots__ = ("deep_derivative", "deep_equal", "rules")

    rules: FieldRules
    deep_equal: Comparison
    deep_derivative: Comparison

    def __init__(self, rules: FieldRules) -> None:
        self.rules = rules
        self.deep_equal, self.deep_derivative = _compile(rules)


def _compile(rules: FieldRules) -> tuple[Comparison, Comparison]:
    """``(deep_equal, deep_derivative)`` for ``rules``.

    The comparison functions are closures over the rule set rather than functions taking it as an
    argument: they run on every reconcile, and a closure variable costs no more than the module global
    it replaces.
    """
    pointer_fields = rules.pointers
    context_by_key: dict[str, int] = (
        {key: _MAP for key in rules.maps}
        | {key: _QUANTITY_MAP for key in rules.quantity_maps}
        | {key: _QUANTITY for key in rules.quantities}
    )
    context_of = context_by_key.get

    def deep_equal(a: Any, b: Any) -> bool:
        """``Semantic.DeepEqual(a, b)`` on decoded JSON, under the rules in the module docstring.

        Symmetric and reflexive. ``None`` and a missing value equal an empty one (``deep_equal(None, {})``).
        """
        if a is b:
            return True
        return _equal(a, b, _PLAIN)

    def deep_derivative(desired: Any, live: Any) -> bool:
        """``Semantic.DeepDerivative(desired, live)``: does ``live`` carry everything ``desired`` sets?

        Unset values on the desired side are ignored: ``None``, a missing key, ``""``, an empty list or map.
        Lists: ``desired`` must be a prefix of ``live`` (server-appended elements, such as the
        ``kube-api-access`` volume and mount or default tolerations, are ignored). Maps: every desired key must
        exist in ``live``, even one whose desired value is empty. Structs: field by field; a field the live side
        lacks compares against its zero value, except a pointer field, which then fails. Numbers and booleans
        that *are* set on the desired side compare exactly, ``0`` and ``false`` included. Quantities by value.

        Unlike Go, a numeric or boolean field *missing* from the desired side is ignored rather than compared as
        ``0``/``false``: JSON cannot tell it from an unset pointer, and this spares us churn on server-defaulted
        probe timings. Removals from the desired side are invisible by design; callers check those separately.
        """
        if desired is None or desired is live:
            return True
        return _derivative(desired, live, _PLAIN)

    # --- DeepEqual ---------------------------------------------------------------------------------------

    def _equal(a: Any, b: Any, context: int) -> bool:
        if a is b:
            return True
        type_a = type(a)
        if type_a is dict:
            if type(b) is not dict:
                return b is None and _is_zero(a, context)
            if a == b:
                return True
            if context == _PLAIN:
                return _struct_equal(a, b)
            return _map_equal(a, b, context)
        if type_a is list:
            if type(b) is not list:
                return b is None and not a
            if a == b:
                return True
            if len(a) != len(b):
                return False
            for item_a, item_b in zip(a, b, strict=True):
                if item_a is not item_b and not _equal(item_a, item_b, _PLAIN):
                    return False
            return True
        if a is None:
            return _is_zero(b, context)
        if b is None:
            return _is_zero(a, context)
        if context == _QUANTITY:
            return _quantity_equal(a, b)
        return _scalar_equal(a, b)

    def _struct_equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
        for key, value_a in a.items():
            value_b = b.get(key)
            if value_a is value_b:
                continue
            if value_b is None:
                if not _equals_absent(key, value_a):
                    return False
            elif value_a is None:
                if not _equals_absent(key, value_b):
                    return False
            elif not _equal(value_a, value_b, context_of(key, _PLAIN)):
                return False
        # Keys only ``b`` has (a second pass, but no set built: the common case has none).
        return all(key in a or _equals_absent(key, value_b) for key, value_b in b.items())

    def _map_equal(a: dict[str, Any], b: dict[str, Any], context: int) -> bool:
        if len(a) != len(b):
            return False
        value_context = _QUANTITY if context == _QUANTITY_MAP else _PLAIN
        for key, value_a in a.items():
            value_b = b.get(key, _ABSENT)
            if value_b is _ABSENT:
                return False
            if value_a is not value_b and not _equal(value_a, value_b, value_context):
                return False
        return True

    def _equals_absent(key: str, value: Any) -> bool:
        """Does a struct field holding ``value`` equal the same field left unset?"""
        if value is None:
            return True
        if key in pointer_fields and type(value) is not list:
            return False
        return _is_zero(value, context_of(key, _PLAIN))

    def _is_zero(value: Any, context: int) -> bool:
        """Is ``value`` the Go zero value of its field (what an unset non-pointer field decodes to)?"""
        if value is None:
            return True
        kind = type(value)
        if kind is dict:
            if context != _PLAIN:
                return not value
            return all(_equals_absent(key, item) for key, item in value.items())
        if kind is list or kind is str:
            if context == _QUANTITY and kind is str and value:
                quantity = _as_quantity(value)
                return quantity is not None and quantity.is_zero()
            return not value
        if kind is bool:
            return value is False
        if kind is int or kind is float:
            return bool(value == 0)
        return False

    # --- DeepDerivative ----------------------------------------------------------------------------------

    def _derivative(desired: Any, live: Any, context: int) -> bool:
        if desired is None or desired is live:
            return True
        if live is None:
            return _derivative_of_zero(desired, context)
        kind = type(desired)
        if kind is dict:
            if type(live) is not dict:
                return False
            # No ``desired == live`` shortcut here, unlike _equal: a live object carries server defaults at
            # every level, so the comparison would almost always fail and only cost time.
            if not desired:
                return True
            if context == _PLAIN:
                return _struct_derivative(desired, live)
            return _map_derivative(desired, live, context)
        if kind is list:
            if type(live) is not list:
                return False
            if not desired:
                return True
            if len(desired) > len(live):
                return False
            for item_desired, item_live in zip(desired, live, strict=False):
                if item_desired is not item_live and not _derivative(item_desired, item_live, _PLAIN):
                    return False
            return True
        if context == _QUANTITY:
            return desired == "" or _quantity_equal(desired, live)
        if kind is str:
            return not desired or (type(live) is str and desired == live)
        return _scalar_equal(desired, live)

    def _struct_derivative(desired: dict[str, Any], live: dict[str, Any]) -> bool:
        for key, value_desired in desired.items():
            if value_desired is None:
                continue
            value_live = live.get(key)
            if value_live is None:
                # The live object leaves the field unset: a pointer field is then nil (a set desired pointer is
                # not derivative of nil); any other field holds its zero value.
                if key in pointer_fields and type(value_desired) is not list:
                    return False
                if not _derivative_of_zero(value_desired, context_of(key, _PLAIN)):
                    return False
            elif value_desired is not value_live and not _derivative(
                value_desired, value_live, context_of(key, _PLAIN)
            ):
                return False
        return True

    def _map_derivative(desired: dict[str, Any], live: dict[str, Any], context: int) -> bool:
        if len(desired) > len(live):
            return False
        value_context = _QUANTITY if context == _QUANTITY_MAP else _PLAIN
        for key, value_desired in desired.items():
            value_live = live.get(key, _ABSENT)
            if value_live is _ABSENT:
                return False  # a desired map key must exist on the live side, whatever its desired value
            if value_desired is not value_live and not _derivative(value_desired, value_live, value_context):
                return False
        return True

    def _derivative_of_zero(desired: Any, context: int) -> bool:
        """Is the zero value (an unset non-pointer field, a nil slice or map) a derivative of ``desired``?"""
        if desired is None:
            return True
        kind = type(desired)
        if kind is dict:
            if context != _PLAIN:
                return not desired
            for key, value in desired.items():
                if value is None:
                    continue
                if key in pointer_fields and type(value) is not list:
                    return False
                if not _derivative_of_zero(value, context_of(key, _PLAIN)):
                    return False
            return True
        if kind is list or kind is str:
            if context == _QUANTITY and kind is str and desired:
                quantity = _as_quantity(desired)
                return quantity is not None and quantity.is_zero()
            return not desired
        if kind is bool:
            return desired is False
        if kind is int or kind is float:
            return bool(desired == 0)
        return False

    return deep_equal, deep_derivative


def _scalar_equal(a: Any, b: Any) -> bool:
    type_a = type(a)
    type_b = type(b)
    if type_a is type_b:
        return bool(a == b)
    # int and float may meet (a JSON 1 and 1.0); bool never equals a number, str never equals anything else.
    return (type_a is int or type_a is float) and (type_b is int or type_b is float) and bool(a == b)


def _quantity_equal(a: Any, b: Any) -> bool:
    quantity_a = _as_quantity(a)
    quantity_b = _as_quantity(b)
    if quantity_a is None or quantity_b is None:
        return _scalar_equal(a, b)
    return quantity_a.value == quantity_b.value


def _as_quantity(value: Any) -> Quantity | None:
    kind = type(value)
    if kind is str or kind is int or kind is float:
        try:
            return parse_quantity(value)
        except InvalidQuantity:
            return None
    return None


_KUBERNETES: Final = Semantic(KUBERNETES_FIELDS)
deep_equal: Final = _KUBERNETES.deep_equal
deep_derivative: Final = _KUBERNETES.deep_derivative
