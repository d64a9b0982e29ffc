"""Shared pieces of the four ``actions.github.com/v1alpha1`` kinds: the model base classes, object
metadata, and the value types every kind embeds (ResourceMeta, ProxyConfig, TLSConfig, VaultConfig,
MetricsConfig).

How Go's field types map to Python, so that "missing" means what it means in ARC:

- a non-pointer Go field (``string``, ``int``, ``bool``, a slice, a map) becomes a non-optional Python field
  whose default is Go's zero value (``""``, ``0``, ``False``, ``None`` for slices and maps, which Go also
  treats as empty); a missing field therefore reads as the zero value;
- a pointer Go field (``*int``, ``*ProxyConfig``, ``*PodTemplateSpec``) becomes ``X | None = None``: missing
  is distinguishable from a present zero value;
- a field the CRD schema requires is required here too (the CRD is generated from these models, so what the
  API server accepts these models read, and the other way round).

Serialising with :meth:`ApiModel.to_json` writes only the fields that were set (read from input or passed to
the constructor), so a read-modify-write round trip neither loses nor invents a field. Pod templates are
plain dicts (:data:`PodTemplateSpec`), passed through untouched.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Self

from pydantic import Field, PlainSerializer, WithJsonSchema, model_validator

# Re-exported: these live in light modules of their own, so that the listener (the constants) and the lazy
# exports of arc_scaleset.api can load them without the models below (arc_scaleset.api.constants says why).
from arc_scaleset.api.api_model import ApiModel as ApiModel
from arc_scaleset.api.api_model import json_name as json_name
from arc_scaleset.api.constants import API_VERSION as API_VERSION
from arc_scaleset.api.constants import AZURE_KEY_VAULT as AZURE_KEY_VAULT
from arc_scaleset.api.constants import GROUP as GROUP
from arc_scaleset.api.constants import VERSION as VERSION
from arc_scaleset.api.metrics_config import CounterMetric as CounterMetric
from arc_scaleset.api.metrics_config import GaugeMetric as GaugeMetric
from arc_scaleset.api.metrics_config import HistogramMetric as HistogramMetric
from arc_scaleset.api.metrics_config import MetricsConfig as MetricsConfig
from arc_scaleset.kube.resources import Resource

# A JSON-schema key the CRD generator (arc_scaleset.api.crd.generate) replaces with the named definition from the
# Kubernetes OpenAPI schema. Models carry only this marker; the expansion lives with the generator.
K8S_SCHEMA_MARKER = "x-arc-scaleset-k8s-schema"


def k8s_schema(definition: str) -> WithJsonSchema:
    """Mark a plain-dict field as holding the Kubernetes type ``definition`` (e.g. ``io.k8s.api.core.v1.PodSpec``)."""
    return WithJsonSchema({"type": "object", K8S_SCHEMA_MARKER: definition})


PodTemplateSpec = Annotated[dict[str, Any], k8s_schema("io.k8s.api.core.v1.PodTemplateSpec")]
"""A core/v1 PodTemplateSpec (``metadata`` + ``spec``) as a plain dict: user data, never reinterpreted."""

PodSpec = Annotated[dict[str, Any], k8s_schema("io.k8s.api.core.v1.PodSpec")]
"""A core/v1 PodSpec as a plain dict."""

Condition = Annotated[dict[str, Any], k8s_schema("io.k8s.apimachinery.pkg.apis.meta.v1.Condition")]
"""A metav1.Condition (type, status, reason, message, observedGeneration, lastTransitionTime)."""

CONDITIONS_LIST_MARKERS: dict[str, Any] = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
"""Conditions are a map keyed by ``type``: server-side apply merges them per type, as in every core kind."""

PodTemplateMetadata = Annotated[dict[str, Any], k8s_schema("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")]
"""The ``metadata`` of a pod template (labels, annotations, ...) as a plain dict."""


def format_timestamp(value: datetime) -> str:
    """RFC 3339 in UTC with second precision, as Kubernetes writes ``metav1.Time`` (naive values are UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


Timestamp = Annotated[datetime, PlainSerializer(format_timestamp, return_type=str, when_used="json")]
"""A ``metav1.Time``: parsed to an aware datetime, written back as ``2024-05-01T10:00:00Z``."""


class OwnerReference(ApiModel):
    """A ``metav1.OwnerReference``."""

    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(ApiModel):
    """A ``metav1.ObjectMeta``: every field the API server writes, so a read-modify-write keeps them."""

    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    self_link: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: Timestamp | None = None
    deletion_timestamp: Timestamp | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None
    managed_fields: list[dict[str, Any]] | None = None


class KubeObject(ApiModel):
    """A top-level object of one of our kinds. Subclasses set :attr:`KIND` and :attr:`RESOURCE`."""

    KIND: ClassVar[str]
    RESOURCE: ClassVar[Resource]

    api_version: str = API_VERSION
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @model_validator(mode="after")
    def _fill_and_check_kind(self) -> Self:
        # List items arrive without apiVersion/kind; the class already knows both. Marking them as set makes
        # to_json() always write them.
        if not self.kind:
            self.kind = self.KIND
        elif self.kind != self.KIND:
            raise ValueError(f"expected kind {self.KIND!r}, got {self.kind!r}")
        self.__pydantic_fields_set__.update({"api_version", "kind"})
        return self

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    def to_json(self) -> dict[str, Any]:
        """As :meth:`ApiModel.to_json`, always with ``apiVersion`` and ``kind`` first."""
        body = super().to_json()
        return {"apiVersion": body.pop("apiVersion"), "kind": body.pop("kind"), **body}


class ResourceMeta(ApiModel):
    """Extra labels and annotations for an object the controller generates."""

    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class ProxyServerConfig(ApiModel):
    """One proxy: its URL and, optionally, the name of a Secret with username and password keys."""

    url: str = ""
    credential_secret_ref: str = ""


class ProxyConfig(ApiModel):
    """Proxies for the controller's GitHub calls, the listener and the runners."""

    http: ProxyServerConfig | None = None
    https: ProxyServerConfig | None = None
    no_proxy: list[str] | None = None


class ConfigMapKeySelector(ApiModel):
    """One key of a ConfigMap in the object's own namespace (a core/v1 ConfigMapKeySelector)."""

    name: str = ""
    key: str
    optional: bool | None = None


class TLSCertificateSource(ApiModel):
    """Where a PEM bundle of CA certificates comes from."""

    config_map_key_ref: ConfigMapKeySelector | None = None


class TLSConfig(ApiModel):
    """Extra CA certificates to trust when talking to GitHub (Enterprise Server with a private CA)."""

    certificate_from: TLSCertificateSource | None = None


class AzureKeyVaultConfig(ApiModel):
    """How to reach an Azure Key Vault that stores the GitHub credentials."""

    url: str
    tenant_id: str
    client_id: str
    certificate_path: str


class VaultConfig(ApiModel):
    """A secret store to read the GitHub credentials from instead of a Kubernetes Secret.

    When type is set (only azure_key_vault is supported), githubConfigSecret names the vault secret.
    """

    type: str = ""
    azure_key_vault: AzureKeyVaultConfig | None = None
    proxy: ProxyConfig | None = None


class LocalObjectReference(ApiModel):
    """A core/v1 LocalObjectReference (an image pull secret, by name)."""

    name: str = ""
