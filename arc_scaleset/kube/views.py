"""Read-only views over Kubernetes objects as the API or an informer cache holds them (plain JSON dicts).

:class:`ObjectView` wraps one object **without copying it** and reads its metadata; :class:`PodView` adds the
few pod fields the controllers act on; the views of this project's own kinds build on :class:`ObjectView` in
:mod:`arc_scaleset.api.views`. Constructing a view costs one attribute lookup, so take one wherever an object
is read, even in a loop.

The contract every accessor keeps:

- **Tolerant.** A missing or malformed field reads as its empty value (``""``, ``0``, ``None``, an empty
  mapping or sequence), never as an exception: a missing ``metadata`` gives empty values, a ``labels`` that
  is not a mapping gives no labels, a ``generation`` that is not an integer gives 0. An empty mapping or
  sequence is a new plain ``{}`` or ``[]``: the JSON helpers (semantic comparison, merge patches) test for
  ``dict`` and ``list`` exactly, and nothing is shared that a careless caller could fill.
- **Zero-copy and read-only.** Mappings and sequences are returned as the object holds them, typed
  ``Mapping``/``Sequence`` so that mypy rejects writes: an object read from an informer is shared by every
  reader (see :mod:`arc_scaleset.kube.informer`), and copying on every read would cost what the cache saves.
  Take :func:`~arc_scaleset.kube.informer.copy_of` first to build a modified version.
- **Live.** A view reads the object on every access; it holds no parsed state of its own.

:func:`metadata_of` and :func:`section` are the same tolerant reads as plain functions, for the informer's
per-object hot path where even a view's construction shows in the ingest rate.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

Object = Mapping[str, Any]
"""An object as read from a store: shared and read-only by contract (:mod:`arc_scaleset.kube.informer`). Defined
here, with no dependency, so that pure modules can name it without importing the client."""


def metadata_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj.metadata`` as stored, or an empty mapping when it is missing or not a mapping."""
    meta = obj.get("metadata")
    # Decoded JSON always holds a dict here: the exact type test spares the slower ABC check on the hot path.
    if type(meta) is dict or isinstance(meta, Mapping):
        return meta
    return {}


def section(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``obj[key]`` when it is a mapping (``spec``, ``status``, ...), else an empty mapping."""
    value = obj.get(key)
    if type(value) is dict or isinstance(value, Mapping):
        return value
    return {}


def string(value: object) -> str:
    """``value`` when it is a string, else ``""``."""
    return value if isinstance(value, str) else ""


def integer(value: object) -> int:
    """``value`` when it is an integer (booleans are not), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty mapping."""
    return value if isinstance(value, Mapping) else {}


def sequence(value: object) -> Sequence[Any]:
    """``value`` when it is a list or tuple (a JSON array), else an empty list."""
    return value if isinstance(value, (list, tuple)) else []


def indexed_mappings(value: object) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """The mappings of ``value`` when it is a list, with their index in it (anything else in it is skipped: the
    API server rejects it); nothing when it is not a list."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, Mapping):
                yield index, item


def nested(value: object, *path: str) -> Any:
    """``value[path[0]][path[1]]...``, or ``None`` where a step is missing or not a mapping."""
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def named(items: Sequence[Any], name: str) -> Mapping[str, Any] | None:
    """The first mapping in ``items`` whose ``name`` is ``name`` (a container, a volume, a status), or ``None``."""
    for item in items:
        if isinstance(item, Mapping) and item.get("name") == name:
            return item
    return None


def parse_int(value: object) -> int:
    """A decimal integer held as a string (an annotation value); anything missing or unparsable reads as 0,
    as ARC's ``strconv.Atoi`` use does."""
    if not isinstance(value, str):
        return 0
    try:
        return int(value.strip(), 10)
    except ValueError:
        return 0


def parse_timestamp(value: object) -> dt.datetime | None:
    """An RFC 3339 ``metav1.Time`` as an aware datetime (naive values are UTC); ``None`` when absent or
    malformed."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


class ObjectView:
    """The metadata of one Kubernetes object, read in place (see the module docstring for the contract).

    ``raw`` is the wrapped object itself (not a copy); ``metadata`` its ``metadata`` mapping (empty when
    missing or malformed).
    """

    __slots__ = ("metadata", "raw")

    raw: Mapping[str, Any]
    metadata: Mapping[str, Any]

    def __init__(self, obj: Mapping[str, Any]) -> None:
        self.raw = obj
        self.metadata = metadata_of(obj)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind or 'object'} {self.namespace}/{self.name})"

    # -- type -----------------------------------------------------------------------------------------

    @property
    def api_version(self) -> str:
        return string(self.raw.get("apiVersion"))

    @property
    def kind(self) -> str:
        return string(self.raw.get("kind"))

    # -- identity -------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return string(self.metadata.get("name"))

    @property
    def namespace(self) -> str:
        """The namespace; ``""`` for cluster-scoped objects (and objects not yet created)."""
        return string(self.metadata.get("namespace"))

    @property
    def key(self) -> tuple[str, str]:
        """``(namespace, name)``, the key of a store."""
        return (self.namespace, self.name)

    @property
    def uid(self) -> str:
        return string(self.metadata.get("uid"))

    @property
    def resource_version(self) -> str:
        return string(self.metadata.get("resourceVersion"))

    @property
    def generation(self) -> int:
        return integer(self.metadata.get("generation"))

    # -- lifecycle ------------------------------------------------------------------------------------

    @property
    def creation_timestamp(self) -> dt.datetime | None:
        return parse_timestamp(self.metadata.get("creationTimestamp"))

    @property
    def deletion_timestamp(self) -> dt.datetime | None:
        """When deletion was requested, or ``None`` (also when the stored value does not parse; see
        :attr:`is_deleting` for the test that matters)."""
        return parse_timestamp(self.metadata.get("deletionTimestamp"))

    @property
    def is_deleting(self) -> bool:
        """Whether ``deletionTimestamp`` is set: the object is going away and waits only for its finalizers.

        Any value counts, parsable or not: the API server sets it, and only its presence means anything.
        """
        return bool(self.metadata.get("deletionTimestamp"))

    @property
    def finalizers(self) -> Sequence[str]:
        return sequence(self.metadata.get("finalizers"))

    def has_finalizer(self, finalizer: str) -> bool:
        return finalizer in self.finalizers

    # -- labels and annotations -----------------------------------------------------------------------

    @property
    def labels(self) -> Mapping[str, str]:
        return mapping(self.metadata.get("labels"))

    @property
    def annotations(self) -> Mapping[str, str]:
        return mapping(self.metadata.get("annotations"))

    def label(self, key: str) -> str:
        """The label's value, ``""`` when it is not set (or not a string)."""
        return string(self.labels.get(key))

    def annotation(self, key: str) -> str:
        """The annotation's value, ``""`` when it is not set (or not a string)."""
        return string(self.annotations.get(key))

    # -- owners ---------------------------------------------------------------------------------------

    @property
    def owner_references(self) -> Sequence[Mapping[str, Any]]:
        """The owner references as stored. Entries the API server accepted are mappings; the accessors below
        skip any that is not."""
        return sequence(self.metadata.get("ownerReferences"))

    @property
    def controller_owner(self) -> Mapping[str, Any] | None:
        """The owner reference with ``controller: true`` (at most one exists), or ``None``."""
        for ref in self.owner_references:
            if isinstance(ref, Mapping) and ref.get("controller") is True:
                return ref
        return None

    def is_owned_by(self, uid: str) -> bool:
        """Whether any owner reference (controller or not) has this UID."""
        return bool(uid) and any(isinstance(ref, Mapping) and ref.get("uid") == uid for ref in self.owner_references)

    # -- spec and status ------------------------------------------------------------------------------

    @property
    def spec(self) -> Mapping[str, Any]:
        return section(self.raw, "spec")

    @property
    def status(self) -> Mapping[str, Any]:
        return section(self.raw, "status")


class PodView(ObjectView):
    """A core/v1 Pod: the status fields the controllers judge a pod by."""

    __slots__ = ()

    @property
    def phase(self) -> str:
        return string(self.status.get("phase"))

    @property
    def reason(self) -> str:
        """``status.reason`` (``Evicted``, ``NodeLost``...), ``""`` when none."""
        return string(self.status.get("reason"))

    @property
    def message(self) -> str:
        return string(self.status.get("message"))

    @property
    def node_name(self) -> str:
        return string(self.spec.get("nodeName"))

    @property
    def deletion_grace_period_seconds(self) -> int:
        return integer(self.metadata.get("deletionGracePeriodSeconds"))

    @property
    def conditions(self) -> Sequence[Mapping[str, Any]]:
        return sequence(self.status.get("conditions"))

    @property
    def container_statuses(self) -> Sequence[Mapping[str, Any]]:
        return sequence(self.status.get("containerStatuses"))

    @property
    def init_container_statuses(self) -> Sequence[Mapping[str, Any]]:
        return sequence(self.status.get("initContainerStatuses"))

    def container_status(self, name: str) -> Mapping[str, Any] | None:
        """The status of the container called ``name``, or ``None`` (none reported yet)."""
        return named(self.container_statuses, name)

    def has_condition(self, type_: str) -> bool:
        """Whether the condition ``type_`` is present with status ``"True"``."""
        return any(
            isinstance(c, Mapping) and c.get("type") == type_ and c.get("status") == "True" for c in self.conditions
        )
