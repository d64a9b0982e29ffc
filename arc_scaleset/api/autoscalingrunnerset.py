"""AutoscalingRunnerSet: what a user writes to get a pool of runners for one GitHub scale set."""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict, Field
from pydantic.config import JsonDict

from arc_scaleset.api.common import (
    CONDITIONS_LIST_MARKERS,
    ApiModel,
    Condition,
    KubeObject,
    MetricsConfig,
    PodTemplateSpec,
    ProxyConfig,
    ResourceMeta,
    TLSConfig,
    VaultConfig,
)
from arc_scaleset.api.constants import AUTOSCALING_RUNNER_SETS as AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.constants import MAX_RUNNERS_UNBOUNDED as MAX_RUNNERS_UNBOUNDED
from arc_scaleset.api.schedule import WarmWindow
from arc_scaleset.api.warm_capacity import WarmCapacity
from arc_scaleset.kube.resources import Resource

# The one min <= max rule, for both kinds that carry the bounds (the AutoscalingListener's are copied from here).
MIN_NOT_ABOVE_MAX: JsonDict = {
    "rule": "!has(self.minRunners) || !has(self.maxRunners) || self.minRunners <= self.maxRunners",
    # A static message: the API server estimates a messageExpression that formats the two numbers as
    # over its CEL cost budget.
    "message": "minRunners must not be greater than maxRunners (set maxRunners to at least minRunners)",
}


def _not_empty(field: str, what: str) -> JsonDict:
    return {"x-kubernetes-validations": [{"rule": "self != ''", "message": f"{field} must not be empty: {what}"}]}


class AutoscalingRunnerSetSpec(ApiModel):
    """The desired runner scale set."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [MIN_NOT_ABOVE_MAX]})

    github_config_url: str = Field(
        json_schema_extra=_not_empty(
            "githubConfigUrl",
            "set it to the URL of the enterprise, organization or repository the runners register with,"
            " e.g. https://github.com/my-org",
        )
    )
    """URL of the GitHub enterprise, organization or repository the scale set serves."""
    github_config_secret: str = Field(
        json_schema_extra=_not_empty(
            "githubConfigSecret",
            "set it to the name of the Secret in this namespace that holds the GitHub App or token credentials"
            " (or the vault secret name when vaultConfig is set)",
        )
    )
    """Name of the Secret (in this namespace) with the GitHub credentials, or the vault lookup key."""
    runner_group: str = ""
    """Runner group to register the scale set in; empty means the default group."""
    runner_scale_set_name: str = ""
    """Name of the scale set on GitHub (the label workflows use in runs-on); defaults to metadata.name."""
    runner_scale_set_labels: list[str] | None = None
    """Extra labels of the scale set, added after its name."""
    proxy: ProxyConfig | None = None
    """Proxies for the controller, the listener and the runners."""
    github_server_tls: TLSConfig | None = None
    """Extra CA certificates for talking to GitHub."""
    vault_config: VaultConfig | None = None
    """Read the GitHub credentials from a vault instead of a Kubernetes Secret."""
    template: PodTemplateSpec
    """The runner pod template; the container named "runner" runs the runner."""
    autoscaling_listener: ResourceMeta | None = None
    """Extra labels and annotations for the AutoscalingListener."""
    listener_metrics: MetricsConfig | None = None
    """Which metrics the listener exports."""
    listener_template: PodTemplateSpec | None = None
    """Merged into the listener pod; its container named "listener" is merged into the listener container."""
    listener_service_account_metadata: ResourceMeta | None = None
    """Extra labels and annotations for the listener ServiceAccount."""
    listener_role_metadata: ResourceMeta | None = None
    """Extra labels and annotations for the listener Role."""
    listener_role_binding_metadata: ResourceMeta | None = None
    """Extra labels and annotations for the listener RoleBinding."""
    listener_config_secret_metadata: ResourceMeta | None = None
    """Extra labels and annotations for the listener config Secret."""
    ephemeral_runner_set_metadata: ResourceMeta | None = None
    """Extra labels and annotations for the EphemeralRunnerSet."""
    ephemeral_runner_metadata: ResourceMeta | None = None
    """Extra labels and annotations for EphemeralRunners created after a change."""
    ephemeral_runner_config_secret_metadata: ResourceMeta | None = None
    """Extra labels and annotations for each runner's JIT config Secret."""
    # Both bounded by what the listener's configuration holds (Go's MaxInt32): a larger value used to pass
    # here and make the listener exit at start, so the scale set crash-looped instead of showing a condition.
    # The controller refuses values above its own, lower ceiling (--max-runners-ceiling) with a condition.
    max_runners: int | None = Field(default=None, ge=0, le=MAX_RUNNERS_UNBOUNDED)
    """Upper bound of runners; unset means no bound."""
    min_runners: int | None = Field(default=None, ge=0, le=MAX_RUNNERS_UNBOUNDED)
    """Runners kept ready when idle; unset means 0."""
    min_runners_schedule: list[WarmWindow] | None = None
    """Not ARC's: windows of the week in which minRunners is raised to the window's runners (at most maxRunners;
    overlapping windows: the largest), e.g. working hours (ARC #3313)."""
    warm_capacity: WarmCapacity | None = None
    """Not an ARC field: room kept warm for runners by low-priority placeholder pods, not idle runners."""

    @property
    def effective_min_runners(self) -> int:
        return 0 if self.min_runners is None else self.min_runners

    @property
    def effective_max_runners(self) -> int:
        return MAX_RUNNERS_UNBOUNDED if self.max_runners is None else self.max_runners


class AutoscalingRunnerSetStatus(ApiModel):
    """What the controller last observed and did.

    The runner counts are ARC's fields (``kubectl get`` shows them), summed over the scale set's
    EphemeralRunnerSets and written on every pass where they changed.
    """

    observed_generation: int = 0
    """The metadata.generation the controller last brought the children in line with."""
    phase: str = ""
    """Pending (a spec change is being applied), Running, or Outdated."""
    conditions: list[Condition] | None = Field(default=None, json_schema_extra=CONDITIONS_LIST_MARKERS)
    """Ready / Progressing / Degraded, each with a reason and a message a person can act on."""
    current_runners: int | None = None
    """Runners holding a slot: pending, running and failed ones."""
    pending_ephemeral_runners: int | None = None
    """Runners whose pod has not started its runner yet."""
    running_ephemeral_runners: int | None = None
    """Runners whose runner is running, idle or on a job."""
    failed_ephemeral_runners: int | None = None
    """Runners that failed (removed after a minute and replaced)."""
    finished_ephemeral_runners: int | None = None
    """Runners whose job finished, about to be removed."""
    deleting_ephemeral_runners: int | None = None
    """Runners being deleted (a busy one waits for its job to end)."""


class AutoscalingRunnerSet(KubeObject):
    """A runner scale set: the listener, the EphemeralRunnerSet and the GitHub registration derive from it."""

    KIND: ClassVar[str] = "AutoscalingRunnerSet"
    RESOURCE: ClassVar[Resource] = AUTOSCALING_RUNNER_SETS

    spec: AutoscalingRunnerSetSpec
    status: AutoscalingRunnerSetStatus = Field(default_factory=AutoscalingRunnerSetStatus)
