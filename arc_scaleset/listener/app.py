"""Wiring: one listener process's parts, built from a :class:`ListenerConfig`.

:func:`build_listener` turns a validated config into a ready :class:`ListenerApp` (the Actions-service
client, the Kubernetes client, the session keeper, the scaler, metrics, health, the loop). Problems the
config validation cannot see (an unparsable URL, a PEM that is not a key, no Kubernetes credentials)
become :class:`FatalListenerError` with a message that says what to fix.

:meth:`ListenerApp.run` reads the state the previous listener recorded on the EphemeralRunnerSet (the
session it may have left behind), runs the loop and, whatever happens, deletes the session and records the
final state before it returns: it is used by ``arc-scaleset listener`` and by the integration tests alike.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from arc_scaleset.api.listener_config import ListenerConfig
from arc_scaleset.api.listener_cursor import resumable
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.github import (
    ActionsClient,
    GitHubConfig,
    InvalidConfigURL,
    InvalidCredentials,
    ProxySettings,
    SharedSessions,
    SystemInfo,
    TransportOptions,
    credentials_from_fields,
    parse_config_url,
)
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.listener.errors import FatalListenerError, retry_backoff
from arc_scaleset.listener.health import DEFAULT_LIVENESS_WINDOW, POLL_BOUND, Health
from arc_scaleset.listener.loop import BOOKKEEPING_CONCURRENCY, Listener, LoopSettings
from arc_scaleset.listener.metrics import ListenerMetrics, ScaleSetIdentity
from arc_scaleset.listener.scaler import ResourcePatcher, Scaler
from arc_scaleset.listener.session import CredentialStrikes, SessionKeeper, session_owner
from arc_scaleset.listener.state_report import StateReporter
from arc_scaleset.listener.stop import StopSignal

log = logging.getLogger(__name__)

SUBSYSTEM = "ghalistener"

KUBE_CONNECTIONS = BOOKKEEPING_CONCURRENCY + 2
"""The listener's Kubernetes requests at once: its started-job bookkeeping, the EphemeralRunnerSet patch that
publishes a decision and the state report, so a decision never waits for a connection. A pool sized for the
controller (32) let a burst of jobs open one more TLS connection per request in flight, about 120 KiB each
for as long as it stays pooled."""


@dataclass(frozen=True, kw_only=True)
class Timing:
    """Time bounds of the process, in seconds.

    The client's own retries (``client_retries`` of at most ``request_timeout`` each) must fit in
    ``call_timeout``; the long poll's client timeout (above the service's ~50 s hold) in ``poll_timeout``.
    ``session_delete_timeout``, ``drain_timeout`` (calls still pending beside the loop) and
    ``state_write_timeout`` (the final state on the EphemeralRunnerSet) keep shutdown inside the pod's grace
    period (ARC's pods get 60 s). ``liveness_window``: ``/healthz`` fails after that long without a
    successful poll (:data:`~arc_scaleset.listener.health.DEFAULT_LIVENESS_WINDOW`).
    """

    request_timeout: float = 15.0
    long_poll_timeout: float = 70.0
    client_retries: int = 2
    call_timeout: float = 60.0
    poll_timeout: float = POLL_BOUND
    session_delete_timeout: float = 10.0
    drain_timeout: float = 5.0
    state_write_timeout: float = 5.0
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
    reporter: StateReporter
    _owned_kube: KubeClient | None = None
    superseded: bool = False
    """Set (before :attr:`stop`) when this process lost the standby Lease (docs/listener.md, "Standby listener"):
    its successor may already have resumed the session and record its own state, so :meth:`run` leaves both
    alone on its way out, and returns 1."""

    @property
    def kube_client(self) -> KubeClient | None:
        """The Kubernetes client this app made for itself (``None`` when one was given to it)."""
        return self._owned_kube

    async def run(self) -> int:
        """Run until shutdown (0) or a fatal failure (1); the session is deleted on every way out, unless
        :attr:`superseded`."""
        try:
            await self.prepare()
            await self.listener.run()
        except FatalListenerError as exc:
            log.error(f"listener stopped: {exc}")
            return 1
        finally:
            await self._leave()
        if self.superseded:
            return 1
        log.info("listener stopped")
        return 0

    async def _leave(self) -> None:
        if self.superseded:
            await self.reporter.discard()
            return
        await self.sessions.close(within=self.timing.session_delete_timeout)
        self.health.stopped()
        await self.reporter.aclose(within=self.timing.state_write_timeout)

    async def prepare(self) -> None:
        """Read the predecessor's record while the admin connection the session needs is made: the two do not
        depend on each other, and a replacement's time to its first poll is time nobody takes the scale set's jobs
        (docs/listener.md, "Leaving no gap"). A connection that fails is left to the session, which classifies
        the failure and retries it as it does every other."""
        connecting = asyncio.ensure_future(self.actions.admin_connection())
        try:
            await self.take_over_from_predecessor()
            await asyncio.wait([connecting])
        finally:
            connecting.cancel()  # only when this ended early (stopped, or a bug): nothing waits for it then
        if not connecting.cancelled():
            connecting.exception()  # retrieved, so asyncio does not log it: the session sees the failure again

    async def take_over_from_predecessor(self) -> None:
        """Note the session the set's previous listener recorded, so a 409 ends it (docs/listener.md), and where
        it had got to in it, so that session is resumed while it is alive.

        Only a session recorded for this scale set is taken: a set re-registered on GitHub has a new ID,
        and a session of the old one is none of this listener's business.
        """
        recorded, cursor = await self.reporter.read_record(within=self.timing.state_write_timeout)
        if recorded is None or recorded.session_id is None:
            return
        if recorded.scale_set_id != self.config.runner_scale_set_id:
            log.info(
                "the recorded session belongs to another scale set ID; leaving it alone",
                extra={"recorded_scale_set_id": recorded.scale_set_id, "session_id": recorded.session_id},
            )
            return
        self.sessions.predecessor = recorded.session_id
        self.health.recorded_session_id = recorded.session_id
        if resumable(cursor, recorded, scale_set_id=self.config.runner_scale_set_id):
            self.sessions.resume_from = cursor  # docs/listener.md, "Leaving no gap"

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
    shared_sessions: SharedSessions | None = None,
) -> ListenerApp:
    """Build every part of the listener. ``kube`` defaults to a client from the environment (in-cluster,
    then ``KUBECONFIG``, then ``~/.kube/config``, or ``kubeconfig`` when given). ``shared_sessions``: the HTTP
    connection pools of a shared listener's members (the caller closes them); a pool of its own otherwise."""
    env = os.environ if environ is None else environ
    timing = timing or Timing()
    try:
        github = parse_config_url(config.configure_url, environ=env)
    except InvalidConfigURL as exc:
        raise FatalListenerError(f"configure_url: {exc}") from None
    try:
        # The config model applied the one credential rule (api/credentials.py) when it was read.
        credentials = credentials_from_fields(config.app_config())
    except InvalidCredentials as exc:
        raise FatalListenerError(f"GitHub credentials: {exc}") from None

    owned_kube: KubeClient | None = None
    if kube is None:
        try:
            owned_kube = KubeClient.from_environment(
                kubeconfig, request_timeout=timing.request_timeout, clock=clock, connection_limit=KUBE_CONNECTIONS
            )
        except Exception as exc:  # any reason we cannot talk to Kubernetes is fatal and must be readable
            raise FatalListenerError(f"no usable Kubernetes credentials: {exc}") from None
        kube = owned_kube

    try:
        actions = ActionsClient(
            github,
            credentials,
            system_info=SystemInfo(scale_set_id=config.runner_scale_set_id, subsystem=SUBSYSTEM),
            transport=TransportOptions(
                root_ca_pem=config.server_root_ca or None,
                proxy=ProxySettings.from_env(env),
                request_timeout=timing.request_timeout,
                retry_max=timing.client_retries,
            ),
            clock=clock,
            long_poll_timeout=timing.long_poll_timeout,
            shared_sessions=shared_sessions,
        )
    except ValueError as exc:
        raise FatalListenerError(f"server_root_ca: {exc}") from None

    stop = StopSignal(clock=clock)
    strikes = CredentialStrikes()
    owner = owner or session_owner()
    reporter = StateReporter(
        kube,
        namespace=config.ephemeral_runner_set_namespace,
        ephemeral_runner_set=config.ephemeral_runner_set_name,
        clock=clock,
        call_timeout=timing.call_timeout,
    )
    health = Health(
        clock=clock,
        liveness_window=timing.liveness_window,
        scale_set_id=config.runner_scale_set_id,
        owner=owner,
        on_change=reporter.report,
    )
    sessions = SessionKeeper(
        actions,
        scale_set_id=config.runner_scale_set_id,
        owner=owner,
        stop=stop,
        backoff=retry_backoff(),
        health=health,
        strikes=strikes,
        call_timeout=timing.call_timeout,
    )
    metrics = ListenerMetrics(scale_set=scale_set_identity(config, github), config=config.metrics)
    metrics.record_static(min_runners=config.min_runners, max_runners=config.max_runners)
    scaler = Scaler(
        kube,
        namespace=config.ephemeral_runner_set_namespace,
        ephemeral_runner_set=config.ephemeral_runner_set_name,
        min_runners=config.min_runners,
        max_runners=config.max_runners,
        schedule=config.min_runners_schedule,
        clock=clock,
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
            drain_timeout=timing.drain_timeout,
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
        reporter=reporter,
        _owned_kube=owned_kube,
    )
