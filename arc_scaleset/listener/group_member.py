"""One member of a shared listener: one scale set's listener, run inside the group's process (docs/listener.md,
"Shared listener (process)").

A member is today's :class:`~arc_scaleset.listener.app.ListenerApp`, built from its ``config.json`` with the
group's shared parts (:class:`MemberContext`) and run until it is stopped. Where a listener of one scale set
would exit (a fatal config, credentials read from no vault, credentials refused twice, a bug), a member logs why,
waits the listener's one backoff (:func:`~arc_scaleset.listener.errors.retry_backoff`) and starts again, so its
failure stays its own: the other members and the process go on. What a member reports on its
EphemeralRunnerSet's state annotation is exactly what the listener of one scale set reports.

A config that cannot be read is not retried (it cannot change without the Secret changing, which replaces the
member): the member logs the problems and waits to be stopped.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from arc_scaleset.api.listener_config import ListenerConfig, ListenerConfigError
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.github import ProxySettings, SharedSessions
from arc_scaleset.listener.app import ListenerApp, Timing, build_listener
from arc_scaleset.listener.errors import FatalListenerError, Stopping, retry_backoff
from arc_scaleset.listener.group_metrics import MemberMetrics
from arc_scaleset.listener.group_plan import MemberProgress, Wanted
from arc_scaleset.listener.scaler import ResourcePatcher
from arc_scaleset.listener.stop import StopSignal
from arc_scaleset.listener.vault import VaultCredentialsError, with_vault_credentials
from arc_scaleset.observability.logging import log_context, register_secret

log = logging.getLogger("arc_scaleset.listener")


@dataclass(kw_only=True)
class MemberContext:
    """What every member of one process shares: nothing in it carries a scale set's identity.

    ``kube``: the one Kubernetes client (any :class:`~arc_scaleset.listener.scaler.ResourcePatcher`); ``owner``:
    the session owner name (the pod's hostname); ``metrics``: the collector the process serves; ``http``: the
    GitHub connection pools, shared by the members whose CA is the same (the owner of the context closes them).
    """

    kube: ResourcePatcher
    owner: str
    metrics: MemberMetrics = field(default_factory=MemberMetrics)
    timing: Timing = field(default_factory=Timing)
    clock: Clock = REAL_CLOCK
    environ: Mapping[str, str] | None = None
    http: SharedSessions = field(default_factory=SharedSessions)


class Member:
    """A member named ``name`` (its AutoscalingListener's) running the config ``wanted``: :meth:`start` it once,
    :meth:`stop` it once."""

    def __init__(self, name: str, wanted: Wanted, context: MemberContext) -> None:
        self.name = name
        self.digest = wanted.digest
        self._context = context
        self._stop = StopSignal(clock=context.clock)
        self._started = context.clock.monotonic()
        self._last_poll: float | None = None
        self._app: ListenerApp | None = None
        self._task: asyncio.Task[None] | None = None
        self.config: ListenerConfig | None = None
        self.config_error: str = ""
        try:
            self.config = ListenerConfig.from_json(wanted.raw, source=f"member {name}")
        except ListenerConfigError as exc:
            self.config_error = str(exc)

    def __repr__(self) -> str:
        return f"Member({self.name!r}, digest={self.digest[:12]!r})"

    @property
    def app(self) -> ListenerApp | None:
        """The listener running now (``None`` between two runs)."""
        return self._app

    @property
    def progress(self) -> MemberProgress:
        app = self._app
        last_poll = app.health.last_poll if app is not None and app.health.last_poll is not None else self._last_poll
        return MemberProgress(started=self._started, last_poll=last_poll)

    @property
    def session_held(self) -> bool:
        return self._app is not None and self._app.health.session_id is not None

    def start(self) -> None:
        # The task carries the member's name on every log line it writes (contextvars are copied into it).
        with log_context(member=self.name):
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"listener member {self.name}")

    async def stop(self) -> None:
        """Stop the member: its listener deletes its session and records its final state; waits for both."""
        self._stop.set()
        if self._app is not None:
            self._app.stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        self._context.metrics.remove(self.name)

    async def _run(self) -> None:
        if self.config is None:
            log.error(f"listener member cannot start: {self.config_error}")
            await self._stop.wait()
            return
        backoff = retry_backoff()
        while not self._stop.is_set():
            polled = await self._run_once(self.config)
            if self._stop.is_set():
                return
            if polled:
                backoff.reset()  # it worked for a while: the next failure is a new story
            delay = backoff.next_delay()
            log.warning(f"listener member stopped; starting it again in {delay:.1f}s")
            try:
                await self._stop.sleep(delay)
            except Stopping:
                return

    async def _run_once(self, config: ListenerConfig) -> bool:
        """Build and run the listener once; whether it polled successfully at least once. Never raises."""
        app = await self._build(config)
        if app is None:
            return False
        self._app = app
        context = self._context
        context.metrics.add(
            self.name,
            name=config.ephemeral_runner_set_name,
            namespace=config.ephemeral_runner_set_namespace,
            registry=app.metrics.registry,
        )
        try:
            if self._stop.is_set():
                return False  # stopped while it was being built: nothing to run, no session to delete
            await app.run()
        except Exception:
            # A bug, not a failure the listener knows: one redacted record with the traceback, and this member
            # alone starts again (a listener of one scale set would exit 1 and be restarted by the kubelet).
            log.exception("listener member crashed")
        finally:
            self._last_poll = app.health.last_poll if app.health.last_poll is not None else self._last_poll
            self._app = None
            await app.aclose()
        return app.health.last_poll is not None

    async def _build(self, config: ListenerConfig) -> ListenerApp | None:
        context = self._context
        try:
            if config.vault_type:
                config = await with_vault_credentials(config)
            for secret in [
                *config.secrets(),
                *ProxySettings.from_env(os.environ if context.environ is None else context.environ).secret_values(),
            ]:
                register_secret(secret)
            return build_listener(
                config,
                kube=context.kube,
                environ=context.environ,
                owner=context.owner,
                clock=context.clock,
                timing=context.timing,
                shared_sessions=context.http,
                # A watch holds one of the shared client's connections for as long as it runs: one per member
                # would take them all (docs/listener.md, "Only what changed"); members patch every decision.
                watch_set=False,
            )
        except (VaultCredentialsError, FatalListenerError) as exc:
            log.error(f"listener member cannot start: {exc}")
        except Exception:
            log.exception("listener member crashed while starting")
        return None
