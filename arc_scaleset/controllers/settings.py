"""The controller manager's options (ARC's flags and environment) as one frozen value every reconciler reads.

Built once at startup, by the ``controller`` command from its flags and the environment
(:meth:`ControllerSettings.from_environment`), or directly by tests. Nothing here talks to an API; the
derived properties (listener metrics port, the listener's log settings) are pure functions of the fields.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import arc_scaleset
from arc_scaleset.api.listener_config import LOG_FORMATS, LOG_LEVELS
from arc_scaleset.kube.quantity import InvalidQuantity, Quantity, parse_quantity

POD_NAMESPACE_ENV: Final = "CONTROLLER_MANAGER_POD_NAMESPACE"
CONTAINER_IMAGE_ENV: Final = "CONTROLLER_MANAGER_CONTAINER_IMAGE"
LISTENER_ENTRYPOINT_ENV: Final = "LISTENER_ENTRYPOINT"

DEFAULT_LISTENER_COMMAND: Final = ("arc-scaleset", "listener")
"""The listener container runs this project's listener from the controller's own image."""

DISABLED_ADDRESS: Final = "0"

DEFAULT_SCALE_SET_MAX_CONCURRENT_RECONCILES: Final = 4
"""Workers of each per-set controller: a pass spends most of its time waiting on the API server, so a few let other
sets go on meanwhile; each resource type's client bucket still bounds the request rate (docs/controllers.md)."""

DEFAULT_MAX_RUNNERS_CEILING: Final = 10_000
"""Runners one scale set may ask for, by default: well above what one scale set usually runs, and low enough
that a typo (``minRunners: 500000``) cannot make the controller create hundreds of thousands of objects."""
DEFAULT_MAX_RUNNER_TEMPLATE_BYTES: Final = 256 * 1024
"""The largest runner pod template, as JSON, a scale set may have: every runner stores a copy."""
DEFAULT_UNSCHEDULABLE_RUNNER_BOUND: Final = 120.0
"""Seconds a runner pod may find no node before its scale set stops advertising room it cannot give: longer
than a node autoscaler needs for a new node (about a minute), short enough that a job waits minutes, not hours."""


DEFAULT_LISTENER_RESOURCE_BOUND: Final = "cpu=2,memory=2Gi,ephemeral-storage=2Gi"
"""What a listenerTemplate may ask for, by default: well above what a listener needs (tens of millicores, under
100 MiB), with room for a sidecar."""

DEFAULT_WARM_PRIORITY_CLASS: Final = "arc-scaleset-warm-placeholder"
"""The PriorityClass of placeholder pods the controller chart creates (value -10, ``preemptionPolicy: Never``)."""
DEFAULT_WARM_PLACEHOLDER_BOUND: Final = "cpu=16,memory=64Gi,ephemeral-storage=100Gi"
"""What one placeholder may reserve, by default: a large runner; GPUs and other resources only when named."""
DEFAULT_WARM_POOL_MAX_PLACEHOLDERS: Final = 100
"""Placeholders one warm pool keeps at most, by default."""
DEFAULT_SHARED_LISTENER_MAX_MEMBERS: Final = 100
"""The most scale sets one shared listener serves by default (docs/listener.md, "Shards"): a join rewrites the
group's config Secret whole, so the cost of a join and the sets one pod's failure touches stay bounded, and a
set costs about 0.5 MB of listener memory at that size."""


class SettingsError(ValueError):
    """An option that cannot be used; the message names the option and what is expected."""


def parse_resource_bound(text: str, *, flag: str = "--listener-template-max-resources") -> dict[str, Quantity]:
    """``"cpu=2,memory=2Gi"`` as a bound per resource name (``--listener-template-max-resources``,
    ``--warm-placeholder-max-resources``); raises :class:`SettingsError` naming ``flag``."""
    bound: dict[str, Quantity] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        try:
            if not sep or not name.strip():
                raise InvalidQuantity("expected name=quantity")
            bound[name.strip()] = parse_quantity(raw.strip())
        except InvalidQuantity as exc:
            raise SettingsError(f"{flag}: {item!r}: {exc}") from None
    return bound


def parse_label_pairs(pairs: Sequence[str], *, flag: str) -> dict[str, str]:
    """``["k=v", ...]`` as a mapping (``--controller-selector-label``); raises :class:`SettingsError`."""
    labels: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"{flag}: {pair!r} is not key=value")
        labels[key.strip()] = value.strip()
    return labels


@dataclass(frozen=True, kw_only=True)
class ControllerSettings:
    """Options shared by the four reconcilers.

    - ``controller_namespace``: where AutoscalingListeners and the listener pods live (the controller's
      own namespace, env ``CONTROLLER_MANAGER_POD_NAMESPACE``).
    - ``controller_image``: the listener image (env ``CONTROLLER_MANAGER_CONTAINER_IMAGE``).
    - ``listener_entrypoint``: the listener container's command; ``("arc-scaleset", "listener")`` unless
      env ``LISTENER_ENTRYPOINT`` names another (``"/x"`` gives ``("/x",)``).
    - ``log_level`` / ``log_format``: the controller's, also written into every listener config.
    - ``listener_metrics_addr`` / ``listener_metrics_endpoint``: the listener's metrics server;
      ``listener_metrics_addr="0"`` disables it (no port on the pod, empty addr in the config).
    - ``metrics_enabled``: whether the controller publishes its ``gha_controller_*`` metrics
      (``--metrics-addr`` not ``"0"``).
    - ``exclude_label_prefixes``: label keys with these prefixes are never propagated to generated objects.
    - ``image_pull_secrets``: names given to every listener pod.
    - ``runner_max_concurrent_reconciles``: EphemeralRunner controller workers.
    - ``scale_set_max_concurrent_reconciles``: workers of each per-set controller (AutoscalingRunnerSet,
      EphemeralRunnerSet, AutoscalingListener; ``--scale-set-max-concurrent-reconciles``, not an ARC flag: ARC
      runs one). A key is never reconciled by two at once; more than one lets other sets' passes go on while one
      waits on the API server (docs/controllers.md, "Workers").
    - ``runner_create_concurrency``: how many EphemeralRunners one scale-up creates at once (the largest
      of its growing batches).
    - ``max_runners_ceiling``: the most runners one scale set may ask for (``--max-runners-ceiling``): an
      AutoscalingRunnerSet whose ``minRunners`` or ``maxRunners`` is above it is refused, and an
      EphemeralRunnerSet keeps at most this many runners whatever its ``replicas`` says.
    - ``max_runner_template_bytes``: the largest runner pod template (``spec.template`` as JSON) a scale set may
      have (``--max-runner-template-bytes``): every runner stores a copy; above it the scale set is refused, and
      an EphemeralRunnerSet creates no runner (:mod:`arc_scaleset.controllers.runner_template_size`).
    - ``unschedulable_runner_bound``: seconds a runner pod may stay unschedulable before the set advertises
      only the runners it has placed (``--unschedulable-runner-bound``; docs/capacity.md).
    - ``capped_node_room``: lower the advertised capacity by the room left on nodes labelled
      ``arc-scaleset.dev/node-pool-capped=true`` (``--capped-node-room``; watches Nodes and every scheduled pod;
      docs/capacity.md).
    - ``runner_pending_timeout``: seconds a runner pod may take to start its runner container before it is
      retried as a failed pod (``None``: wait forever).
    - ``watch_namespace``: restrict the caches to this namespace (plus the controller namespace);
      ``None`` watches every namespace.
    - ``build_version``: this build's version, for the ``app.kubernetes.io/version`` gate.
    - ``accept_any_version_label``: manage AutoscalingRunnerSets whatever their ``app.kubernetes.io/version``
      label (``--accept-any-version-label``; the gate otherwise: :mod:`arc_scaleset.api.versions`).
    - ``allow_privileged_listener_template``: let a scale set's ``listenerTemplate`` use host namespaces,
      privileged containers, hostPath volumes and added capabilities (``--allow-privileged-listener-template``;
      refused otherwise: :mod:`arc_scaleset.controllers.autoscalinglistener.template_policy`); with it, the
      whole Pod Security "restricted" profile of the listener pod is lifted.
    - ``allow_listener_template_scheduling``: let ``listenerTemplate`` set ``nodeName``, ``tolerations``,
      ``priorityClassName``, ``priority``, ``runtimeClassName`` and ``schedulerName``
      (``--allow-listener-template-scheduling``).
    - ``listener_template_max_resources``: the most a listener pod built from a ``listenerTemplate`` may
      request or limit, per resource name (``--listener-template-max-resources``; a resource not named may not
      be asked for).
    - ``controller_selector_labels``: the controller pod's own selector labels (``--controller-selector-label``,
      given by the chart): a listener pod never carries one of them with the same value.
    - ``allowed_listener_metadata_keys``: label and annotation keys (exact, or prefixes ending in ``/``) a scale
      set may put on its listener's pod and ServiceAccount although they are refused by default
      (``--allow-listener-metadata-key``; :mod:`arc_scaleset.controllers.autoscalinglistener.metadata_policy`).
    - ``listener_restart_backoff_base`` / ``listener_restart_backoff_cap``: seconds between recreations of
      a listener pod that keeps failing (per listener, doubling).
    - ``scale_set_verify_interval``: seconds between checks that a registered scale set still exists on
      GitHub (re-registered when it is definitively gone; also checked on every spec change), and between
      re-reads of a listener's GitHub Secret (the fallback where its watch is refused: a rotated credential
      otherwise reaches the config within seconds, :mod:`arc_scaleset.controllers.referenced_objects`).
    - ``vault_refresh_interval``: seconds between re-reads of a listener's credentials in its vault
      (``vaultConfig``: nothing can watch a vault); a changed secret recreates the listener.
    - ``vault_allow_list``: the ConfigMap in the controller namespace saying which namespace may read which
      vault secrets and send them where (``--vault-allow-list``; empty: no restriction, as ARC;
      :mod:`arc_scaleset.controllers.vault_policy`).
    - ``warm_capacity``: run the warm-pool controller (``--warm-capacity``; it acts only for scale sets with
      ``spec.warmCapacity``, :mod:`arc_scaleset.controllers.warmcapacity`).
    - ``warm_priority_class``: the PriorityClass of placeholder pods (``--warm-placeholder-priority-class``; the
      controller chart creates it, below every runner's priority).
    - ``warm_placeholder_max_resources``: the most one placeholder may request, per resource name; a resource
      not named may not be asked for (``--warm-placeholder-max-resources``: placeholders live in the controller
      namespace, outside every team's quota).
    - ``warm_pool_max_placeholders``: the most placeholders one pool keeps (``--warm-pool-max-placeholders``).
    - ``runner_cost_labels``: label a busy runner's pod with its job's repository, workflow and job
      (``--runner-cost-labels``; :mod:`arc_scaleset.controllers.ephemeralrunner.cost_labels`).
    - ``otlp_traces_endpoint``: the URL each job's wait is posted to as an OTLP trace; ``None``: no traces
      (``--otlp-endpoint`` or the ``OTEL_EXPORTER_OTLP_*`` variables, :mod:`arc_scaleset.observability.traces`).
    - ``shared_listener_max_members``: the most scale sets one shared listener serves; further sets of the same
      key go to another group (``--shared-listener-max-members``, :data:`DEFAULT_SHARED_LISTENER_MAX_MEMBERS`; 0:
      bounded by its config Secret's size only, :mod:`arc_scaleset.api.group_shards`).
    - ``runner_counts_in_status``: write the runner counts into the EphemeralRunnerSets' and AutoscalingRunnerSets'
      status too (``--runner-counts-in-status``, off by default); off, they are in the metrics only and removed
      from status, as in ARC's current code (#4557; :mod:`arc_scaleset.controllers.ephemeralrunnerset.counts`).
    """

    controller_namespace: str
    controller_image: str
    listener_entrypoint: tuple[str, ...] = DEFAULT_LISTENER_COMMAND
    log_level: str = "debug"
    log_format: str = "text"
    listener_metrics_addr: str = ":8080"
    listener_metrics_endpoint: str = "/metrics"
    metrics_enabled: bool = True
    exclude_label_prefixes: tuple[str, ...] = ()
    image_pull_secrets: tuple[str, ...] = ()
    runner_max_concurrent_reconciles: int = 2
    scale_set_max_concurrent_reconciles: int = DEFAULT_SCALE_SET_MAX_CONCURRENT_RECONCILES
    runner_pending_timeout: float | None = 900.0
    runner_create_concurrency: int = 50
    max_runners_ceiling: int = DEFAULT_MAX_RUNNERS_CEILING
    max_runner_template_bytes: int = DEFAULT_MAX_RUNNER_TEMPLATE_BYTES
    unschedulable_runner_bound: float = DEFAULT_UNSCHEDULABLE_RUNNER_BOUND
    capped_node_room: bool = False
    watch_namespace: str | None = None
    build_version: str = arc_scaleset.__version__
    accept_any_version_label: bool = False
    allow_privileged_listener_template: bool = False
    allow_listener_template_scheduling: bool = False
    listener_template_max_resources: Mapping[str, Quantity] = field(
        default_factory=lambda: parse_resource_bound(DEFAULT_LISTENER_RESOURCE_BOUND)
    )
    controller_selector_labels: Mapping[str, str] = field(default_factory=dict)
    allowed_listener_metadata_keys: tuple[str, ...] = ()
    listener_restart_backoff_base: float = 5.0
    listener_restart_backoff_cap: float = 300.0
    scale_set_verify_interval: float = 300.0
    vault_refresh_interval: float = 60.0
    vault_allow_list: str = ""
    warm_capacity: bool = True
    warm_priority_class: str = DEFAULT_WARM_PRIORITY_CLASS
    warm_placeholder_max_resources: Mapping[str, Quantity] = field(
        default_factory=lambda: parse_resource_bound(DEFAULT_WARM_PLACEHOLDER_BOUND)
    )
    warm_pool_max_placeholders: int = DEFAULT_WARM_POOL_MAX_PLACEHOLDERS
    runner_cost_labels: bool = True
    otlp_traces_endpoint: str | None = None
    shared_listener_max_members: int = DEFAULT_SHARED_LISTENER_MAX_MEMBERS
    runner_counts_in_status: bool = False

    def __post_init__(self) -> None:
        if not self.controller_namespace:
            raise SettingsError(f"the controller namespace is required (set {POD_NAMESPACE_ENV})")
        if not self.controller_image:
            raise SettingsError(f"the listener image is required (set {CONTAINER_IMAGE_ENV})")
        if not self.listener_entrypoint or not all(self.listener_entrypoint):
            raise SettingsError("the listener entrypoint must be a non-empty command")
        if self.runner_max_concurrent_reconciles < 1:
            raise SettingsError("runner_max_concurrent_reconciles must be at least 1")
        if self.scale_set_max_concurrent_reconciles < 1:
            raise SettingsError("scale_set_max_concurrent_reconciles must be at least 1")
        if self.runner_create_concurrency < 1:
            raise SettingsError("runner_create_concurrency must be at least 1")
        if self.max_runners_ceiling < 1:
            raise SettingsError("max_runners_ceiling must be at least 1")
        if self.max_runner_template_bytes < 1:
            raise SettingsError("max_runner_template_bytes must be at least 1")
        if self.unschedulable_runner_bound <= 0:
            raise SettingsError("unschedulable_runner_bound must be positive")
        if self.runner_pending_timeout is not None and self.runner_pending_timeout <= 0:
            raise SettingsError("runner_pending_timeout must be positive (None waits forever)")
        if not 0 < self.listener_restart_backoff_base <= self.listener_restart_backoff_cap:
            raise SettingsError("listener restart backoff needs 0 < base <= cap")
        if self.warm_pool_max_placeholders < 0:
            raise SettingsError("warm_pool_max_placeholders must not be negative")
        if self.warm_capacity and not self.warm_priority_class:
            raise SettingsError("--warm-placeholder-priority-class must name a PriorityClass")
        if self.scale_set_verify_interval <= 0:
            raise SettingsError("scale_set_verify_interval must be positive")
        self.listener_metrics_port  # noqa: B018 - validates the address now, not at the first listener

    # -- derived ---------------------------------------------------------------------------------------

    @property
    def listener_metrics_enabled(self) -> bool:
        return self.listener_metrics_addr.strip() not in ("", DISABLED_ADDRESS)

    @property
    def listener_metrics_port(self) -> int | None:
        """The container port of the listener's metrics server, or ``None`` when metrics are disabled."""
        if not self.listener_metrics_enabled:
            return None
        _, sep, port_text = self.listener_metrics_addr.strip().rpartition(":")
        if not sep or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise SettingsError(f"listener metrics address {self.listener_metrics_addr!r} is not host:port or :port")
        return int(port_text)

    @property
    def listener_log_level(self) -> str:
        """The log level written into listener configs: the controller's when valid, else ``debug``."""
        return self.log_level if self.log_level in LOG_LEVELS else "debug"

    @property
    def listener_log_format(self) -> str:
        """The log format written into listener configs: the controller's when valid, else ``text``."""
        return self.log_format if self.log_format in LOG_FORMATS else "text"

    # -- construction ----------------------------------------------------------------------------------

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], **options: Any) -> ControllerSettings:
        """Settings from the environment variables ARC's manager reads, completed by ``options`` (flags).

        ``options`` win over the environment for the same field.
        """
        values: dict[str, Any] = {
            "controller_namespace": environ.get(POD_NAMESPACE_ENV, ""),
            "controller_image": environ.get(CONTAINER_IMAGE_ENV, ""),
            "listener_entrypoint": listener_command(environ.get(LISTENER_ENTRYPOINT_ENV)),
        }
        values.update(options)
        for key in (
            "exclude_label_prefixes",
            "image_pull_secrets",
            "listener_entrypoint",
            "allowed_listener_metadata_keys",
        ):
            if key in values and not isinstance(values[key], tuple):
                values[key] = tuple(values[key])
        return cls(**values)


def listener_command(entrypoint: str | Sequence[str] | None) -> tuple[str, ...]:
    """The listener container's command for a ``LISTENER_ENTRYPOINT`` value (unset or blank: the default).

    ARC uses the variable as a single executable path; a value with spaces is split as a shell would,
    so ``"python -m x"`` also works.
    """
    if entrypoint is None:
        return DEFAULT_LISTENER_COMMAND
    if isinstance(entrypoint, str):
        if not entrypoint.strip():
            return DEFAULT_LISTENER_COMMAND
        return tuple(shlex.split(entrypoint))
    return tuple(entrypoint) or DEFAULT_LISTENER_COMMAND
