"""The listener loop (docs/listener.md): long-poll the scale set's queue, acquire jobs, publish the desired count.

One iteration:

1. long-poll the session's queue with ``lastMessageId`` and the max-capacity header;
2. no message (202): publish the desired count again from the latest statistics (so an ERS that lost a
   patch converges within one long-poll interval);
3. a message: acknowledge it first; acquire the jobs it offers (each runner request at most once, even
   when a message is delivered again); note started and completed jobs; **publish the desired count**;
   only then the slow bookkeeping: EphemeralRunner status patches for started jobs (concurrently) and
   job metrics. ARC did the bookkeeping first, up to 100 API calls ahead of the scale decision (ARC #4668).

Failures never end the loop, except :class:`~arc_scaleset.listener.errors.FatalListenerError`. A failed poll is
answered by :func:`~arc_scaleset.listener.errors.reaction_to`: back off and retry (5xx, 429 with its
``Retry-After``, timeouts, connection errors), refresh or replace the session (token refused, session
evicted), or count a refusal of the credentials (the second in a row is fatal). A failed ERS patch is
retried until it lands. Acks, acquisitions and runner patches get a few attempts each: a lost ack means
a redelivery, which is harmless; a lost acquisition is offered again by the service.

Shutdown (:class:`~arc_scaleset.listener.stop.StopSignal`) interrupts waits only: the long poll and
backoff delays. A message being handled is handled to the end.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from arc_scaleset.backoff import Backoff
from arc_scaleset.clock import Clock
from arc_scaleset.github.errors import RateLimited
from arc_scaleset.github.models import JobAvailable, JobCompleted, JobStarted, Message, MessageSession, Statistics
from arc_scaleset.listener.desired_state import ScaleDecision
from arc_scaleset.listener.errors import FatalListenerError, Reaction, Stopping, is_retryable, reaction_to
from arc_scaleset.listener.health import Health
from arc_scaleset.listener.metrics import ListenerMetrics
from arc_scaleset.listener.scaler import Scaler
from arc_scaleset.listener.session import CredentialStrikes, SessionAPI, SessionKeeper
from arc_scaleset.listener.stop import StopSignal

log = logging.getLogger(__name__)

T = TypeVar("T")


class QueueAPI(SessionAPI, Protocol):
    """The message-queue calls of :class:`arc_scaleset.github.ActionsClient` the loop uses."""

    async def get_message(self, session: MessageSession, last_message_id: int, max_capacity: int) -> Message | None: ...

    async def delete_message(self, session: MessageSession, message_id: int) -> None: ...

    async def acquire_jobs(
        self, session: MessageSession, scale_set_id: int, request_ids: Sequence[int]
    ) -> list[int]: ...


@dataclass(frozen=True, kw_only=True)
class LoopSettings:
    """Bounds of the loop. ``poll_timeout`` is a safety net above the client's own long-poll timeout."""

    scale_set_id: int
    max_runners: int
    poll_timeout: float = 90.0
    call_timeout: float = 30.0
    attempts: int = 3
    bookkeeping_concurrency: int = 8
    remembered_ids: int = 10_000


class _Remembered:
    """A bounded set of integers, oldest forgotten first (acquired request IDs, handled message IDs)."""

    def __init__(self, capacity: int) -> None:
        self._items: OrderedDict[int, None] = OrderedDict()
        self._capacity = capacity

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def add(self, item: int) -> None:
        self._items[item] = None
        self._items.move_to_end(item)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()


class Listener:
    """Runs the loop for one scale set until shutdown (returns) or a fatal failure (FatalListenerError)."""

    def __init__(
        self,
        api: QueueAPI,
        *,
        sessions: SessionKeeper,
        scaler: Scaler,
        settings: LoopSettings,
        stop: StopSignal,
        health: Health,
        strikes: CredentialStrikes,
        metrics: ListenerMetrics | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self._api = api
        self.sessions = sessions
        self.scaler = scaler
        self.settings = settings
        self._stop = stop
        self._clock: Clock = stop.clock
        self.health = health
        self._strikes = strikes
        self.metrics = metrics
        self._backoff = backoff if backoff is not None else Backoff(base=1.0, cap=30.0, jitter=0.2)
        self._publish_backoff = Backoff(base=1.0, cap=30.0, jitter=0.2)
        self.last_message_id = 0
        self.statistics = Statistics()
        self.last_decision: ScaleDecision | None = None
        self._acquired = _Remembered(settings.remembered_ids)
        self._handled = _Remembered(settings.remembered_ids)
        self._session_lost = False
        self._bookkeeping_slots = asyncio.Semaphore(settings.bookkeeping_concurrency)

    # ---- the loop ------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Obtain a session, then poll until shutdown. Raises FatalListenerError; returns on shutdown."""
        try:
            await self._start_session(await self.sessions.open())
            while True:
                await self.iterate()
        except Stopping:
            log.info("listener stopping")

    async def iterate(self) -> None:
        """One poll and its consequences (exposed for tests)."""
        self._stop.check()
        if self._session_lost:
            self._session_lost = False
            await self._start_session(await self.sessions.replace())
        try:
            message = await self._poll()
        except (Stopping, FatalListenerError):
            raise
        except Exception as exc:
            if not is_retryable(exc):
                raise
            await self._recover(exc)
            return
        self.health.polled()
        self._strikes.accepted()
        self._backoff.reset()
        if message is None:
            await self.publish(self.statistics.total_assigned_jobs)
            return
        await self.handle(message)

    async def _poll(self) -> Message | None:
        session = self.sessions.current()
        async with asyncio.timeout(self.settings.poll_timeout):
            return await self._stop.race(
                self._api.get_message(session, self.last_message_id, self.settings.max_runners)
            )

    async def _start_session(self, session: MessageSession) -> None:
        # A new session may number its messages afresh: start from 0, forget which IDs were handled. Jobs
        # already acquired stay remembered, so a redelivered JobAvailable is not acquired again.
        self.last_message_id = 0
        self._handled.clear()
        if session.statistics is None:
            log.warning("the new session carries no statistics; assuming no assigned jobs until the first message")
        self._record_statistics(session.statistics or Statistics())
        await self.publish(self.statistics.total_assigned_jobs)

    async def _recover(self, exc: BaseException) -> None:
        reaction = reaction_to(exc)
        if reaction is Reaction.RENEW_SESSION:
            log.info("the message queue refused the session's token; renewing the session")
            created_before = self.sessions.sessions_created
            session = await self.sessions.renew()
            if self.sessions.sessions_created != created_before:
                await self._start_session(session)
            return
        if reaction is Reaction.RECREATE_SESSION:
            log.warning("the service no longer has our message session; creating a new one", extra={"error": str(exc)})
            await self._start_session(await self.sessions.replace())
            return
        if reaction is Reaction.CREDENTIALS_REFUSED:
            self._strikes.refused(exc)
        delay = self._backoff.next_delay()
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            delay = exc.retry_after
        log.warning(
            "polling for messages failed; retrying",
            extra={"error": str(exc) or type(exc).__name__, "retry_in_s": round(delay, 1)},
        )
        await self._stop.sleep(delay)

    # ---- one message ---------------------------------------------------------------------------------------

    async def handle(self, message: Message) -> None:
        """Ack, acquire, publish, then bookkeeping (exposed for tests)."""
        self.last_message_id = message.message_id
        if message.statistics is not None:
            self._record_statistics(message.statistics)
        redelivered = message.message_id in self._handled
        await self._acknowledge(message.message_id)
        if not redelivered:
            await self._acquire(message.jobs_available)
            started, completed = message.jobs_started, message.jobs_completed
            if started or completed:
                self.scaler.note_job_event()
        decision = await self.publish(self.statistics.total_assigned_jobs)
        log.info(
            "message handled",
            extra={
                "message_id": message.message_id,
                "available": len(message.jobs_available),
                "started": len(message.jobs_started),
                "completed": len(message.jobs_completed),
                "assigned_jobs": self.statistics.total_assigned_jobs,
                "replicas": decision.target,
                "patch_id": decision.patch_id,
                "redelivered": redelivered,
            },
        )
        if not redelivered:
            await self._bookkeep(message.jobs_started, message.jobs_completed)
        self._handled.add(message.message_id)

    def _record_statistics(self, statistics: Statistics) -> None:
        self.statistics = statistics
        if self.metrics is not None:
            self.metrics.record_statistics(statistics)

    async def _acknowledge(self, message_id: int) -> None:
        await self._session_call(
            "acknowledge message",
            lambda session: self._api.delete_message(session, message_id),
            context={"message_id": message_id},
        )

    async def _acquire(self, jobs: Sequence[JobAvailable]) -> None:
        wanted = list(dict.fromkeys(j.runner_request_id for j in jobs if j.runner_request_id not in self._acquired))
        if not wanted:
            return
        acquired = await self._session_call(
            "acquire jobs",
            lambda session: self._api.acquire_jobs(session, self.settings.scale_set_id, wanted),
            context={"request_ids": wanted},
        )
        if acquired is None:
            return
        for request_id in acquired:
            self._acquired.add(request_id)
        log.info("jobs acquired", extra={"requested": len(wanted), "acquired": len(acquired)})

    async def _session_call(
        self, what: str, call: Callable[[MessageSession], Awaitable[T]], *, context: dict[str, object]
    ) -> T | None:
        """A session-bound call during message handling: a few attempts, never fatal, never interrupted.

        Returns None when it did not succeed; an evicted session is replaced before the next poll.
        """
        for attempt in range(1, self.settings.attempts + 1):
            if self._session_lost or not self.sessions.held:
                return None
            try:
                async with asyncio.timeout(self.settings.call_timeout):
                    return await call(self.sessions.current())
            except Exception as exc:
                if not is_retryable(exc):
                    raise
                reaction = reaction_to(exc)
                if reaction is Reaction.RECREATE_SESSION:
                    self._session_lost = True
                    log.warning(f"cannot {what}: the session is gone", extra={**context, "error": str(exc)})
                    return None
                if reaction is Reaction.RENEW_SESSION:
                    self._session_lost = True  # the client already refreshed once; start over cleanly
                    log.warning(f"cannot {what}: the session's token is refused", extra={**context})
                    return None
                if reaction is Reaction.CREDENTIALS_REFUSED:
                    self._strikes.refused(exc)
                if attempt == self.settings.attempts:
                    log.warning(f"giving up: cannot {what}", extra={**context, "error": str(exc)})
                    return None
                delay = exc.retry_after if isinstance(exc, RateLimited) and exc.retry_after is not None else None
                # Not stop-aware: a message being handled is handled to the end (the attempts are bounded).
                await self._clock.sleep(delay if delay is not None else min(2.0 ** (attempt - 1), 5.0))
        return None

    async def publish(self, assigned_jobs: int) -> ScaleDecision:
        """Patch the ERS with the next decision for ``assigned_jobs``, retrying until it lands.

        Only shutdown interrupts the retries (raising Stopping): without this patch the runner count is
        wrong, so there is nothing better to do than insist.
        """
        while True:
            try:
                async with asyncio.timeout(self.settings.call_timeout):
                    decision = await self.scaler.publish(assigned_jobs)
            except Exception as exc:
                if not is_retryable(exc):
                    raise
                delay = self._publish_backoff.next_delay()
                log.warning(
                    "patching the EphemeralRunnerSet failed; retrying",
                    extra={"error": str(exc) or type(exc).__name__, "retry_in_s": round(delay, 1)},
                )
                await self._stop.sleep(delay)
                continue
            self._publish_backoff.reset()
            self.last_decision = decision
            if self.metrics is not None:
                self.metrics.record_desired_runners(decision.target)
            return decision

    async def _bookkeep(self, started: Sequence[JobStarted], completed: Sequence[JobCompleted]) -> None:
        if self.metrics is not None:
            for started_job in started:
                self.metrics.record_job_started(started_job)
            for completed_job in completed:
                self.metrics.record_job_completed(completed_job)
        for job in completed:
            log.info(
                "job completed",
                extra={"runner": job.runner_name, "request_id": job.runner_request_id, "result": job.result},
            )
        if started:
            await asyncio.gather(*(self._record_started(job) for job in started))

    async def _record_started(self, job: JobStarted) -> None:
        async with self._bookkeeping_slots:
            for attempt in range(1, self.settings.attempts + 1):
                try:
                    async with asyncio.timeout(self.settings.call_timeout):
                        await self.scaler.record_job_started(job)
                    log.info("job started", extra={"runner": job.runner_name, "request_id": job.runner_request_id})
                    return
                except Exception as exc:
                    if not is_retryable(exc):
                        raise
                    if attempt == self.settings.attempts:
                        log.warning(
                            "giving up recording a started job on its runner",
                            extra={"runner": job.runner_name, "error": str(exc) or type(exc).__name__},
                        )
                        return
                    await self._clock.sleep(min(2.0 ** (attempt - 1), 5.0))
