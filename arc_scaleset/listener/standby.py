"""The standby listener: a warmed-up listener process that takes the scale set over as soon as its peer dies
(docs/listener.md, "Standby listener"; the names: :mod:`arc_scaleset.api.listener_standby`).

``arc-scaleset listener`` runs this instead of :meth:`ListenerApp.run` when its pod names a Lease
(``LISTENER_STANDBY_LEASE``). The process builds everything first (config, credentials, clients) and fetches
its admin token, then:

* **standing by**: it watches the Lease and its peer's pod (each by name: the only grants it has) and takes the
  Lease when :func:`~.standby_decision.next_step` says so -- at once when the holder is its dead peer or has
  released it, after the lease duration when the holder merely stopped renewing. Nothing else but keeping its
  admin token fresh (:mod:`.standby_token`): no session, no poll, no write but that one Lease update.
  ``/readyz`` and ``/healthz`` say "standing by"; ``gha_listener_active`` is 0.
* **active**: it runs the listener as a pod without a standby does (which resumes the session its predecessor
  recorded) and renews the Lease every ``retry_period``. When it loses the Lease (no renewal for
  ``renew_deadline``, or another holder) it stops acting at once, leaves session and state to its successor and
  exits 1. When it stops for any other reason (SIGTERM, a fatal error) it releases the Lease after it has stopped
  acting, so the standby takes over at its next event instead of after a lease duration.

The Lease's rules and writes are leader election's (:class:`~arc_scaleset.kube.leader_election.LeaderElector`,
client-go's rules); this module only adds what the peer's pod tells.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from arc_scaleset.api.listener_standby import PEER_POD_ENV, STANDBY_LEASE_ENV
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.leader_election import LeaderElectionConfig, LeaderElector
from arc_scaleset.kube.resources import LEASES, PODS, Resource
from arc_scaleset.listener.app import ListenerApp
from arc_scaleset.listener.errors import FatalListenerError, Stopping
from arc_scaleset.listener.standby_decision import PeerSight, TakeReason, next_step
from arc_scaleset.listener.standby_token import keep_admin_token_fresh
from arc_scaleset.listener.stop import StopSignal
from arc_scaleset.tasks import cancel_and_wait

log = logging.getLogger(__name__)

Seen = Callable[[Mapping[str, Any] | None], None]
Snapshot = tuple[dict[str, Any] | None, str]
"""An object as read (``None``: it does not exist) and the resourceVersion to watch it from ("": nothing to
watch yet)."""


@dataclass(frozen=True)
class StandbySettings:
    """The Lease, this pod's name (the Lease's holder identity) and its peer's, all in the client's namespace (the
    pod's own, in a cluster)."""

    lease: str
    identity: str
    peer: str

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> StandbySettings:
        """The settings the AutoscalingListener controller put in the pod's environment; a missing peer is a
        :class:`FatalListenerError` (the pod spec is wrong, and guessing would risk two active listeners)."""
        peer = environ.get(PEER_POD_ENV, "")
        if not peer:
            raise FatalListenerError(f"{STANDBY_LEASE_ENV} is set but {PEER_POD_ENV} is not: no peer pod to watch")
        identity = environ.get("HOSTNAME") or socket.gethostname()
        return cls(lease=environ[STANDBY_LEASE_ENV], identity=identity, peer=peer)

    def election(self) -> LeaderElectionConfig:
        """client-go's timing: renewed every 2 s, lost after 10 s without a renewal, expired after 15 s."""
        return LeaderElectionConfig(name=self.lease, identity=self.identity)


class Standby:
    """Waits until this process may take the Lease, then takes it (:meth:`take_lease`)."""

    def __init__(self, kube: KubeClient, settings: StandbySettings, *, clock: Clock = REAL_CLOCK) -> None:
        self._kube = kube
        self.settings = settings
        self.elector = LeaderElector(kube, settings.election(), clock=clock)
        self._clock = clock
        self._peer = PeerSight()
        self._changed = asyncio.Event()

    async def take_lease(self, stop: StopSignal) -> TakeReason:
        """Follow the Lease and the peer's pod until the Lease is this process's; why it was taken.
        Raises :class:`Stopping` when ``stop`` is set first."""
        followers = [
            asyncio.create_task(self._follow(LEASES, self.settings.lease, self._read_lease, self._saw_lease)),
            asyncio.create_task(self._follow(PODS, self.settings.peer, self._read_peer, self._saw_peer)),
        ]
        try:
            return await stop.race(self._take_when_allowed())
        finally:
            for task in followers:
                task.cancel()
            await asyncio.gather(*followers, return_exceptions=True)

    async def _take_when_allowed(self) -> TakeReason:
        retry_period = self.elector.config.retry_period
        while True:
            self._changed.clear()
            step = next_step(
                self.elector.observation,
                identity=self.settings.identity,
                peer=self.settings.peer,
                peer_dead=self._peer.death,
                now=self._clock.monotonic(),
                default_lease_duration=self.elector.config.lease_duration,
            )
            if step.take is None:
                await self._next_change(within=step.recheck_in)
                continue
            if await self.elector.try_take(dead_holder=step.dead_holder):
                return step.take
            # Someone wrote the Lease first (it is read again), or the API failed: decide again on the next
            # change, and try again after a retry period at the latest.
            await self._next_change(within=retry_period)

    async def _next_change(self, *, within: float | None) -> None:
        waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._changed.wait())}
        if within is not None:
            waits.add(asyncio.ensure_future(self._clock.sleep(max(0.0, within))))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    def _saw_lease(self, lease: Mapping[str, Any] | None) -> None:
        if lease is None:  # a deleted Lease: its controller is tearing the pair down; nothing to take
            return
        before = self.elector.observation
        self.elector.saw(lease)
        if self.elector.observation is not before:
            self._peer = self._peer.lease_changed()
        self._changed.set()

    def _saw_peer(self, pod: Mapping[str, Any] | None) -> None:
        self._peer = self._peer.saw_pod(pod)
        self._changed.set()

    async def _read_lease(self) -> Snapshot:
        try:
            lease = await self._kube.get(LEASES, self.settings.lease, namespace=self.elector.namespace)
        except NotFound:
            return None, ""  # not created yet: read again after a retry period
        return lease, str(lease["metadata"].get("resourceVersion", ""))

    async def _read_peer(self) -> Snapshot:
        # A list by name (not a get): it gives a version to watch from even while the pod does not exist.
        pods = await self._kube.list(
            PODS, namespace=self.elector.namespace, field_selector=f"metadata.name={self.settings.peer}", limit=None
        )
        return (pods.items[0] if pods.items else None), pods.resource_version

    async def _follow(self, resource: Resource, name: str, read: Callable[[], Awaitable[Snapshot]], seen: Seen) -> None:
        """Report ``name`` to ``seen`` as read, then as watched; read again whenever the watch ends or fails.

        A watch that brought events (a bookmark at least) ran its course: read and watch again at once. Anything
        else (a failure, nothing to watch from, a watch that ended without a single event) waits a retry period
        first, so an API server or a proxy that ends every watch at once is not called in a tight loop.
        """
        while True:
            try:
                obj, version = await read()
                seen(obj)
                if version and await self._watch(resource, name, version, seen):
                    continue
            except Exception as exc:  # the next read starts over; the Lease rules bound what a blind spell costs
                log.warning(
                    "standby listener: cannot follow %s %s: %s", resource.kind, name, " ".join(str(exc).split())
                )
            await self._clock.sleep(self.elector.config.retry_period)

    async def _watch(self, resource: Resource, name: str, version: str, seen: Seen) -> bool:
        """Report the watch's events to ``seen`` until it ends; whether any event (a bookmark too) came."""
        events = self._kube.watch(
            resource, namespace=self.elector.namespace, resource_version=version, field_selector=f"metadata.name={name}"
        )
        progressed = False
        async for event in events:
            progressed = True
            if event.type in ("ADDED", "MODIFIED"):
                seen(event.object)
            elif event.type == "DELETED":
                seen(None)
        return progressed


async def run_standby(app: ListenerApp, kube: KubeClient, settings: StandbySettings) -> int:
    """Stand by until this process holds the Lease, then run ``app`` while holding it; the exit code."""
    app.health.stand_by()
    app.metrics.record_active(False)
    standby = Standby(kube, settings)
    log.info("standing by", extra={"lease": settings.lease, "peer": settings.peer, "identity": settings.identity})
    try:
        expires_at = await warm_up(app)
        # Kept fresh while standing by, so the takeover never waits for a token (standby_token.py).
        keeper = asyncio.create_task(keep_admin_token_fresh(app.actions, app.stop.clock, expires_at))
        try:
            reason = await standby.take_lease(app.stop)
        finally:
            await cancel_and_wait(keeper)
    except Stopping:
        log.info("standby listener stopped")
        return 0
    log.info("took over the scale set", extra={"reason": str(reason), "lease": settings.lease})
    return await run_active(app, standby.elector)


async def warm_up(app: ListenerApp) -> dt.datetime | None:
    """What the session will need and may be had without disturbing the active listener: the admin token (and
    the connections that fetch it); when it expires (``None``: it could not be fetched). A failure is only
    logged: the keeper tries again, and the session fetches it anyway."""
    try:
        connection = await app.stop.race(app.actions.admin_connection())
    except Stopping:
        raise
    except Exception as exc:
        log.warning("standby listener: could not fetch the admin token ahead", extra={"error": type(exc).__name__})
        return None
    log.info("standby listener: admin token fetched ahead", extra={"expires_at": connection.expires_at.isoformat()})
    return connection.expires_at


async def run_active(app: ListenerApp, elector: LeaderElector) -> int:
    """Run ``app`` while ``elector`` holds the Lease: release it once ``app`` has stopped (after the renewal in
    flight, if any: :meth:`~LeaderElector.step_down`); when the Lease is lost first, stop ``app`` without
    touching its session or state, and return 1."""
    app.health.became_active()
    app.metrics.record_active(True)
    running = asyncio.create_task(app.run())
    holding = asyncio.create_task(elector.hold())
    await asyncio.wait({running, holding}, return_when=asyncio.FIRST_COMPLETED)
    if running.done():
        # After a renewal in flight, if any: released over an older version, the Lease would stay held.
        await elector.step_down(holding)
        return running.result()
    app.metrics.record_active(False)
    app.superseded = True
    app.stop.set()
    # The successor may take the Lease once it expires, lease_duration after the last renewal: renew_deadline
    # has passed, so what is left is the margin to stop in. A message being handled is finished within it, if
    # it can be; else it is abandoned (its jobs are on the cursor the successor reads).
    config = elector.config
    try:
        await asyncio.wait_for(running, timeout=config.lease_duration - config.renew_deadline)
    except TimeoutError:
        log.warning("the listener did not stop within the lease's margin; abandoned")
    log.error("listener stopped: lost the standby lease; another listener holds the scale set")
    return 1
