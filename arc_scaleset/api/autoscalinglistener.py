"""AutoscalingListener: the listener pod of one scale set and the objects it needs (controller namespace)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict, Field

from arc_scaleset.api.autoscalingrunnerset import MAX_RUNNERS_UNBOUNDED, MIN_NOT_ABOVE_MAX
from arc_scaleset.api.common import (
    CONDITIONS_LIST_MARKERS,
    ApiModel,
    Condition,
    KubeObject,
    LocalObjectReference,
    MetricsConfig,
    PodTemplateSpec,
    ProxyConfig,
    ResourceMeta,
    TLSConfig,
    VaultConfig,
)
from arc_scaleset.api.constants import AUTOSCALING_LISTENERS as AUTOSCALING_LISTENERS
from arc_scaleset.api.schedule import WarmWindow
from arc_scaleset.kube.resources import Resource


class AutoscalingListenerSpec(ApiModel):
    """Everything the listener pod's config is built from; written by the AutoscalingRunnerSet controller."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [MIN_NOT_ABOVE_MAX]})

    github_config_url: str = ""
    """URL of the GitHub enterprise, organization or repository."""
    github_config_secret: str = ""
    """Name of the Secret with the GitHub credentials (in the scale set namespace), or the vault lookup key."""
    runner_scale_set_id: int = 0
    """ID of the scale set on GitHub."""
    autoscaling_runner_set_namespace: str = ""
    autoscaling_runner_set_name: str = ""
    ephemeral_runner_set_name: str = ""
    max_runners: int = Field(default=0, ge=0, le=MAX_RUNNERS_UNBOUNDED)
    """Effective maximum number of runners."""
    min_runners: int = Field(default=0, ge=0, le=MAX_RUNNERS_UNBOUNDED)
    """Effective minimum number of runners."""
    min_runners_schedule: list[WarmWindow] | None = None
    """The scale set's minRunnersSchedule (not ARC's): windows in which the minimum is raised."""
    image: str = ""
    """Image of the listener container."""
    image_pull_secrets: list[LocalObjectReference] | None = None
    proxy: ProxyConfig | None = None
    github_server_tls: TLSConfig | None = None
    vault_config: VaultConfig | None = None
    metrics: MetricsConfig | None = None
    """Which metrics the listener exports."""
    template: PodTemplateSpec | None = None
    """Merged into the listener pod."""
    config_secret_metadata: ResourceMeta | None = None
    service_account_metadata: ResourceMeta | None = None
    role_metadata: ResourceMeta | None = None
    role_binding_metadata: ResourceMeta | None = None


class AutoscalingListenerStatus(ApiModel):
    """The listener pod's health as the controller sees it (ARC's status is empty)."""

    conditions: list[Condition] | None = Field(default=None, json_schema_extra=CONDITIONS_LIST_MARKERS)
    """Ready (the listener pod runs) and Degraded (it keeps failing; the restart backoff is in the message)."""


class AutoscalingListener(KubeObject):
    """The listener of one scale set."""

    KIND: ClassVar[str] = "AutoscalingListener"
    RESOURCE: ClassVar[Resource] = AUTOSCALING_LISTENERS

    spec: AutoscalingListenerSpec = Field(default_factory=AutoscalingListenerSpec)
    status: AutoscalingListenerStatus = Field(default_factory=AutoscalingListenerStatus)
