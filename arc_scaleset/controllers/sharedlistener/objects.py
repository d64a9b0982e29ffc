"""A shared listener's objects, as they should be (docs/listener.md, "Shared listener"). Pure builders.

Every object is named :func:`~arc_scaleset.api.listener_group.group_object_name` and labelled with the group
(:func:`group_labels`); it belongs to the group only while it carries that label (anything else under its name is
in the way and left alone). In the controller namespace: the pod, its ServiceAccount, the config Secret (whose
keys the members publish; created empty here) and a Role and RoleBinding (named ``<group>-config``) that let the
ServiceAccount get, list and watch that one Secret. In the scale set namespace: the Role and RoleBinding a
per-set listener has there, naming every member's EphemeralRunnerSet.

What shapes these objects (image, pull secrets, ``listenerTemplate``, the ServiceAccount's, Role's, RoleBinding's
and config Secret's metadata) is equal across the members by construction of the group key, so they are built
from any one member: :func:`representative`. The pod is the per-set listener pod's builder with another
:class:`~arc_scaleset.controllers.autoscalinglistener.pod.PodIdentity`: the same image, command, probes,
hardening and template merge, so it meets the same policies; its spec never depends on the membership.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from arc_scaleset.api.common import ResourceMeta
from arc_scaleset.api.keys import (
    COMPONENT_LISTENER,
    LABEL_COMPONENT,
    LABEL_PART_OF,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
    PART_OF_SCALE_SET,
)
from arc_scaleset.api.labels import filter_and_merge_labels
from arc_scaleset.api.listener_group import GROUP_NAMESPACE_ENV, GROUP_SECRET_ENV, LABEL_GROUP, group_object_name
from arc_scaleset.controllers.autoscalinglistener.children import RBAC_API_VERSION, role_rules
from arc_scaleset.controllers.autoscalinglistener.pod import PodIdentity, configured_listener_pod
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.controllers.sharedlistener.members import Member

CONFIG_READER_SUFFIX: Final = "-config"


def representative(members: Sequence[Member]) -> Member:
    """The member the group's objects are built from: the first by name (any would build the same objects)."""
    return members[0]


def group_labels(group: str, scale_set_namespace: str) -> dict[str, str]:
    """The labels of every group object.

    ``actions.github.com/scale-set-name`` is present and empty: the controller caches pods, ServiceAccounts and
    Roles by that label's presence (cmd/controller_setup.py), and a group serves many scale sets, none by name.
    """
    return {
        LABEL_GROUP: group,
        LABEL_SCALE_SET_NAMESPACE: scale_set_namespace,
        LABEL_SCALE_SET_NAME: "",
        LABEL_PART_OF: PART_OF_SCALE_SET,
        LABEL_COMPONENT: COMPONENT_LISTENER,
    }


def config_reader_name(group: str) -> str:
    """The Role and RoleBinding (controller namespace) that let the group's pod read its config Secret."""
    return group_object_name(group) + CONFIG_READER_SUFFIX


def _metadata(
    name: str, namespace: str, labels: Mapping[str, str], user: ResourceMeta | None, excluded: tuple[str, ...]
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": filter_and_merge_labels(user.labels if user else None, labels, excluded) or {},
    }
    if user is not None and user.annotations:
        meta["annotations"] = dict(user.annotations)
    return meta


class GroupObjects:
    """The objects of group ``group`` with ``members`` (at least one) in ``controller_namespace``."""

    def __init__(
        self, group: str, members: Sequence[Member], *, controller_namespace: str, excluded: tuple[str, ...]
    ) -> None:
        self.group = group
        self.members = members
        self.spec = representative(members).listener.spec
        self.name = group_object_name(group)
        self.controller_namespace = controller_namespace
        self.scale_set_namespace = self.spec.autoscaling_runner_set_namespace
        self.labels = group_labels(group, self.scale_set_namespace)
        self.excluded = excluded

    def service_account(self) -> dict[str, Any]:
        meta = self._meta(self.name, self.controller_namespace, self.spec.service_account_metadata)
        return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}

    def config_secret(self) -> dict[str, Any]:
        """The config Secret as created: no data (each member publishes its own key)."""
        meta = self._meta(self.name, self.controller_namespace, self.spec.config_secret_metadata)
        return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque"}

    def runner_set_role(self) -> dict[str, Any]:
        """The Role in the scale set namespace: what a per-set listener's grants, on every member's set."""
        meta = self._meta(self.name, self.scale_set_namespace, self.spec.role_metadata)
        rules = role_rules(*sorted({member.runner_set for member in self.members}))
        return {"apiVersion": RBAC_API_VERSION, "kind": "Role", "metadata": meta, "rules": rules}

    def runner_set_role_binding(self) -> dict[str, Any]:
        meta = self._meta(self.name, self.scale_set_namespace, self.spec.role_binding_metadata)
        return self._binding(meta, role=self.name)

    def config_reader_role(self) -> dict[str, Any]:
        """The Role in the controller namespace: get, list and watch the group's config Secret, and nothing else
        (a list or watch is allowed by ``resourceNames`` only with a ``metadata.name`` field selector)."""
        meta = self._meta(config_reader_name(self.group), self.controller_namespace, self.spec.role_metadata)
        rules = [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [self.name],
                  "verbs": ["get", "list", "watch"]}]  # fmt: skip
        return {"apiVersion": RBAC_API_VERSION, "kind": "Role", "metadata": meta, "rules": rules}

    def config_reader_role_binding(self) -> dict[str, Any]:
        name = config_reader_name(self.group)
        meta = self._meta(name, self.controller_namespace, self.spec.role_binding_metadata)
        return self._binding(meta, role=name)

    def pod(self, settings: ControllerSettings) -> dict[str, Any]:
        """The group's listener pod: the per-set pod's builder with the group's identity (no owner: the pod
        outlives any one member; the group's reconciler deletes it with the last one)."""
        member = representative(self.members)
        identity = PodIdentity(
            name=self.name,
            namespace=self.controller_namespace,
            service_account=self.name,
            labels=self.labels,
            annotations={},
            owner_references=(),
            env=(
                {"name": GROUP_SECRET_ENV, "value": self.name},
                {"name": GROUP_NAMESPACE_ENV, "value": self.controller_namespace},
            ),
        )
        return configured_listener_pod(member.obj, member.listener, settings, config_version="", identity=identity)

    def _meta(self, name: str, namespace: str, user: ResourceMeta | None) -> dict[str, Any]:
        return _metadata(name, namespace, self.labels, user, self.excluded)

    def _binding(self, meta: dict[str, Any], *, role: str) -> dict[str, Any]:
        return {
            "apiVersion": RBAC_API_VERSION,
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": self.name, "namespace": self.controller_namespace}],
        }
