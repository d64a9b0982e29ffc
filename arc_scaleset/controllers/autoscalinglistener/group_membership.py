"""Which shared listener an AutoscalingListener belongs to, judged from what its scale set says (docs/listener.md,
"Shared listener").

The AutoscalingRunnerSet controller labels a member listener with its group (:data:`~arc_scaleset.api.listener_group.
LABEL_GROUP`); the label is an index, never trusted. :func:`trusted_group` recomputes the group from the listener's
spec with the fields that decide credentials taken from the live scale set (as
:func:`.ownership.with_scale_set_credentials` does for the config) and its opt-in from the scale set's
annotations, so a listener cannot name another namespace's or another credential's group. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arc_scaleset.api.listener_group import LABEL_GROUP, group_of, shard_of
from arc_scaleset.kube.views import ObjectView

# The spec fields (JSON names) taken from the scale set, never from the listener (.ownership).
_TRUSTED_FIELDS = ("githubConfigSecret", "vaultConfig", "proxy")


def trusted_group(listener: Mapping[str, Any], scale_set: Mapping[str, Any]) -> str | None:
    """The group ``listener`` belongs to, given the live AutoscalingRunnerSet ``scale_set`` that made it (the
    caller has checked that: :func:`.ownership.listener_refusal`); ``None``: it keeps a listener of its own."""
    owner = ObjectView(scale_set)
    spec: dict[str, Any] = dict(ObjectView(listener).spec)
    for field in _TRUSTED_FIELDS:
        spec[field] = owner.spec.get(field)
    spec["autoscalingRunnerSetNamespace"] = owner.namespace
    # The shard is the listener's to say: it can name only a shard of the key its scale set makes.
    return group_of(owner.annotations, spec, shard_of(ObjectView(listener).annotations))


def labelled_group(listener: Mapping[str, Any]) -> str | None:
    """The group the listener's label names (``None``: none); to be checked against :func:`trusted_group`."""
    return ObjectView(listener).labels.get(LABEL_GROUP) or None
