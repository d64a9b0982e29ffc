"""What every reconciler is given: one :class:`ControllerContext` per controller-manager process.

Reconcilers read watched objects through :meth:`ControllerContext.cache` (shared informers, never
mutate what they return), write through :attr:`ControllerContext.kube`, and read Secrets and ConfigMaps
through :attr:`ControllerContext.github` (once per change of what :attr:`ControllerContext.references`
watches) or :mod:`arc_scaleset.controllers.secrets`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from arc_scaleset.clock import Clock
from arc_scaleset.controllers.github_access import GitHubAccess
from arc_scaleset.controllers.group_config_secrets import GroupConfigSecrets, GroupSecretWatch
from arc_scaleset.controllers.handoff import DeletedChildren, RemovedRegistrations, RunnerDeletions
from arc_scaleset.controllers.metrics import ControllerMetrics
from arc_scaleset.controllers.referenced_objects import ReferencedObjectWatch
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.controllers.shard_seats import ShardSeats
from arc_scaleset.controllers.vault_policy import VaultAllowListSource
from arc_scaleset.github import ActionsClientPool, SystemInfo, TransportOptions
from arc_scaleset.github.keyvault import SECRET_TTL_SECONDS, KeyVaultSecrets
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.events import EventRecorder
from arc_scaleset.kube.manager import Cache, Manager
from arc_scaleset.kube.resources import Resource
from arc_scaleset.observability.traces import TraceSink

EVENT_COMPONENT = "arc-scaleset.dev/controller"
"""The ``reportingController`` of the controller's Events."""
FIELD_MANAGER = "arc-scaleset-controller"
GITHUB_SUBSYSTEM = "gha-scale-set-controller"
GITHUB_TRANSPORT = TransportOptions(request_timeout=15.0, retry_max=2, retry_wait_max=5.0)
"""A reconcile worker must not wait on GitHub for long: few, short retries; the workqueue backs off after."""


@dataclass(frozen=True, kw_only=True)
class ControllerContext:
    """The shared services of the controller manager.

    ``manager`` supplies the caches (call :meth:`cache` while setting up, so the manager waits for them
    to sync before starting controllers); ``events`` records Kubernetes Events; ``metrics`` holds the
    ``gha_controller_*`` families; ``clock`` is the one clock every backoff and timestamp uses.
    """

    kube: KubeClient
    manager: Manager
    settings: ControllerSettings
    github: GitHubAccess
    events: EventRecorder
    metrics: ControllerMetrics
    clock: Clock
    references: ReferencedObjectWatch
    """The metadata watch of the Secrets and ConfigMaps listeners are built from: the AutoscalingListener
    controller runs it, and :attr:`github` reads a watched object's data once per change."""
    group_secrets: GroupConfigSecrets
    """The shared listeners' config Secrets, read once per change of what :attr:`group_secret_watch` shows; the
    shared-listener reconciler and the member listeners' passes read them through it and report their writes."""
    group_secret_watch: GroupSecretWatch
    """The metadata watch of the group config Secrets: the shared-listener controller runs it."""
    removed_registrations: RemovedRegistrations = field(default_factory=RemovedRegistrations)
    """Runner registrations the EphemeralRunnerSet removed, so a runner's deletion path need not again."""
    deleted_children: DeletedChildren = field(default_factory=DeletedChildren)
    """Runner pods and JIT Secrets the EphemeralRunnerSet deleted in a batch, so a runner's deletion path need
    not again."""
    traces: TraceSink | None = None
    """Where each job's wait goes as a trace (docs/observability.md, "Traces"); ``None``: tracing is off."""
    runner_deletions: RunnerDeletions = field(default_factory=RunnerDeletions)
    """Runners the EphemeralRunner controller deletes itself (succeeded ones), so the set need not again."""
    shard_seats: ShardSeats = field(default_factory=ShardSeats)
    """The shared-listener shards taken by listeners the AutoscalingRunnerSet controller is making and its cache
    does not show yet, so sets joining at once cannot pass a shard's count limit."""

    def cache(self, resource: Resource) -> Cache:
        """The shared cache of ``resource`` (its informers are created on first use)."""
        return self.manager.cache(resource)

    @classmethod
    def create(
        cls,
        kube: KubeClient,
        manager: Manager,
        settings: ControllerSettings,
        *,
        pool: ActionsClientPool | None = None,
        environ: Mapping[str, str] = os.environ,
        events: EventRecorder | None = None,
        traces: TraceSink | None = None,
    ) -> ControllerContext:
        """The usual wiring: the manager's clock and registry, a new client pool unless one is given.

        The caller owns the pool's shutdown (``await context.github.pool.aclose()``), and that of ``traces``.
        """
        clock = manager.clock
        client_pool = pool or ActionsClientPool(
            system_info=SystemInfo(subsystem=GITHUB_SUBSYSTEM, version=settings.build_version),
            clock=clock,
            transport=GITHUB_TRANSPORT,
        )
        # Values from a vault live at most half a refresh interval, so each refresh sees the vault; the allow
        # list as long, so a grant withdrawn by the admin stops the next refresh.
        vault_ttl = min(SECRET_TTL_SECONDS, settings.vault_refresh_interval / 2)
        references = ReferencedObjectWatch(kube, clock=clock)
        group_watch = GroupSecretWatch(kube, namespace=settings.controller_namespace, clock=clock)
        return cls(
            kube=kube,
            manager=manager,
            settings=settings,
            github=GitHubAccess(
                kube,
                pool=client_pool,
                environ=environ,
                vault_secrets=KeyVaultSecrets(ttl=vault_ttl, environ=environ),
                vault_allow_list=_vault_allow_list(kube, settings, ttl=vault_ttl),
                versions=references,
            ),
            events=events or EventRecorder(kube, component=EVENT_COMPONENT, clock=clock),
            metrics=ControllerMetrics(manager.registry, enabled=settings.metrics_enabled),
            clock=clock,
            references=references,
            group_secrets=GroupConfigSecrets(kube, group_watch, namespace=settings.controller_namespace),
            group_secret_watch=group_watch,
            traces=traces,
        )


def _vault_allow_list(kube: KubeClient, settings: ControllerSettings, *, ttl: float) -> VaultAllowListSource | None:
    """The vault allow list's source when the controller names one (docs/github.md), read at most every ``ttl``."""
    if not settings.vault_allow_list:
        return None
    return VaultAllowListSource(kube, namespace=settings.controller_namespace, name=settings.vault_allow_list, ttl=ttl)
