"""The listener's supporting objects: ServiceAccount, Role, RoleBinding, proxy Secret.

Pure builders. The ServiceAccount and proxy Secret live in the listener's (controller) namespace and are
owned by the AutoscalingListener; the Role and RoleBinding live in the scale set namespace, where owner
references cannot reach, so they carry ``auto-scaling-listener-name``/``-namespace`` labels instead (used
to map their events back to the listener, and to find them for cleanup).

The Role grants only what the listener does: patch its own EphemeralRunnerSet (by name), watch that one set
(by name: a list or watch is authorized by ``resourceNames`` only with the ``metadata.name`` field selector), and
patch EphemeralRunners and their status (job facts) in that namespace.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.common import GROUP, ResourceMeta
from arc_scaleset.api.keys import (
    LABEL_LISTENER_NAME,
    LABEL_LISTENER_NAMESPACE,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
)
from arc_scaleset.api.labels import filter_and_merge_labels
from arc_scaleset.api.naming import (
    listener_proxy_secret_name,
    listener_role_binding_name,
    listener_role_name,
    listener_service_account_name,
)
from arc_scaleset.kube.ownerrefs import controller_ref

RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"


def role_rules(*ephemeral_runner_sets: str) -> list[dict[str, Any]]:
    """The listener Role's rules (docs/listener.md): one set's for a listener of its own; a shared listener's
    names each member's set (controllers/sharedlistener)."""
    return [
        {
            "apiGroups": [GROUP],
            "resources": ["ephemeralrunnersets"],
            "resourceNames": list(ephemeral_runner_sets),
            "verbs": ["patch"],
        },
        {
            "apiGroups": [GROUP],
            "resources": ["ephemeralrunners", "ephemeralrunners/status"],
            "verbs": ["patch"],
        },
        *set_watch_rules(ephemeral_runner_sets),
    ]


def set_watch_rules(ephemeral_runner_sets: tuple[str, ...]) -> list[dict[str, Any]]:
    """Read and watch the listener's own sets, by name (docs/listener.md, "Only what changed"): its watch lists
    and watches with the field selector ``metadata.name=<set>``, which a ``resourceNames`` rule authorizes."""
    return [
        {
            "apiGroups": [GROUP],
            "resources": ["ephemeralrunnersets"],
            "resourceNames": list(ephemeral_runner_sets),
            "verbs": ["get", "list", "watch"],
        }
    ]


def child_metadata(
    name: str,
    namespace: str,
    *,
    base_labels: Mapping[str, str],
    user: ResourceMeta | None,
    excluded: tuple[str, ...],
    owner: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A child's ``metadata``: ``user``'s labels under ``base_labels`` (``excluded`` prefixes dropped), ``user``'s
    annotations, and a controller reference to ``owner`` when given (only within the listener's namespace)."""
    labels = filter_and_merge_labels(user.labels if user else None, base_labels, excluded) or {}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if user is not None and user.annotations:
        meta["annotations"] = dict(user.annotations)
    if owner is not None:
        meta["ownerReferences"] = [controller_ref(owner)]
    return meta


def _scale_set_labels(listener: AutoscalingListener) -> dict[str, str]:
    return {
        LABEL_SCALE_SET_NAMESPACE: listener.spec.autoscaling_runner_set_namespace,
        LABEL_SCALE_SET_NAME: listener.spec.autoscaling_runner_set_name,
    }


def rbac_labels(listener: AutoscalingListener, excluded: tuple[str, ...]) -> dict[str, str]:
    """The labels of a listener's Role and RoleBinding: they name the listener (:func:`.ownership.foreign_reason`)."""
    own = {
        **_scale_set_labels(listener),
        LABEL_LISTENER_NAMESPACE: listener.namespace,
        LABEL_LISTENER_NAME: listener.name,
    }
    return filter_and_merge_labels(listener.metadata.labels or {}, own, excluded) or {}


def desired_service_account(
    listener_object: Mapping[str, Any], listener: AutoscalingListener, *, excluded: tuple[str, ...] = ()
) -> dict[str, Any]:
    base = filter_and_merge_labels(listener.metadata.labels or {}, _scale_set_labels(listener), excluded) or {}
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": child_metadata(
            listener_service_account_name(listener.name),
            listener.namespace,
            base_labels=base,
            user=listener.spec.service_account_metadata,
            excluded=excluded,
            owner=listener_object,
        ),
    }


def desired_role(listener: AutoscalingListener, *, excluded: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "Role",
        "metadata": child_metadata(
            listener_role_name(listener.name),
            listener.spec.autoscaling_runner_set_namespace,
            base_labels=rbac_labels(listener, excluded),
            user=listener.spec.role_metadata,
            excluded=excluded,
        ),
        "rules": role_rules(listener.spec.ephemeral_runner_set_name),
    }


def desired_role_binding(listener: AutoscalingListener, *, excluded: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "RoleBinding",
        "metadata": child_metadata(
            listener_role_binding_name(listener.name),
            listener.spec.autoscaling_runner_set_namespace,
            base_labels=rbac_labels(listener, excluded),
            user=listener.spec.role_binding_metadata,
            excluded=excluded,
        ),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": listener_role_name(listener.name)},
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": listener_service_account_name(listener.name),
                "namespace": listener.namespace,
            }
        ],
    }


def desired_proxy_secret(
    listener_object: Mapping[str, Any],
    listener: AutoscalingListener,
    data: Mapping[str, str],
    *,
    excluded: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The ``<listener>-proxy`` Secret with the flattened proxy settings (plain values in ``data``)."""
    base = filter_and_merge_labels(listener.metadata.labels or {}, _scale_set_labels(listener), excluded) or {}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": child_metadata(
            listener_proxy_secret_name(listener.name),
            listener.namespace,
            base_labels=base,
            user=None,
            excluded=excluded,
            owner=listener_object,
        ),
        "data": {key: base64.b64encode(value.encode("utf-8")).decode("ascii") for key, value in data.items()},
    }
