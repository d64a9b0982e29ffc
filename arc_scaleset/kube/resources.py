"""Kubernetes resource descriptors: which group, version and plural an API path is built from.

A :class:`Resource` is plain data; the client turns it into URL paths. Descriptors for the core kinds the
project touches are defined here; API types for custom resources define their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


def _segment(value: str, what: str) -> str:
    """One URL path segment, refusing values that would escape it (``/``, empty, dot segments)."""
    if not value or "/" in value or value in (".", ".."):
        raise ValueError(f"invalid {what} for an API path: {value!r}")
    return quote(value, safe="")


@dataclass(frozen=True)
class Resource:
    """A REST resource: ``group`` is ``""`` for the core API; ``plural`` is the URL path segment."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` of objects of this resource: ``"v1"`` or ``"apps/v1"``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def base_path(self) -> str:
        """``/api/v1`` for the core group, else ``/apis/<group>/<version>``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(self, *, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The URL path of the collection, an object, or an object's subresource.

        ``namespace`` is ignored for cluster-scoped resources; ``None`` on a namespaced resource means
        "all namespaces" (valid for list and watch only). ``subresource`` requires ``name``.
        """
        parts = [self.base_path]
        if self.namespaced and namespace is not None:
            parts.append(f"namespaces/{_segment(namespace, 'namespace')}")
        parts.append(self.plural)
        if name is not None:
            parts.append(_segment(name, "name"))
        if subresource is not None:
            if name is None:
                raise ValueError(f"subresource {subresource!r} of {self.plural} needs an object name")
            parts.append(_segment(subresource, "subresource"))
        return "/".join(parts)

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS = Resource("", "v1", "pods", "Pod")
SECRETS = Resource("", "v1", "secrets", "Secret")
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
SERVICES = Resource("", "v1", "services", "Service")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")
CORE_EVENTS = Resource("", "v1", "events", "Event")
EVENTS = Resource("events.k8s.io", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)
