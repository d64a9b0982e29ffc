"""Wiring: one listener process's parts, built from a :class:`ListenerConfig`.

:func:`build_listener` turns a validated config into a ready :class:`ListenerApp` (the Actions-service
client, the Kubernetes client, the session keeper, the scaler, metrics, health, the loop). Problems the
config validation cannot see (an unparsable URL, a PEM that is not a key, no Kubernetes credentials)
become :class:`FatalListenerError` with a message that says what to fix.

:meth:`ListenerApp.run` runs the loop and, whatever happens, deletes the session before it returns: it
is used by ``arc-scaleset listener`` and by the integration tests alike.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from arc_scaleset.api.listener_config import ListenerConfig
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.github import (
    ActionsClient,
    GitHubConfig,
    InvalidConfigURL,
    InvalidCredentials,
    ProxySettings,
    SystemInfo,
    credentials_from_secret_data,
    parse_config_url,
)
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.listener.errors import FatalListenerError
from arc_scaleset.listener.health import DEFAULT_LIVENESS_WINDOW, Health
from arc_scaleset.listener.loop import Listener, LoopSettings
from arc_scaleset.listener.metrics import ListenerMetrics, ScaleSetIdentity
from arc_scaleset.listener.scaler import ResourcePatcher, Scaler
from arc_scaleset.listener.session import CredentialStrikes, SessionKeeper, session_owner
from arc_scaleset.listener.stop import StopSignal

log = logging.getLogger(__name__)

SUBSYSTEM = "ghalistener"


@dataclass(frozen=True, kw_only=True)
class Timing:
    """Time bounds of the process, in seconds.

    The client's own retries (``client_retries`` of at most ``request_timeout`` each) must fit in
    ``call_timeout``; the long poll's client timeout (above the service's ~50 s hold) in ``poll_timeout``.
    ``session_delete_timeout`` keeps shutdown inside the pod's grace period (ARC's pods get 60 s).
    """

    request_timeout: float = 15.0
    long_poll_timeout: float = 70.0
    client_retries: int = 2
    call_timeout: float = 60.0
    poll_timeout: float = 90.0
    session_delete_timeout: float = 10.0
    liveness_window: float = DEFAULT_LIVENESS_WINDOW


@dataclass
class ListenerApp:
    """A built listener: run it once with :meth:`run`, then :meth:`aclose` it."""

    config: ListenerConfig
    actions: ActionsClient
    kube: ResourcePatcher
    sessions: SessionKeeper
    listener: Listener
    health: Health
    metrics: ListenerMetrics
    stop: StopSignal
    timing: Timing
    _owned_kube: KubeClient | None = None

    async def run(self) -> int:
        """Run until shutdown (0) or a fatal failure (1); the session is deleted on every way out."""
        try:
            await self.listener.run()
        except FatalListenerError as exc:
            log.error(f"listener stopped: {exc}")
            return 1
        finally:
            await self.sessions.close(within=self.timing.session_delete_timeout)
        log.info("listener stopped")
        return 0

    async def aclose(self) -> None:
        await self.actions.aclose()
        if self._owned_kube is not None:
            await self._owned_kube.close()


def scale_set_identity(config: ListenerConfig, github: GitHubConfig) -> ScaleSetIdentity:
    """The scale-set metric labels: enterprise/organization/repository from the URL, ERS name/namespace."""
    return ScaleSetIdentity(
        enterprise=github.enterprise,
        organization=github.organization,
        repository=github.repository,
        name=config.ephemeral_runner_set_name,
        namespace=config.ephemeral_runner_set_namespace,
    )


def build_listener(
    config: ListenerConfig,
    *,
    kube: ResourcePatcher | None = None,
    kubeconfig: str | None = None,
    environ: Mapping[str, str] | None = None,
    owner: str | None = None,
    clock: Clock = REAL_CLOCK,
    timing: Timing | None = None,
) -> ListenerApp:
    """Build every part of the listener. ``kube`` defaults to a client from the environment (in-cluster,
    then ``KUBECONFIG``, then ``~/.kube/config``, or ``kubeconfig`` when given)."""
    env = os.environ if environ is None else environ
    timing = timing or Timing()
    try:
        github = parse_config_url(config.configure_url, environ=env)
    except InvalidConfigURL as exc:
        raise FatalListenerError(f"configure_url: {exc}") from None
    try:
        credentials = credentials_from_secret_data(config.credential_data())
    except InvalidCredentials as exc:
        raise FatalListenerError(f"GitHub credentials: {exc}") from None

    owned_kube: KubeClient | None = None
    if kube is None:
        try:
            owned_kube = KubeClient.from_environment(kubeconfig, request_timeout=timing.request_timeout, clock=clock)
        except Exception as exc:  # any reason we cannot talk to Kubernetes is fatal and must be readable
            raise FatalListenerError(f"no usable Kubernetes credentials: {exc}") from None
        kube = owned_kube

    try:
        actions = ActionsClient(
            github,
            credentials,
            system_info=SystemInfo(scale_set_id=config.runner_scale_set_id, subsystem=SUBSYSTEM),
            root_ca_pem=config.server_root_ca or None,
            proxy=ProxySettings.from_env(env),
            clock=clock,
            request_timeout=timing.request_timeout,
            long_poll_timeout=timing.long_poll_timeout,
            retry_max=timing.client_retries,
        )
    except ValueError as exc:
        raise FatalListenerError(f"server_root_ca: {exc}") from None

    stop = StopSignal(clock=clock)
    strikes = CredentialStrikes()
    health = Health(clock=clock, liveness_window=timing.liveness_window)
    sessions = SessionKeeper(
        actions,
        scale_set_id=config.runner_scale_set_id,
        owner=owner or session_owner(),
        stop=stop,
        strikes=strikes,
        call_timeout=timing.call_timeout,
        on_attempt=health.session_attempt,
    )
    health.session_held = lambda: sessions.held
    metrics = ListenerMetrics(scale_set=scale_set_identity(config, github), config=config.metrics)
    metrics.record_static(min_runners=config.min_runners, max_runners=config.max_runners)
    scaler = Scaler(
        kube,
        namespace=config.ephemeral_runner_set_namespace,
        ephemeral_runner_set=config.ephemeral_runner_set_name,
        min_runners=config.min_runners,
        max_runners=config.max_runners,
    )
    listener = Listener(
        actions,
        sessions=sessions,
        scaler=scaler,
        settings=LoopSettings(
            scale_set_id=config.runner_scale_set_id,
            max_runners=config.max_runners,
            poll_timeout=timing.poll_timeout,
            call_timeout=timing.call_timeout,
        ),
        stop=stop,
        health=health,
        strikes=strikes,
        metrics=metrics,
    )
    return ListenerApp(
        config=config,
        actions=actions,
        kube=kube,
        sessions=sessions,
        listener=listener,
        health=health,
        metrics=metrics,
        stop=stop,
        timing=timing,
        _owned_kube=owned_kube,
    )
