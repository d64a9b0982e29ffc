"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's rules.

* A candidate polls the Lease every ``retry_period`` (stretched by up to 120 % jitter). It takes the lease
  when nobody holds it (no Lease, or an empty ``holderIdentity`` after a release), or when the record has
  not changed for ``leaseDurationSeconds`` **as measured by the candidate's own monotonic clock** since it
  last saw the record change. Clocks of different machines are never compared: ``renewTime`` is only
  data whose change is observed.
* Every write is an optimistic-concurrency update (the Lease's resourceVersion): of two candidates that
  decide at once, one wins and the other gets a Conflict and keeps waiting.
* ``leaseTransitions`` is incremented whenever the holder changes (a takeover, or an acquire after a
  release); ``acquireTime`` is when the current holder took it.
* The leader renews every ``retry_period``, as client-go does since its optimistic renewal: straight over the
  Lease as it last wrote it (one PUT) while its own lease is still valid by its clock; only when that write
  fails does it read the Lease and decide again (GET, then PUT). If no renewal succeeds for ``renew_deadline``
  -- or the Lease shows another holder -- leadership is lost and :meth:`LeaderElector.hold` returns; the caller
  must stop acting as leader at once (the manager cancels its controllers and exits; see ``manager.py``).
* On a graceful stop the leader releases the Lease (empty holder, 1 s duration), so a waiting candidate
  takes over at its next poll instead of after a full lease duration. The release is written over the newest
  version that still names the leader: after a renewal in flight (:meth:`LeaderElector.step_down`), and read
  again when a renewal whose answer was lost makes it conflict.

The decisions are pure functions (:func:`observe`, :func:`may_acquire`, :func:`next_record`, tested without
an API); :class:`LeaderElector` is the loop that applies them to the real Lease.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
import random
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import AlreadyExists, Conflict, NotFound
from arc_scaleset.kube.resources import LEASES
from arc_scaleset.kube.runtime_metrics import RuntimeMetrics
from arc_scaleset.kube.views import ObjectView

log = logging.getLogger(__name__)

LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
_JITTER_FACTOR = 1.2  # client-go's JitterFactor for the acquire loop


def default_identity() -> str:
    """``<hostname>_<uuid>``: unique per process even when pods share a hostname."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Where the Lease is and how elections are timed (client-go's defaults: 15 s / 10 s / 2 s).

    ``namespace=None`` means the client's default namespace. ``lease_duration`` is written to the Lease
    as whole seconds (rounded up).
    """

    name: str
    namespace: str | None = None
    identity: str = field(default_factory=default_identity)
    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs a non-empty identity")
        if not self.lease_duration > self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if not self.renew_deadline > _JITTER_FACTOR * self.retry_period:
            raise ValueError(f"renew_deadline must be greater than {_JITTER_FACTOR} * retry_period")
        if self.retry_period <= 0:
            raise ValueError("retry_period must be positive")

    @property
    def lease_duration_seconds(self) -> int:
        return max(1, math.ceil(self.lease_duration))


@dataclass(frozen=True)
class LeaseRecord:
    """The election-relevant part of a Lease's spec."""

    holder_identity: str = ""
    lease_duration_seconds: int | None = None
    acquire_time: dt.datetime | None = None
    renew_time: dt.datetime | None = None
    lease_transitions: int = 0

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        spec = ObjectView(lease).spec
        duration = spec.get("leaseDurationSeconds")
        return cls(
            holder_identity=spec.get("holderIdentity") or "",
            lease_duration_seconds=int(duration) if duration is not None else None,
            acquire_time=_parse_micro_time(spec.get("acquireTime")),
            renew_time=_parse_micro_time(spec.get("renewTime")),
            lease_transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"holderIdentity": self.holder_identity, "leaseTransitions": self.lease_transitions}
        if self.lease_duration_seconds is not None:
            spec["leaseDurationSeconds"] = self.lease_duration_seconds
        if self.acquire_time is not None:
            spec["acquireTime"] = _format_micro_time(self.acquire_time)
        if self.renew_time is not None:
            spec["renewTime"] = _format_micro_time(self.renew_time)
        return spec


@dataclass(frozen=True)
class Observation:
    """The last Lease record a candidate saw, and when (its own monotonic clock) it last saw it change."""

    record: LeaseRecord
    observed_at: float


def observe(previous: Observation | None, record: LeaseRecord, now: float) -> Observation:
    """The observation after reading ``record`` at ``now``: the clock restarts only when the record changed."""
    if previous is not None and previous.record == record:
        return previous
    return Observation(record, now)


def may_acquire(
    observation: Observation,
    *,
    identity: str,
    now: float,
    default_lease_duration: float = LEASE_DURATION,
    dead_holder: str = "",
) -> bool:
    """Whether ``identity`` may write itself into the Lease now (acquire, take over, or renew).

    Yes when it is free (empty holder), when ``identity`` already holds it, or when the record has not
    changed for the lease duration by the candidate's own clock. The holder's declared duration wins over
    the default (as in client-go), so holders with longer leases are respected. ``dead_holder``: an identity
    the caller knows has stopped acting (its process is seen dead, e.g. the standby listener's peer,
    docs/listener.md): its Lease may be taken at once, and only its, never a holder that replaced it meanwhile.
    """
    record = observation.record
    if not record.holder_identity or record.holder_identity in (identity, dead_holder):
        return True
    duration = record.lease_duration_seconds or default_lease_duration
    return now >= observation.observed_at + duration


def may_renew_unread(
    observation: Observation, *, identity: str, now: float, default_lease_duration: float = LEASE_DURATION
) -> bool:
    """Whether a leader may renew over the record it last wrote without reading the Lease first (client-go's
    optimistic renewal): only while that record names ``identity`` and is still valid by the leader's own clock.
    The write is still conditional on the Lease's resourceVersion, so a Lease anyone wrote since is never
    overwritten: the write conflicts, and the leader reads the Lease and decides again."""
    record = observation.record
    duration = record.lease_duration_seconds or default_lease_duration
    return record.holder_identity == identity and now < observation.observed_at + duration


def next_record(
    current: LeaseRecord | None, *, identity: str, now: dt.datetime, lease_duration_seconds: int
) -> LeaseRecord:
    """The record ``identity`` writes to hold the Lease: a renewal keeps ``acquireTime`` and
    ``leaseTransitions``; a change of holder (takeover, or acquire after a release) sets ``acquireTime``
    and counts one more transition; a brand-new Lease starts at 0 transitions."""
    if current is None:
        return LeaseRecord(identity, lease_duration_seconds, now, now, 0)
    if current.holder_identity == identity:
        return replace(current, lease_duration_seconds=lease_duration_seconds, renew_time=now)
    return LeaseRecord(identity, lease_duration_seconds, now, now, current.lease_transitions + 1)


def released_record(current: LeaseRecord, *, now: dt.datetime) -> LeaseRecord:
    """What a leader writes to give the Lease up: nobody holds it, and it expires in 1 s anyway."""
    return LeaseRecord("", 1, now, now, current.lease_transitions)


class LeadershipLostError(Exception):
    """Raised by the manager when it stops because this process is no longer the leader."""


class LeaderElector:
    """Runs an election for one identity on one Lease (see the module docstring for the rules).

    Use :meth:`acquire` (returns once leading), then :meth:`hold` (returns when leadership is lost), and
    :meth:`release` (or :meth:`step_down`, which first stops :meth:`hold`) on a graceful stop.
    """

    def __init__(
        self,
        client: KubeClient,
        config: LeaderElectionConfig,
        *,
        clock: Clock = REAL_CLOCK,
        metrics: RuntimeMetrics | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.namespace = config.namespace or client.namespace
        self._clock = clock
        self._metrics = metrics
        self._rng = rng or random.Random()
        self._observation: Observation | None = None
        self._lease: dict[str, Any] | None = None  # the Lease as last read or written, for the next update
        self._leading = False
        self._last_renewed = 0.0
        self._stop_holding = asyncio.Event()

    def __repr__(self) -> str:
        return f"LeaderElector({self.namespace}/{self.config.name}, identity={self.config.identity!r})"

    @property
    def identity(self) -> str:
        return self.config.identity

    @property
    def is_leader(self) -> bool:
        return self._leading

    @property
    def observed_holder(self) -> str:
        """The holder in the last record seen ("" when none, or nothing seen yet)."""
        return self._observation.record.holder_identity if self._observation else ""

    @property
    def observation(self) -> Observation | None:
        """The last Lease record seen and when it last changed (``None`` before the first read)."""
        return self._observation

    async def acquire(self) -> None:
        """Poll until this identity holds the Lease."""
        log.info("%r: waiting to acquire the lease", self)
        while not await self.try_take():
            await self._clock.sleep(self.config.retry_period * (1.0 + _JITTER_FACTOR * self._rng.random()))

    async def try_take(self, *, dead_holder: str = "") -> bool:
        """One acquisition round (:meth:`try_acquire_or_renew`); when it wins, this identity leads from now on
        (:meth:`hold` keeps it). ``dead_holder``: as in :func:`may_acquire`."""
        if not await self.try_acquire_or_renew(dead_holder=dead_holder):
            return False
        self._set_leading(True)
        self._last_renewed = self._clock.monotonic()
        log.info("%r: acquired the lease; now leading", self)
        return True

    def saw(self, lease: Mapping[str, Any]) -> None:
        """Note a version of the Lease seen elsewhere (a candidate that watches it instead of polling), so that
        the expiry clock runs from when the record last changed, as if this elector had read it itself."""
        self._observation = observe(self._observation, LeaseRecord.from_lease(lease), self._clock.monotonic())
        self._lease = dict(lease)

    async def hold(self) -> None:
        """Renew every ``retry_period`` until a renewal fails for ``renew_deadline`` (or another holder is
        seen); then mark leadership lost and return. Returns too, still leading, once :meth:`step_down` asks it
        to stop renewing (after the renewal in flight, if any)."""
        while True:
            if await self._asked_to_stop(within=self.config.retry_period):
                return
            deadline = self._last_renewed + self.config.renew_deadline
            remaining = deadline - self._clock.monotonic()
            renewed = False
            if remaining > 0:
                try:
                    # A renewal that hangs must not outlive the deadline: past it we may no longer lead.
                    async with asyncio.timeout(remaining):
                        renewed = await self.try_acquire_or_renew()
                except TimeoutError:
                    log.warning("%r: renewing the lease timed out", self)
            if renewed:
                self._last_renewed = self._clock.monotonic()
                continue
            other = self.observed_holder
            if other and other != self.identity:
                log.error("%r: the lease is now held by %s; leadership lost", self, other)
                break
            if self._clock.monotonic() >= deadline:
                log.error(
                    "%r: could not renew the lease within %.1fs; leadership lost", self, self.config.renew_deadline
                )
                break
        self._set_leading(False)

    async def step_down(self, holding: asyncio.Future[None]) -> None:
        """Stop renewing and give the Lease up (a graceful stop of a leader whose :meth:`hold` runs as
        ``holding``). A renewal in flight is let finish first, for up to ``retry_period``, so that the release is
        written over the Lease it renewed; past that it is cancelled (its write may still land: :meth:`release`
        then writes over what it finds)."""
        self._stop_holding.set()
        try:
            await asyncio.wait_for(holding, timeout=self.config.retry_period)
        except TimeoutError:
            log.warning("%r: a lease renewal was still unanswered at the stop; releasing over it", self)
        except Exception as exc:  # hold() itself does not raise; whatever it might, the release still goes
            log.warning("%r: holding the lease failed: %s", self, _one_line(exc))
        await self.release()

    async def release(self) -> None:
        """Give the Lease up if this identity holds it (best effort: errors are logged).

        The write is an optimistic-concurrency update over the Lease as last read or written. When it conflicts
        (a renewal whose answer never came, cancelled or timed out, landed first), the Lease is read again and
        released over that version, as long as it still names this identity; a Lease another holder took is left
        alone. All of it within ``renew_deadline``: the Lease expires on its own anyway.
        """
        if not self._leading or self._lease is None or self._observation is None:
            return
        self._set_leading(False)
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                released = await self._release_over(self._lease)
        except Exception as exc:  # best effort: the lease expires on its own anyway
            log.warning("%r: could not release the lease: %s", self, _one_line(exc))
            return
        if released:
            log.info("%r: released the lease", self)

    async def _release_over(self, lease: Mapping[str, Any]) -> bool:
        """Write the released record over ``lease``, then over each newer version that still names this
        identity; False when another holder has it (nothing of this process's to give up)."""
        while LeaseRecord.from_lease(lease).holder_identity == self.identity:
            record = released_record(LeaseRecord.from_lease(lease), now=self._clock.now())
            try:
                self._lease = await self.client.replace(LEASES, self._with_record(lease, record))
                return True
            except Conflict:
                lease = await self.client.get(LEASES, self.config.name, namespace=self.namespace)
        return False

    async def try_acquire_or_renew(self, *, dead_holder: str = "") -> bool:
        """One election round: read the Lease and write this identity into it when the rules allow
        (``dead_holder``: as in :func:`may_acquire`, and only if the Lease read is the record last seen, by
        :meth:`saw` or an earlier round). A leader first tries :meth:`_renew_unread`."""
        now = self._clock.monotonic()
        cfg = self.config
        if await self._renew_unread(now):
            return True
        try:
            try:
                lease = await self.client.get(LEASES, cfg.name, namespace=self.namespace)
            except NotFound:
                record = next_record(
                    None,
                    identity=cfg.identity,
                    now=self._clock.now(),
                    lease_duration_seconds=cfg.lease_duration_seconds,
                )
                body = {"metadata": {"name": cfg.name, "namespace": self.namespace}, "spec": record.to_spec()}
                try:
                    self._lease = await self.client.create(LEASES, body, namespace=self.namespace)
                except AlreadyExists:
                    return False  # another candidate created it first
                self._observation = Observation(record, now)
                return True
            current = LeaseRecord.from_lease(lease)
            previous, self._observation = self._observation, observe(self._observation, current, now)
            self._lease = lease
            if self._observation is not previous:
                # The caller judged ``dead_holder`` dead on an older record: this one may be a renewal made since,
                # by a new process of the same name. It decides again on the record it now sees.
                dead_holder = ""
            if not may_acquire(
                self._observation,
                identity=cfg.identity,
                now=now,
                default_lease_duration=cfg.lease_duration,
                dead_holder=dead_holder,
            ):
                return False
            record = next_record(
                current, identity=cfg.identity, now=self._clock.now(), lease_duration_seconds=cfg.lease_duration_seconds
            )
            try:
                self._lease = await self.client.replace(LEASES, self._with_record(lease, record))
            except Conflict:
                return False  # someone else wrote it between our read and write
            self._observation = Observation(record, now)
            return True
        except Exception as exc:  # any failure is a failed round; the renew deadline decides what it means
            log.warning("%r: lease %s/%s: %s", self, self.namespace, cfg.name, _one_line(exc))
            return False

    async def _renew_unread(self, now: float) -> bool:
        """The leader's renewal without a read (:func:`may_renew_unread`): the renewed record written over the
        Lease as this identity last wrote it. Any failure (a Conflict: someone wrote the Lease since; an error)
        answers ``False``, and the round reads the Lease."""
        observation, lease, cfg = self._observation, self._lease, self.config
        if not self._leading or lease is None or observation is None:
            return False
        if not may_renew_unread(observation, identity=cfg.identity, now=now, default_lease_duration=cfg.lease_duration):
            return False
        now_utc, duration = self._clock.now(), cfg.lease_duration_seconds
        renewed = next_record(observation.record, identity=cfg.identity, now=now_utc, lease_duration_seconds=duration)
        try:
            self._lease = await self.client.replace(LEASES, self._with_record(lease, renewed))
        except Exception as exc:
            log.debug("%r: renewing without a read failed (%s); reading the lease", self, _one_line(exc))
            return False
        self._observation = Observation(renewed, now)
        return True

    async def _asked_to_stop(self, *, within: float) -> bool:
        """Wait ``within`` seconds, or less when :meth:`step_down` asks :meth:`hold` to stop; whether it did."""
        if self._stop_holding.is_set():
            return True
        asked = asyncio.ensure_future(self._stop_holding.wait())
        pause = asyncio.ensure_future(self._clock.sleep(within))
        try:
            await asyncio.wait({asked, pause}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (asked, pause):
                waiter.cancel()
        return self._stop_holding.is_set()

    def _with_record(self, lease: Mapping[str, Any], record: LeaseRecord) -> dict[str, Any]:
        # Keep the metadata (resourceVersion: optimistic lock) and any spec fields we do not manage.
        spec = dict(ObjectView(lease).spec)
        spec.update(record.to_spec())
        return {"apiVersion": LEASES.api_version, "kind": LEASES.kind, "metadata": lease["metadata"], "spec": spec}

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        if self._metrics is not None:
            self._metrics.leader_election_status.labels(name=self.config.name).set(1 if leading else 0)


def _format_micro_time(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_micro_time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        return None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
