"""The shared listener's names and its grouping rule: the contract between the controller, which groups scale
sets, and the listener process, which serves a group (docs/listener.md, "Shared listener").

An AutoscalingRunnerSet annotated :data:`ANNOTATION_SHARED` ``"true"`` joins a **group**: every such set of one
namespace that reads the same GitHub credentials and would run the same listener pod is served by one listener
process. The :class:`GroupKey` holds exactly that: the scale set namespace, the credential source and the pod's
shape (everything that goes into the listener pod and its RBAC objects that is not per set). Two sets share a
listener only when their keys are equal, so a group never spans namespaces or credentials by construction. A set
with a proxy keeps its own listener (:func:`group_key` returns ``None``): the proxy reaches the listener as
process-wide environment variables from a Secret of the set's own.

The group's objects are named :func:`group_object_name` (pod, ServiceAccount and config Secret in the
controller namespace; Role and RoleBinding in the scale set namespace) and carry :data:`LABEL_GROUP`, as does
every member AutoscalingListener. The config Secret holds one key per member, the member AutoscalingListener's
name, whose value is that member's ``config.json`` (:mod:`arc_scaleset.api.listener_config`); the group pod
names it with :data:`GROUP_SECRET_ENV` and :data:`GROUP_NAMESPACE_ENV` instead of a config file.

A Secret holds at most 1 MiB, so a key's sets are spread over **shards**, each a group of its own with an ID of
the same form (:func:`group_id` of the key and the shard number); which shard a set joins is
:mod:`arc_scaleset.api.group_shards`'s choice, recorded on its listener as :data:`ANNOTATION_GROUP_SHARD`.

Standard library and orjson only: the listener process imports this module (issue 20).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

__all__ = [
    "ANNOTATION_GROUP_SHARD",
    "ANNOTATION_SHARED",
    "CREDENTIAL_FIELDS",
    "GROUP_NAMESPACE_ENV",
    "GROUP_NAME_PREFIX",
    "GROUP_SECRET_ENV",
    "LABEL_GROUP",
    "MAX_SHARDS",
    "SHAPE_FIELDS",
    "SHARED_VALUE",
    "GroupKey",
    "group_id",
    "group_key",
    "group_object_name",
    "group_of",
    "is_shared",
    "member_key",
    "shard_of",
    "shared_key",
]

ANNOTATION_SHARED: Final = "listener.arc-scaleset.dev/shared"
"""On an AutoscalingRunnerSet: ``"true"`` opts the set into a shared listener (any other value, or none, keeps
ARC's one listener per set)."""
SHARED_VALUE: Final = "true"
LABEL_GROUP: Final = "listener.arc-scaleset.dev/group"
"""On every group object and every member AutoscalingListener: the group ID (:func:`group_id`)."""
GROUP_SECRET_ENV: Final = "LISTENER_GROUP_SECRET"
"""The group pod's environment variable naming the group's config Secret; its presence selects group mode."""
GROUP_NAMESPACE_ENV: Final = "LISTENER_GROUP_NAMESPACE"
"""The group pod's environment variable naming the config Secret's namespace (the controller namespace)."""
GROUP_NAME_PREFIX: Final = "arc-shared-listener-"
ANNOTATION_GROUP_SHARD: Final = "listener.arc-scaleset.dev/group-shard"
"""On a member AutoscalingListener: which shard of its key's groups it is in (a decimal; absent: 0). Written by
the AutoscalingRunnerSet controller (:mod:`arc_scaleset.api.group_shards`); a listener can name only a shard of
its own key, so it never names another namespace's or credential's group."""
MAX_SHARDS: Final = 1000
"""Shards a key may have: 1,000 groups of a few hundred sets each."""

CREDENTIAL_FIELDS: Final = ("githubConfigSecret", "vaultConfig")
"""The AutoscalingListener spec fields (JSON names) that say where a set's GitHub credentials come from."""
SHAPE_FIELDS: Final = (
    "image",
    "imagePullSecrets",
    "template",
    "configSecretMetadata",
    "serviceAccountMetadata",
    "roleMetadata",
    "roleBindingMetadata",
)
"""The AutoscalingListener spec fields (JSON names) that shape the group's pod, ServiceAccount, Role, RoleBinding
and config Secret. Every other spec field goes into the member's own ``config.json`` (or names its own
EphemeralRunnerSet), so members may differ in it."""
_UNSHAREABLE_FIELDS: Final = ("proxy",)
_ID_LENGTH: Final = 10


def is_shared(annotations: Mapping[str, str] | None) -> bool:
    """Whether an AutoscalingRunnerSet's annotations opt it into a shared listener."""
    return (annotations or {}).get(ANNOTATION_SHARED) == SHARED_VALUE


@dataclass(frozen=True, slots=True)
class GroupKey:
    """What makes two scale sets share a listener: equal keys, and only equal keys.

    ``credentials`` and ``pod_shape`` are canonical JSON (sorted keys) of the spec fields
    :data:`CREDENTIAL_FIELDS` and :data:`SHAPE_FIELDS`; a field that is unset and one that is ``null`` are alike.
    """

    namespace: str
    credentials: str
    pod_shape: str


def _canonical(spec: Mapping[str, Any], fields: tuple[str, ...]) -> str:
    values = {name: spec[name] for name in fields if spec.get(name) is not None}
    return orjson.dumps(values, option=orjson.OPT_SORT_KEYS).decode()


def group_key(listener_spec: Mapping[str, Any]) -> GroupKey | None:
    """The group key of an AutoscalingListener spec (its JSON, camelCase), or ``None`` when the set cannot share.

    The namespace is ``autoscalingRunnerSetNamespace``, the set's own (never another object's), so a set cannot
    name another namespace's group. ``None``: the spec has a proxy, or no namespace or credential source.
    """
    namespace = listener_spec.get("autoscalingRunnerSetNamespace") or ""
    if not namespace or not listener_spec.get("githubConfigSecret"):
        return None
    if any(listener_spec.get(name) is not None for name in _UNSHAREABLE_FIELDS):
        return None
    return GroupKey(
        namespace=str(namespace),
        credentials=_canonical(listener_spec, CREDENTIAL_FIELDS),
        pod_shape=_canonical(listener_spec, SHAPE_FIELDS),
    )


def group_id(key: GroupKey, shard: int = 0) -> str:
    """A short stable hash of ``key`` and ``shard``: 10 lowercase hex characters (a label value and a name
    suffix). Shard 0 is the key's first group, whose ID is the key's alone (as before groups had shards); the
    further shards of a key are groups of their own (:mod:`arc_scaleset.api.group_shards`)."""
    parts: list[object] = [key.namespace, key.credentials, key.pod_shape]
    if shard:
        parts.append(shard)
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()[:_ID_LENGTH]


def shard_of(annotations: Mapping[str, str] | None) -> int:
    """The shard an AutoscalingListener's :data:`ANNOTATION_GROUP_SHARD` names: a decimal below
    :data:`MAX_SHARDS`; 0 when absent or anything else."""
    text = (annotations or {}).get(ANNOTATION_GROUP_SHARD, "")
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(MAX_SHARDS))):
        return 0
    shard = int(text)
    return shard if shard < MAX_SHARDS else 0


def group_object_name(group: str) -> str:
    """The name of group ``group``'s pod, ServiceAccount and config Secret (controller namespace), and of its
    Role and RoleBinding (scale set namespace)."""
    return f"{GROUP_NAME_PREFIX}{group}"


def member_key(autoscaling_listener_name: str) -> str:
    """The config Secret's data key of a member: its AutoscalingListener's name (a valid Secret key)."""
    return autoscaling_listener_name


def group_of(annotations: Mapping[str, str] | None, listener_spec: Mapping[str, Any], shard: int = 0) -> str | None:
    """The group ID of a scale set with these AutoscalingRunnerSet ``annotations`` whose AutoscalingListener has
    ``listener_spec`` (JSON) and is in ``shard`` of its key; ``None`` when the set keeps a listener of its own
    (not opted in, or it cannot share: :func:`group_key`)."""
    key = shared_key(annotations, listener_spec)
    return None if key is None else group_id(key, shard)


def shared_key(annotations: Mapping[str, str] | None, listener_spec: Mapping[str, Any]) -> GroupKey | None:
    """The group key of a set with these AutoscalingRunnerSet ``annotations`` and ``listener_spec``; ``None``:
    it keeps a listener of its own."""
    return group_key(listener_spec) if is_shared(annotations) else None
