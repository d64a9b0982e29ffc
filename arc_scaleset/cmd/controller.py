"""``arc-scaleset controller``: the controller manager with the four reconcilers (docs/controllers.md).

It takes ARC's flags and environment, so the args of an ARC ``gha-runner-scale-set-controller``
Deployment work unchanged:

- Flags are parsed as Go's ``flag`` package would (:mod:`.goflags`): ``--name=value`` or ``--name value``;
  booleans as ``--name`` or ``--name=true|false`` (also ``1/0/t/f``); durations as ``1m30s``; repeatable
  list flags append. A single dash (``-name``) is accepted too, as Go accepts it.
- Environment: ``CONTROLLER_MANAGER_POD_NAMESPACE`` and ``CONTROLLER_MANAGER_CONTAINER_IMAGE`` are required
  (the command exits 1 with a message naming the missing one), ``LISTENER_ENTRYPOINT`` replaces the
  listener container's command, ``GITHUB_ACTIONS_FORCE_GHES`` treats every GitHub URL as GHES.
- Flags of ARC's legacy (summerwind) controllers (:data:`.goflags.LEGACY_FLAGS`), and flags whose feature
  is not served here, are accepted and ignored with one warning line each.

Exit codes: 0 after SIGTERM/SIGINT and a graceful stop; 1 for a configuration error, unusable Kubernetes
credentials, caches that never synced, or a lost leader-election lease (the Deployment restarts the pod
as a fresh candidate); 2 for a flag argparse rejects (an unknown rate limiter, a bad duration, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry, ProcessCollector, disable_created_metrics

from arc_scaleset.api.listener_config import LOG_FORMATS, LOG_LEVELS
from arc_scaleset.api.versions import ARC_CHART_VERSIONS
from arc_scaleset.clock import Clock
from arc_scaleset.cmd.goflags import (
    GoBoolAction,
    add_go_flag,
    add_legacy_flags,
    legacy_flag_warnings,
    parse_go_duration,
)
from arc_scaleset.controllers.settings import (
    CONTAINER_IMAGE_ENV,
    DEFAULT_LISTENER_RESOURCE_BOUND,
    DEFAULT_MAX_RUNNER_TEMPLATE_BYTES,
    DEFAULT_MAX_RUNNERS_CEILING,
    DEFAULT_SCALE_SET_MAX_CONCURRENT_RECONCILES,
    DEFAULT_SHARED_LISTENER_MAX_MEMBERS,
    DEFAULT_UNSCHEDULABLE_RUNNER_BOUND,
    DEFAULT_WARM_PLACEHOLDER_BOUND,
    DEFAULT_WARM_POOL_MAX_PLACEHOLDERS,
    DEFAULT_WARM_PRIORITY_CLASS,
    LISTENER_ENTRYPOINT_ENV,
    POD_NAMESPACE_ENV,
    ControllerSettings,
    SettingsError,
    parse_label_pairs,
    parse_resource_bound,
)
from arc_scaleset.gc_tuning import freeze_startup_objects
from arc_scaleset.kube.workqueue import RateLimiter, bucket_rate_limiter, default_rate_limiter
from arc_scaleset.observability.logging import configure_logging
from arc_scaleset.observability.traces import (
    ENDPOINT_ENV,
    TRACES_ENDPOINT_ENV,
    TRACES_PATH,
    TraceSink,
    display_url,
    traces_endpoint,
)
from arc_scaleset.observability.uncaught import install_uncaught_exception_logging, log_asyncio_exception
from arc_scaleset.tls_buffers import shrink_tls_read_buffers

if TYPE_CHECKING:
    from arc_scaleset.kube.client import KubeClient

log = logging.getLogger("arc_scaleset.controller")

RateLimiterFactory = Callable[[], RateLimiter]

DEFAULT_LEADER_ELECTION_ID: Final = "actions-runner-controller"
DEFAULT_QPS: Final = 20.0
DEFAULT_BURST: Final = 30
CLIENT_GO_QPS: Final = 5.0
CLIENT_GO_BURST: Final = 10
DEFAULT_SYNC_PERIOD: Final = "1m"
DEFAULT_WEBHOOK_PORT: Final = 9443
DEFAULT_RUNNER_PENDING_TIMEOUT: Final = "15m"
DEFAULT_VAULT_REFRESH_INTERVAL: Final = "1m"
UNRESTRICTED_VAULT_WARNING: Final = (
    "vault use is unrestricted: any namespace's vaultConfig may read any vault secret this controller's certificates"
    " reach and send it to any GitHub host; set --vault-allow-list to a ConfigMap allowing each namespace its own"
    " (docs/github.md)"
)
FORCE_GHES_ENV: Final = "GITHUB_ACTIONS_FORCE_GHES"
TRACE_SERVICE_NAME: Final = "arc-scaleset-controller"


# -- flag value types -------------------------------------------------------------------------------


def _choice(allowed: tuple[str, ...], *, allow_empty: bool = False) -> Callable[[str], str]:
    def check(text: str) -> str:
        if text in allowed or (allow_empty and text == ""):
            return text
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(allowed)} (got {text!r})")

    return check


def _log_level(text: str) -> str:
    """``--log-level``: a name, or zap's number as ARC's Go flag takes it (-1 or lower is debug, 0 info, 1 warn,
    2 and above error), so an ARC Deployment's ``--log-level=-2`` does not stop the controller."""
    if text in LOG_LEVELS:
        return text
    try:
        number = int(text)
    except ValueError:
        number = None
    if number is None or not -128 <= number <= 127:
        raise argparse.ArgumentTypeError(
            f"must be one of {', '.join(LOG_LEVELS)} or a number from -128 to 127 (got {text!r})"
        )
    return LOG_LEVELS[min(max(number + 1, 0), len(LOG_LEVELS) - 1)]


def _go_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _positive_int(text: str) -> int:
    value = _go_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number (got {text})")
    return value


def _positive_float(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive (got {text})")
    return value


def client_rate_limit(qps: float, burst: int) -> tuple[float | None, int]:
    """The Kubernetes client's ``(qps, burst)`` for ARC's flag values, as client-go reads them: 0 is its
    default (5 per second, burst 10), a negative QPS no client-side limit (``None``), a burst below 1 with a
    limit its default burst."""
    if qps < 0:
        return None, burst
    return (qps or CLIENT_GO_QPS), (burst if burst > 0 else CLIENT_GO_BURST)


# -- workqueue rate limiters --------------------------------------------------------------------------

BUCKET_RATE_LIMITER: Final = "bucket_rate_limiter"
TYPED_RATE_LIMITER: Final = "typed_rate_limiter"
RATE_LIMITERS: Final = (BUCKET_RATE_LIMITER, TYPED_RATE_LIMITER)


def rate_limiter_factory(name: str, *, clock: Clock) -> RateLimiterFactory:
    """The factory of ``--workqueue-rate-limiter`` ``name``: one fresh limiter per controller.

    ``""`` or ``bucket_rate_limiter`` (ARC's default): per-key exponential backoff *and* a global
    10 qps / 100 burst bucket; ``typed_rate_limiter``: per-key exponential backoff only. Anything else
    raises ``ValueError`` naming the accepted values.
    """
    if name in ("", BUCKET_RATE_LIMITER):
        return lambda: bucket_rate_limiter(clock=clock)
    if name == TYPED_RATE_LIMITER:
        return default_rate_limiter
    raise ValueError(f"unknown workqueue rate limiter {name!r}: use {' or '.join(RATE_LIMITERS)}")


# -- flags --------------------------------------------------------------------------------------------

WATCH_NAMESPACE_HELP: Final = (
    "restrict the controller's caches to this namespace (plus the controller's own namespace, where the "
    'listeners live) (default: "", every namespace)'
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = "%(prog)s [flags]  (ARC's flags; see below)"
    parser.description = (
        "Run the controller manager (AutoscalingRunnerSet, EphemeralRunnerSet, EphemeralRunner and "
        f"AutoscalingListener controllers). Environment: {POD_NAMESPACE_ENV} (required: the controller's "
        f"namespace, where listeners run), {CONTAINER_IMAGE_ENV} (required: the listener image), "
        f"{LISTENER_ENTRYPOINT_ENV} (listener command; default: arc-scaleset listener), {FORCE_GHES_ENV} "
        "(any value: treat every GitHub URL as GitHub Enterprise Server)."
    )
    add_go_flag(
        parser,
        "kubeconfig",
        default=None,
        help="kubeconfig file (default: in-cluster credentials, then $KUBECONFIG, then ~/.kube/config)",
    )
    add_go_flag(
        parser,
        "auto-scaling-runner-set-only",
        action=GoBoolAction,
        default=None,
        help="accepted for ARC compatibility; the runner-scale-set controllers are the only mode here "
        "(default: false, which changes nothing)",
    )
    add_go_flag(parser, "watch-namespace", default="", help=WATCH_NAMESPACE_HELP)
    add_go_flag(
        parser,
        "watch-single-namespace",
        default="",
        help='watch custom resources in this single namespace (plus the controller\'s own) (default: "", all)',
    )
    add_go_flag(
        parser,
        "log-level",
        default="debug",
        type=_log_level,
        help="log verbosity: debug, info, warn or error (or zap's number, as ARC takes it: -1 debug, 0 info, "
        "1 warn, 2 error); also written into listener configs (default: debug)",
    )
    add_go_flag(
        parser,
        "log-format",
        default="text",
        type=_choice(LOG_FORMATS),
        help="log format: text or json; also written into listener configs (default: text)",
    )
    add_go_flag(
        parser,
        "enable-leader-election",
        action=GoBoolAction,
        help="elect one active manager through a coordination.k8s.io Lease in the controller namespace "
        "(default: false)",
    )
    add_go_flag(
        parser,
        "leader-election-id",
        default=DEFAULT_LEADER_ELECTION_ID,
        help=f"name of the leader-election Lease (default: {DEFAULT_LEADER_ELECTION_ID})",
    )
    add_go_flag(
        parser,
        "metrics-addr",
        default=":8080",
        help="address of the controller's /metrics endpoint; 0 disables it and the scale-set metrics (default: :8080)",
    )
    add_go_flag(
        parser,
        "listener-metrics-addr",
        default=":8080",
        help="metrics address written into listener configs (and the listener pod's metrics port); "
        "0 disables listener metrics (default: :8080)",
    )
    add_go_flag(
        parser,
        "listener-metrics-endpoint",
        default="/metrics",
        help="metrics path written into listener configs (default: /metrics)",
    )
    add_go_flag(
        parser,
        "health-probe-bind-address",
        default="",
        help='address serving /healthz and /readyz; empty disables them (default: "")',
    )
    add_go_flag(
        parser,
        "pprof-addr",
        default="",
        help='accepted for ARC compatibility but NOT served: Go\'s pprof has no equivalent here (default: "")',
    )
    add_go_flag(
        parser,
        "runner-max-concurrent-reconciles",
        default=2,
        type=_positive_int,
        help="EphemeralRunner reconciles run at once (default: 2)",
    )
    add_go_flag(
        parser,
        "scale-set-max-concurrent-reconciles",
        default=DEFAULT_SCALE_SET_MAX_CONCURRENT_RECONCILES,
        type=_positive_int,
        help="reconciles each of the AutoscalingRunnerSet, EphemeralRunnerSet and AutoscalingListener controllers "
        "runs at once, never two of one object; not an ARC flag: ARC runs one "
        f"(default: {DEFAULT_SCALE_SET_MAX_CONCURRENT_RECONCILES})",
    )
    add_go_flag(
        parser,
        "max-runners-ceiling",
        default=DEFAULT_MAX_RUNNERS_CEILING,
        type=_positive_int,
        help="the most runners one scale set may ask for: an AutoscalingRunnerSet whose minRunners or maxRunners "
        "is above it is refused with a RunnersAboveCeiling condition, and an EphemeralRunnerSet keeps at most this "
        f"many runners; not an ARC flag (default: {DEFAULT_MAX_RUNNERS_CEILING})",
    )
    add_go_flag(
        parser,
        "max-runner-template-bytes",
        default=DEFAULT_MAX_RUNNER_TEMPLATE_BYTES,
        type=_positive_int,
        help="the largest runner pod template (spec.template as JSON) a scale set may have, since every runner "
        "stores a copy: a larger one is refused with a RunnerTemplateTooLarge condition; not an ARC flag "
        f"(default: {DEFAULT_MAX_RUNNER_TEMPLATE_BYTES})",
    )
    add_go_flag(
        parser,
        "unschedulable-runner-bound",
        default=DEFAULT_UNSCHEDULABLE_RUNNER_BOUND,
        type=_positive_float,
        help="seconds a runner pod may stay unschedulable before its scale set advertises only the runners the "
        "cluster has placed (CapacityLimited condition); not an ARC flag "
        f"(default: {DEFAULT_UNSCHEDULABLE_RUNNER_BOUND:g})",
    )
    add_go_flag(
        parser,
        "vault-refresh-interval",
        default=DEFAULT_VAULT_REFRESH_INTERVAL,
        type=parse_go_duration,
        help="with vaultConfig: how often a listener's credentials are read again from the vault (a changed "
        "secret recreates the listener); values read from a vault are reused for at most half of it, and never "
        "more than 30s; not an ARC flag (default: 1m0s)",
    )
    add_go_flag(
        parser,
        "vault-allow-list",
        default="",
        metavar="CONFIGMAP",
        help="a ConfigMap in the controller namespace whose keys are namespaces and whose values say which vault "
        "URLs, certificate paths and secret-name prefixes that namespace's vaultConfig may use, and to which GitHub "
        "hosts and proxies what it reads may be sent (JSON: vaultUrls, certificatePaths, secretPrefixes, githubHosts, "
        "proxyHosts); a "
        "namespace without an entry may use no vault, and a missing ConfigMap allows none; without this flag any "
        "namespace may use any vault, as in ARC, and a warning is logged; not an ARC flag (default: none)",
    )
    add_go_flag(
        parser,
        "runner-pending-timeout",
        default=DEFAULT_RUNNER_PENDING_TIMEOUT,
        type=parse_go_duration,
        help="a runner pod whose runner container has not started this long after the pod was created "
        "(unschedulable, image pull failing, volume not attaching) is deleted and retried like a failed pod; "
        "0 waits forever; not an ARC flag (default: 15m0s)",
    )
    add_go_flag(
        parser,
        "runner-cost-labels",
        action=GoBoolAction,
        default=True,
        help="label a runner's pod, once it takes a job, with the job's repository, workflow and job under "
        "cost.arc-scaleset.dev/ (for cost tools; values made safe for labels, exact values in annotations); "
        "not an ARC flag (default: true)",
    )
    add_go_flag(
        parser,
        "runner-counts-in-status",
        action=GoBoolAction,
        default=False,
        help="write the runner counts (current, pending, running, failed, finished, deleting) into the status of "
        "every EphemeralRunnerSet and AutoscalingRunnerSet too, for kubectl get's columns, at up to 4 API writes "
        "more per job; false does as ARC's current code (#4557): the counts are in the "
        "gha_controller_*_ephemeral_runners metrics only and those in status are removed; not an ARC flag "
        "(default: false)",
    )
    add_go_flag(
        parser,
        "otlp-endpoint",
        default="",
        metavar="URL",
        help="export each job's wait (queued to started, by phase) as an OpenTelemetry trace to this OTLP/HTTP "
        f"base URL (traces go to its /{TRACES_PATH}), as {ENDPOINT_ENV} does; without it, {TRACES_ENDPOINT_ENV} or "
        f"{ENDPOINT_ENV} turn traces on, and with neither none are made; the other OTEL_EXPORTER_OTLP_* variables "
        'set headers, certificates and timeout; not an ARC flag (default: "", off)',
    )
    add_go_flag(
        parser,
        "workqueue-rate-limiter",
        default="",
        type=_choice(RATE_LIMITERS, allow_empty=True),
        help="retry backoff of failed reconciles: bucket_rate_limiter (per-key exponential 5ms..1000s plus a "
        "global 10 qps / 100 burst bucket) or typed_rate_limiter (per-key exponential only) "
        '(default: "", meaning bucket_rate_limiter)',
    )
    add_go_flag(
        parser,
        "k8s-client-rate-limiter-qps",
        default=DEFAULT_QPS,
        type=_number,
        help="Kubernetes API requests per second per resource type (client-side limit, a token bucket per "
        "resource type as controller-runtime's client has); as in client-go, 0 means its default of "
        f"{CLIENT_GO_QPS:g} and a negative value no limit (default: {DEFAULT_QPS:g})",
    )
    add_go_flag(
        parser,
        "k8s-client-rate-limiter-burst",
        default=DEFAULT_BURST,
        type=_go_int,
        help=f"Kubernetes API request burst above the QPS limit; 0 means client-go's default of {CLIENT_GO_BURST} "
        f"(default: {DEFAULT_BURST})",
    )
    add_go_flag(
        parser,
        "sync-period",
        default=None,
        type=parse_go_duration,
        help=f"accepted for ARC compatibility and ignored: the caches are kept exact by watches (with "
        f"relists after expiry) and reconcilers requeue what they poll (default: {DEFAULT_SYNC_PERIOD})",
    )
    add_go_flag(
        parser,
        "exclude-label-propagation-prefix",
        action="append",
        default=[],
        metavar="PREFIX",
        help="label keys with this prefix are not copied to generated objects; repeatable (default: none)",
    )
    add_go_flag(
        parser,
        "capped-node-room",
        action=GoBoolAction,
        help="lower a scale set's advertised capacity by the room left on the nodes its runners may run on when "
        "all of them are labelled arc-scaleset.dev/node-pool-capped=true (no more will come); watches Nodes and "
        "every scheduled pod; not an ARC flag (default: false)",
    )
    add_go_flag(
        parser,
        "accept-any-version-label",
        action=GoBoolAction,
        help="manage AutoscalingRunnerSets whatever their app.kubernetes.io/version label; without it, the "
        f"controller manages its own versions and those of ARC's charts {ARC_CHART_VERSIONS} and reports any "
        "other as UnsupportedVersion; not an ARC flag (default: false)",
    )
    add_go_flag(
        parser,
        "allow-privileged-listener-template",
        action=GoBoolAction,
        help='let the listener pod built from listenerTemplate break the Pod Security "restricted" profile (host '
        "namespaces and ports, hostPath and other volume types than configMap, secret, emptyDir, projected and "
        "downwardAPI, privileged or root containers, added capabilities, unconfined seccomp/AppArmor, SELinux "
        "types, procMount, sysctls; listener pods run in the controller namespace, beside every scale set's "
        "credentials); without it such a template is refused with an InvalidListenerTemplate condition; not an "
        "ARC flag (default: false)",
    )
    add_go_flag(
        parser,
        "allow-listener-template-scheduling",
        action=GoBoolAction,
        help="let listenerTemplate set nodeName, tolerations, priorityClassName, priority, runtimeClassName and "
        "schedulerName (nodeSelector and affinity are always allowed); without it such a template is refused with "
        "an InvalidListenerTemplate condition; not an ARC flag (default: false)",
    )
    add_go_flag(
        parser,
        "listener-template-max-resources",
        default=DEFAULT_LISTENER_RESOURCE_BOUND,
        metavar="NAME=QUANTITY,...",
        help="the most each container of a listener pod built from listenerTemplate, and its containers together, "
        "may request or limit; a resource not named may not be asked for (listener pods run in the controller "
        f"namespace, outside their team's quotas); not an ARC flag (default: {DEFAULT_LISTENER_RESOURCE_BOUND})",
    )
    add_go_flag(
        parser,
        "controller-selector-label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a selector label of the controller's own pod (the chart passes its Deployment's): a listener pod "
        "carrying it with the same value is refused (ForbiddenListenerMetadata); repeatable; not an ARC flag "
        "(default: none)",
    )
    add_go_flag(
        parser,
        "allow-listener-metadata-key",
        action="append",
        default=[],
        metavar="KEY",
        help="a label or annotation key (or a prefix ending in /) a scale set may put on its listener's pod and "
        "ServiceAccount although refused by default: workload-identity keys such as eks.amazonaws.com/role-arn, "
        "and the controller's selector labels; repeatable; not an ARC flag (default: none)",
    )
    add_go_flag(
        parser,
        "warm-capacity",
        action=GoBoolAction,
        default=True,
        help="run the warm-pool controller: placeholder pods at a low priority keep room for the runners of scale "
        "sets with spec.warmCapacity (it does nothing for others); not an ARC flag (default: true)",
    )
    add_go_flag(
        parser,
        "warm-placeholder-priority-class",
        default=DEFAULT_WARM_PRIORITY_CLASS,
        help="the PriorityClass of placeholder pods: below every runner's priority, so runner pods preempt them "
        "(the controller chart creates it); not an ARC flag "
        f"(default: {DEFAULT_WARM_PRIORITY_CLASS})",
    )
    add_go_flag(
        parser,
        "warm-placeholder-max-resources",
        default=DEFAULT_WARM_PLACEHOLDER_BOUND,
        metavar="NAME=QUANTITY,...",
        help="the most one placeholder pod may request (the runner pod's requests); a resource not named may not be "
        "asked for, and a scale set asking for more gets no placeholders (placeholders run in the controller "
        f"namespace, outside every team's quota); not an ARC flag (default: {DEFAULT_WARM_PLACEHOLDER_BOUND})",
    )
    add_go_flag(
        parser,
        "warm-pool-max-placeholders",
        default=DEFAULT_WARM_POOL_MAX_PLACEHOLDERS,
        type=_go_int,
        help="the most placeholder pods one warm pool (the scale sets whose runners have one shape) keeps; not an "
        f"ARC flag (default: {DEFAULT_WARM_POOL_MAX_PLACEHOLDERS})",
    )
    add_go_flag(
        parser,
        "shared-listener-max-members",
        default=DEFAULT_SHARED_LISTENER_MAX_MEMBERS,
        type=_go_int,
        help="the most scale sets one shared listener serves; further sets with the same credentials and listener "
        "shape go to another shared listener, and a member is never moved; 0: bounded by the size of its config "
        f"Secret only; not an ARC flag (default: {DEFAULT_SHARED_LISTENER_MAX_MEMBERS})",
    )
    add_go_flag(
        parser,
        "auto-scaler-image-pull-secrets",
        action="append",
        default=[],
        metavar="SECRET",
        help="image pull secret given to every listener pod; repeatable (default: none)",
    )
    add_go_flag(
        parser,
        "port",
        default=None,
        type=int,
        help=f"accepted for ARC compatibility and ignored: the runner-scale-set controllers serve no "
        f"webhooks (default: {DEFAULT_WEBHOOK_PORT})",
    )
    add_legacy_flags(parser)


# -- from flags to settings ---------------------------------------------------------------------------


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> ControllerSettings:
    """The reconcilers' settings from the parsed flags and the environment; raises :class:`SettingsError`
    (a message naming the flag or variable) when they cannot be used."""
    return ControllerSettings.from_environment(
        environ,
        log_level=args.log_level,
        log_format=args.log_format,
        listener_metrics_addr=args.listener_metrics_addr,
        listener_metrics_endpoint=args.listener_metrics_endpoint,
        # As ARC: "0" turns off the scale-set metrics the runner-set controller publishes.
        metrics_enabled=args.metrics_addr.strip() != "0",
        exclude_label_prefixes=tuple(args.exclude_label_propagation_prefix),
        image_pull_secrets=tuple(args.auto_scaler_image_pull_secrets),
        runner_max_concurrent_reconciles=args.runner_max_concurrent_reconciles,
        scale_set_max_concurrent_reconciles=args.scale_set_max_concurrent_reconciles,
        max_runners_ceiling=args.max_runners_ceiling,
        max_runner_template_bytes=args.max_runner_template_bytes,
        unschedulable_runner_bound=args.unschedulable_runner_bound,
        capped_node_room=args.capped_node_room,
        runner_pending_timeout=args.runner_pending_timeout if args.runner_pending_timeout > 0 else None,
        watch_namespace=args.watch_single_namespace or args.watch_namespace or None,
        allow_privileged_listener_template=args.allow_privileged_listener_template,
        allow_listener_template_scheduling=args.allow_listener_template_scheduling,
        listener_template_max_resources=parse_resource_bound(args.listener_template_max_resources),
        controller_selector_labels=parse_label_pairs(
            args.controller_selector_label, flag="--controller-selector-label"
        ),
        allowed_listener_metadata_keys=tuple(args.allow_listener_metadata_key),
        accept_any_version_label=args.accept_any_version_label,
        vault_refresh_interval=args.vault_refresh_interval if args.vault_refresh_interval > 0 else 60.0,
        vault_allow_list=args.vault_allow_list.strip(),
        warm_capacity=args.warm_capacity,
        warm_priority_class=args.warm_placeholder_priority_class.strip(),
        warm_placeholder_max_resources=parse_resource_bound(
            args.warm_placeholder_max_resources, flag="--warm-placeholder-max-resources"
        ),
        warm_pool_max_placeholders=args.warm_pool_max_placeholders,
        shared_listener_max_members=max(args.shared_listener_max_members, 0),
        runner_cost_labels=args.runner_cost_labels,
        runner_counts_in_status=args.runner_counts_in_status,
        otlp_traces_endpoint=traces_endpoint(args.otlp_endpoint, environ),
    )


def cache_namespaces(args: argparse.Namespace, controller_namespace: str) -> frozenset[str] | None:
    """The namespaces the manager caches (``None``: all).

    ``--watch-namespace`` and ``--watch-single-namespace`` each add theirs. Unlike ARC, the controller
    namespace is always added when either restricts the cache: the AutoscalingListeners and their pods
    live there, and without it no listener could ever be reconciled.
    """
    chosen = {name for name in (args.watch_namespace, args.watch_single_namespace) if name}
    if not chosen:
        return None
    return frozenset({*chosen, controller_namespace})


def ignored_flag_warnings(args: argparse.Namespace) -> list[str]:
    """One line per flag that was given but has no effect here, saying why."""
    lines: list[str] = []
    if args.auto_scaling_runner_set_only is False:
        lines.append(
            "--auto-scaling-runner-set-only=false is ignored: ARC's legacy controllers are not implemented; "
            "running the runner-scale-set controllers"
        )
    if args.pprof_addr:
        lines.append(f"--pprof-addr={args.pprof_addr} is ignored: there is no pprof endpoint in this controller")
    if args.port is not None:
        lines.append(f"--port={args.port} is ignored: the runner-scale-set controllers serve no webhooks")
    if args.sync_period is not None:
        lines.append("--sync-period is ignored: caches are kept exact by watches and never resync periodically")
    lines.extend(legacy_flag_warnings(args))
    return lines


# -- running ------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    configure_logging(level=args.log_level, fmt=args.log_format)
    # ARC's Go client exports no *_created series; keep the exposition identical.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    # A crash must go through the redacting logger, never as a raw traceback on stderr.
    install_uncaught_exception_logging()
    try:
        settings = settings_from_args(args, os.environ)
    except SettingsError as exc:
        log.error("cannot start the controller: %s", exc)
        return 1
    for line in ignored_flag_warnings(args):
        log.warning(line)
    if not settings.vault_allow_list:
        log.warning(UNRESTRICTED_VAULT_WARNING)
    shrink_tls_read_buffers()
    freeze_startup_objects()
    return asyncio.run(serve(args, settings))


def start_traces(settings: ControllerSettings) -> TraceSink | None:
    """The sink of the jobs' traces when an OTLP endpoint is configured (docs/observability.md, "Traces");
    otherwise ``None``, and the OpenTelemetry SDK is never imported."""
    if settings.otlp_traces_endpoint is None:
        return None
    from arc_scaleset.observability.otlp_traces import OtlpTraceSink

    log.info("exporting each job's wait as a trace to %s", display_url(settings.otlp_traces_endpoint))
    return OtlpTraceSink(
        settings.otlp_traces_endpoint, service_name=TRACE_SERVICE_NAME, service_version=settings.build_version
    )


async def installed_crds_are_this_versions(kube: KubeClient) -> bool:
    """False, with the command that fixes it logged, when the cluster's CRDs would prune fields this version
    writes (ARC's, left in place by a Helm upgrade); True when they are this version's or cannot be read."""
    from arc_scaleset.api.crd.installed import APPLY_COMMAND, crd_problems
    from arc_scaleset.kube.errors import Forbidden, KubeError

    try:
        problems = await crd_problems(kube)
    except Forbidden:
        # A single-namespace installation has no cluster-wide permission: the check is advice, not a gate.
        log.warning(
            "cannot check the installed CRDs (no permission to get them); they must be this version's: %s",
            APPLY_COMMAND,
        )
        return True
    except KubeError as exc:
        log.warning("cannot check the installed CRDs: %s", exc)
        return True
    for problem in problems:
        log.error("cannot start the controller: %s", problem)
    if problems:
        log.error(
            "the API server would drop the fields this controller writes; install this version's CRDs "
            "(Helm does not upgrade them): %s",
            APPLY_COMMAND,
        )
    return not problems


async def serve(args: argparse.Namespace, settings: ControllerSettings) -> int:
    """Build the client, the manager and the four controllers, and run until stopped; the exit code."""
    # Imported here: `arc-scaleset controller --help` should not pay for the whole runtime.
    from arc_scaleset.kube.client import KubeClient
    from arc_scaleset.kube.errors import KubeconfigError
    from arc_scaleset.kube.leader_election import LeaderElectionConfig, LeadershipLostError
    from arc_scaleset.kube.manager import CacheSyncTimeoutError, Manager

    asyncio.get_running_loop().set_exception_handler(log_asyncio_exception)
    registry = CollectorRegistry()
    # controller-runtime's registry serves process_* (CPU, memory, open files, start time): ARC's dashboards
    # read them.
    ProcessCollector(registry=registry)
    try:
        qps, burst = client_rate_limit(args.k8s_client_rate_limiter_qps, args.k8s_client_rate_limiter_burst)
        kube = KubeClient.from_environment(args.kubeconfig, qps=qps, burst=burst, registry=registry)
    except (KubeconfigError, OSError) as exc:
        log.error("cannot start the controller: no usable Kubernetes credentials: %s", exc)
        return 1
    from arc_scaleset.cmd.controller_setup import CHILD_LABEL, cache_label_selectors, setup_controllers
    from arc_scaleset.controllers.context import ControllerContext

    context: ControllerContext | None = None
    traces = start_traces(settings)
    try:
        if not await installed_crds_are_this_versions(kube):
            return 1
        leader_election = (
            LeaderElectionConfig(name=args.leader_election_id, namespace=settings.controller_namespace)
            if args.enable_leader_election
            else None
        )
        try:
            manager = Manager(
                kube,
                namespaces=cache_namespaces(args, settings.controller_namespace),
                label_selectors=cache_label_selectors(settings.exclude_label_prefixes),
                metrics_address=args.metrics_addr,
                health_address=args.health_probe_bind_address or None,
                leader_election=leader_election,
                registry=registry,
            )
        except ValueError as exc:
            log.error("cannot start the controller: %s", exc)
            return 1
        context = ControllerContext.create(kube, manager, settings, environ=os.environ, traces=traces)
        setup_controllers(context, rate_limiter=rate_limiter_factory(args.workqueue_rate_limiter, clock=manager.clock))
        log.info(
            "starting the controller manager",
            extra={
                "controller_namespace": settings.controller_namespace,
                "watch_namespaces": sorted(manager.namespaces) if manager.namespaces else "all",
                "leader_election": args.leader_election_id if leader_election else "off",
                "runner_max_concurrent_reconciles": settings.runner_max_concurrent_reconciles,
                "scale_set_max_concurrent_reconciles": settings.scale_set_max_concurrent_reconciles,
                # Pods, ServiceAccounts, Roles and RoleBindings cached: those with this label, or all of them.
                "cached_children": f"labelled {CHILD_LABEL}" if manager.label_selectors else "all",
            },
        )
        if not manager.label_selectors:
            log.warning(
                "caching every Pod, ServiceAccount, Role and RoleBinding in the watched namespaces:"
                " --exclude-label-propagation-prefix keeps %s off the objects the controller makes",
                CHILD_LABEL,
            )
        try:
            await manager.run(handle_signals=True)
        except LeadershipLostError as exc:
            log.error("stopping: %s", exc)
            return 1
        except CacheSyncTimeoutError as exc:
            log.error("stopping: %s", exc)
            return 1
        except OSError as exc:  # an endpoint that cannot bind (address in use, permission)
            log.error("stopping: cannot serve metrics or probes: %s", exc)
            return 1
        return 0
    finally:
        if context is not None:
            await context.github.pool.aclose()
            await context.github.vault_secrets.close()
        if traces is not None:
            # Sends what is queued: a blocking call (at most the exporter's timeout), off the event loop.
            await asyncio.to_thread(traces.shutdown)
        await kube.close()
