"""EphemeralRunner: one just-in-time runner registration and the pod that runs it."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from pydantic import Field

from arc_scaleset.api.common import (
    ApiModel,
    KubeObject,
    PodSpec,
    PodTemplateMetadata,
    ProxyConfig,
    ResourceMeta,
    Timestamp,
    TLSConfig,
    VaultConfig,
)
from arc_scaleset.api.constants import EPHEMERAL_RUNNERS as EPHEMERAL_RUNNERS
from arc_scaleset.api.keys import CONTAINER_HOOKS_ENV, RUNNER_CONTAINER_NAME, EphemeralRunnerPhase
from arc_scaleset.kube.resources import Resource

DONE_PHASES = frozenset({EphemeralRunnerPhase.SUCCEEDED, EphemeralRunnerPhase.FAILED, EphemeralRunnerPhase.OUTDATED})


class EphemeralRunnerSpec(ApiModel):
    """How to register one runner and what pod runs it: GitHub settings plus an inlined PodTemplateSpec."""

    github_config_url: str
    """URL of the GitHub enterprise, organization or repository."""
    github_config_secret: str
    """Name of the Secret with the GitHub credentials, or the vault lookup key."""
    github_server_tls: TLSConfig | None = None
    """Extra CA certificates for talking to GitHub."""
    runner_scale_set_id: int
    """ID of the scale set on GitHub the runner registers with."""
    proxy: ProxyConfig | None = None
    """Proxies for the runner."""
    proxy_secret_ref: str = ""
    """Name of the Secret holding the flattened proxy settings (http_proxy, https_proxy, no_proxy)."""
    vault_config: VaultConfig | None = None
    """Read the GitHub credentials from a vault."""
    ephemeral_runner_config_secret_metadata: ResourceMeta | None = None
    """Extra labels and annotations for the runner's JIT config Secret."""
    metadata: PodTemplateMetadata = Field(default_factory=dict)
    """Metadata of the runner pod (the inlined PodTemplateSpec's metadata)."""
    spec: PodSpec = Field(default_factory=dict)
    """The runner pod's spec (the inlined PodTemplateSpec's spec)."""

    @property
    def has_container_hook_configured(self) -> bool:
        """Whether the container named ``runner`` sets ``ACTIONS_RUNNER_CONTAINER_HOOKS`` (kubernetes mode)."""
        container = self.runner_container()
        if container is None:
            return False
        return any(
            isinstance(env, dict) and env.get("name") == CONTAINER_HOOKS_ENV for env in container.get("env") or ()
        )

    def runner_container(self) -> dict[str, Any] | None:
        """The container named ``runner`` of the pod spec (the live dict, not a copy), or ``None``."""
        for container in self.spec.get("containers") or ():
            if isinstance(container, dict) and container.get("name") == RUNNER_CONTAINER_NAME:
                return container
        return None


class EphemeralRunnerStatus(ApiModel):
    """The runner's registration, its pod's progress and the job it runs."""

    phase: str = ""
    """Pending, Running, Succeeded, Failed or Outdated (empty means Pending)."""
    reason: str = ""
    message: str = ""
    runner_id: int = 0
    """ID of the runner registration on GitHub."""
    runner_name: str = ""
    failures: dict[str, Timestamp] | None = None
    """When each failed pod (by UID) was seen failing."""
    ready: bool = False
    """Whether the runner pod is ready."""
    job_request_id: int = 0
    job_repository_name: str = ""
    """owner/repo of the job's repository."""
    job_id: str = ""
    job_workflow_ref: str = ""
    workflow_run_id: int = 0
    job_display_name: str = ""
    job_timeline: dict[str, Timestamp] | None = None
    """Not in ARC: when the job was queued, acquired, assigned and started, written by the listener."""

    @property
    def is_done(self) -> bool:
        """Succeeded, Failed or Outdated: the runner will do nothing more."""
        return self.phase in DONE_PHASES

    @property
    def has_job(self) -> bool:
        """Whether a job was assigned to the runner (``jobId``, or ``jobRequestId`` as ARC <= 0.12 wrote it)."""
        return self.job_id != "" or self.job_request_id > 0

    @property
    def last_failure(self) -> datetime | None:
        """The latest recorded pod failure, if any."""
        return max(self.failures.values()) if self.failures else None


class EphemeralRunner(KubeObject):
    """One ephemeral runner."""

    KIND: ClassVar[str] = "EphemeralRunner"
    RESOURCE: ClassVar[Resource] = EPHEMERAL_RUNNERS

    spec: EphemeralRunnerSpec
    status: EphemeralRunnerStatus = Field(default_factory=EphemeralRunnerStatus)

    @property
    def is_done(self) -> bool:
        return self.status.is_done

    @property
    def has_job(self) -> bool:
        return self.status.has_job

    @property
    def last_failure(self) -> datetime | None:
        return self.status.last_failure

    @property
    def has_container_hook_configured(self) -> bool:
        return self.spec.has_container_hook_configured
