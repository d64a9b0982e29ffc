"""The listener loop (docs/listener.md): long-poll the scale set's queue, publish the desired count.

One iteration:

1. long-poll the session's queue with ``lastMessageId`` and the max-capacity header: ``maxRunners``, lowered to
   what the cluster can give the set now (:mod:`~arc_scaleset.listener.capacity`; ARC always sends
   ``maxRunners``);
2. no message (202): decide again from the latest statistics; the scaler patches the decision unless the set
   already carries it (:mod:`~arc_scaleset.listener.publish_plan`), so an ERS whose spec someone else changed
   converges within one long-poll interval. With a ``minRunnersSchedule``, the poll is also cut short
   when a window opens or closes (:meth:`Listener._poll`), and the count published at once: a window's start
   raises the count at the minute it names, not at the end of a long poll that brings no message;
3. a message: hand its acknowledgement and the acquisition of the jobs it offers to
   :class:`~arc_scaleset.listener.side_calls.SideCalls`, which make them beside the loop (each runner request
   at most once, even when a message is delivered again); note started and completed jobs; **publish the
   desired count**; then start the slow bookkeeping (EphemeralRunner status patches for started jobs, in the
   background) and record job metrics. ARC did the bookkeeping first, up to 100 API calls ahead of the
   scale decision (ARC #4668), and acquired inline, so a rate-limited acquisition stopped the loop;
4. a message whose ID can be read but whose content cannot (a *poison* message): acknowledge and skip it,
   with a warning and ``gha_listener_skipped_messages_total{reason}``. ARC's listener, and this one before,
   polled the same message forever and the scale set stopped scaling. A skip is no successful poll: it
   neither resets the backoff nor counts for liveness, and the same message delivered again (the service
   ignored the acknowledgement or keeps sending it) is a failed poll, waited out with the backoff.

Failures never end the loop, except :class:`~arc_scaleset.listener.errors.FatalListenerError`. A failed poll
first waits for the listener's one backoff (1 s doubling to 2 minutes, jittered, or the ``Retry-After`` of a
429 when that is longer), shared with the session keeper and reset only by a successful poll, then does what
:func:`~arc_scaleset.listener.errors.reaction_to` says: poll again (5xx, 3xx, timeouts, connection errors,
an answer without a readable message), refresh the session (queue token refused), replace it (session
evicted), or count a refusal of the credentials (the second in a row is fatal). Whatever the failure, a
service that keeps failing is called ever more slowly. A failed ERS patch is retried until it lands.

Shutdown (:class:`~arc_scaleset.listener.stop.StopSignal`) interrupts waits only: the long poll and backoff
delays. A message being handled is handled to the end; calls still pending beside the loop get a few
seconds (``drain_timeout``) to finish.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from arc_scaleset.api.listener_cursor import MAX_RECORDED_REQUESTS, ListenerCursor
from arc_scaleset.backoff import Backoff
from arc_scaleset.clock import Clock
from arc_scaleset.github.errors import RateLimited, UnreadableMessage
from arc_scaleset.github.models import JobCompleted, JobStarted, Message, MessageSession, Statistics
from arc_scaleset.listener.capacity import advertised_capacity
from arc_scaleset.listener.desired_state import ScaleDecision
from arc_scaleset.listener.errors import (
    FatalListenerError,
    Reaction,
    Stopping,
    error_class,
    is_retryable,
    reaction_to,
)
from arc_scaleset.listener.health import Health
from arc_scaleset.listener.metrics import ListenerMetrics
from arc_scaleset.listener.offers import OfferTimes
from arc_scaleset.listener.scaler import Scaler
from arc_scaleset.listener.session import CredentialStrikes, SessionAPI, SessionKeeper
from arc_scaleset.listener.side_calls import Remembered, SideAPI, SideCalls
from arc_scaleset.listener.stop import StopSignal

log = logging.getLogger(__name__)

BOOKKEEPING_CONCURRENCY: Final = 4
"""Started jobs recorded on their runners at once. Each is a Kubernetes request on a pooled connection of its
own (about 120 KiB with TLS): enough for a burst of hundreds of jobs in seconds, where ARC's listener
recorded them one at a time."""


SCHEDULE_EDGE_MARGIN: Final = 1.0
"""Seconds the loop wakes after a schedule window's edge: past it for certain on the wall clock (a sleep is
measured on the monotonic one), so one wake-up sees the change."""


class _Woken(enum.Enum):
    """Why a poll ended without the service's answer: a schedule window opened or closed."""

    SCHEDULE = "schedule"


class QueueAPI(SessionAPI, SideAPI, Protocol):
    """The message-queue calls of :class:`arc_scaleset.github.ActionsClient` the loop uses."""

    async def get_message(self, session: MessageSession, last_message_id: int, max_capacity: int) -> Message | None: ...


@dataclass(frozen=True, kw_only=True)
class LoopSettings:
    """Bounds of the loop. ``poll_timeout`` is a safety net above the client's own long-poll timeout;
    ``side_call_max_wait`` is the longest ``Retry-After`` a call beside the loop waits for before giving up;
    ``drain_timeout`` is how long calls still pending at shutdown may take."""

    scale_set_id: int
    max_runners: int
    poll_timeout: float = 90.0
    call_timeout: float = 30.0
    attempts: int = 3
    bookkeeping_concurrency: int = BOOKKEEPING_CONCURRENCY
    remembered_ids: int = 10_000
    side_call_max_wait: float = 60.0
    drain_timeout: float = 5.0


class Listener:
    """Runs the loop for one scale set until shutdown (returns) or a fatal failure (FatalListenerError).

    The backoff is the session keeper's (``sessions.backoff``): one for every failed session or poll call.
    """

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
        self._backoff = sessions.backoff
        self._publish_backoff = Backoff(base=1.0, cap=30.0, jitter=0.2)  # Kubernetes, not the service
        self.side_calls = SideCalls(
            api,
            sessions=sessions,
            scale_set_id=settings.scale_set_id,
            clock=self._clock,
            attempts=settings.attempts,
            call_timeout=settings.call_timeout,
            max_wait=settings.side_call_max_wait,
            remembered_ids=settings.remembered_ids,
        )
        self.last_message_id = 0
        self.statistics = Statistics()
        self.last_decision: ScaleDecision | None = None
        self._handled = Remembered(settings.remembered_ids)
        self.offers = OfferTimes()
        """When each job was first offered to this listener, for its timeline (recorded on its runner at start)."""
        # Started jobs waiting to be recorded, and the workers that record them: a burst of N started jobs
        # queues N references, not N tasks (about 1.7 KiB each while they wait).
        self._started_jobs: asyncio.Queue[tuple[JobStarted, dt.datetime]] = asyncio.Queue()
        self._bookkeepers: list[asyncio.Task[None]] = []

    # ---- the loop ------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Obtain a session, then poll until shutdown. Raises FatalListenerError; returns on shutdown."""
        try:
            await self._start_session(await self.sessions.open())
            while True:
                await self.iterate()
        except Stopping:
            log.info("listener stopping")
            await self._finish_side_work(drain=self.settings.drain_timeout)
        finally:
            await self._finish_side_work(drain=0.0)

    async def iterate(self) -> None:
        """One poll and its consequences (exposed for tests)."""
        self._stop.check()
        try:
            message = await self._poll()
        except (Stopping, FatalListenerError):
            raise
        except UnreadableMessage as exc:
            await self._skip(exc)
            return
        except Exception as exc:
            if not is_retryable(exc):
                raise
            await self._recover(exc)
            return
        if message is _Woken.SCHEDULE:
            # Not an answer from the service: the backoff and the liveness clock stay as they are.
            await self.publish(self.statistics.total_assigned_jobs)
            return
        if message is None:
            self._polled()
            await self.publish(self.statistics.total_assigned_jobs)
            return
        if message.message_id in self._handled:
            # Handled again (acknowledged, statistics published, nothing acquired twice), but no successful poll:
            # a service that ignores ``lastMessageId`` would otherwise be polled in a hot loop.
            self._strikes.accepted()
            await self.handle(message)
            await self._delivered_again(message.message_id, "RedeliveredMessage", reason="already handled")
            return
        self._polled()
        await self.handle(message)

    async def _poll(self) -> Message | _Woken | None:
        session = self.sessions.current()
        capacity = advertised_capacity(self.settings.max_runners, self.scaler.cluster_capacity)
        if self.metrics is not None:
            self.metrics.record_advertised_capacity(capacity)
        async with asyncio.timeout(self.settings.poll_timeout):
            return await self._stop.race(
                self._until_schedule_changes(self._api.get_message(session, self.last_message_id, capacity))
            )

    async def _until_schedule_changes(self, poll: Awaitable[Message | None]) -> Message | _Woken | None:
        """``poll``'s answer, or :attr:`_Woken.SCHEDULE` if a ``minRunnersSchedule`` window may open or close
        first; the poll is then cancelled. That loses nothing: a message is only gone once acknowledged, so one
        the cancelled poll was bringing comes again with the next poll (same ``lastMessageId``)."""
        now = self._clock.now()
        edge = self.scaler.state.next_change(now)
        if edge is None:
            return await poll
        work = asyncio.ensure_future(poll)
        timer = asyncio.ensure_future(self._clock.sleep((edge - now).total_seconds() + SCHEDULE_EDGE_MARGIN))
        try:
            await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not work.done():
                work.cancel()
            await asyncio.gather(work, timer, return_exceptions=True)
        if work.cancelled():
            return _Woken.SCHEDULE
        return work.result()

    def _polled(self) -> None:
        # The only place the backoff starts over: the service answered a poll with no message or a readable
        # one, so the session works.
        self._backoff.reset()
        self._strikes.accepted()
        self.health.polled()

    async def _start_session(self, session: MessageSession) -> None:
        # A new session may number its messages afresh: start from 0, forget which IDs were handled. Jobs
        # already acquired stay remembered, so a redelivered JobAvailable is not acquired again. A resumed
        # session (the predecessor's) goes on from the last message the predecessor acted on, and asks again
        # for the jobs whose acquisition it had not seen confirmed: the service offers a job once per session.
        resumed = self.sessions.take_resumed()
        self.last_message_id = resumed.last_message_id if resumed is not None else 0
        self._handled.clear()
        if resumed is not None and resumed.acquiring:
            self.side_calls.acquire(resumed.acquiring)
        if session.statistics is None:
            log.warning("the new session carries no statistics; assuming no assigned jobs until the first message")
        self._record_statistics(session.statistics or Statistics())
        await self.publish(self.statistics.total_assigned_jobs)

    async def _recover(self, exc: BaseException) -> None:
        """Wait for the backoff, then do what ``exc`` calls for (docs/listener.md, "Backoff")."""
        reaction = reaction_to(exc)
        if reaction is Reaction.CREDENTIALS_REFUSED:
            self._strikes.refused(exc)
        self.health.poll_failed(error_class(exc))
        delay = self._backoff.next_delay()
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            # The longer of the two: a Retry-After of 0, or an x-ratelimit-reset our clock has already passed,
            # would otherwise poll again at once, as fast as the service answers 429.
            delay = max(delay, exc.retry_after)
        what = {
            Reaction.RENEW_SESSION: "the message queue refused the session's token; renewing the session",
            Reaction.RECREATE_SESSION: "the service no longer has our message session; creating a new one",
        }.get(reaction, "polling for messages failed; retrying")
        log.warning(what, extra={"error": str(exc) or error_class(exc), "retry_in_s": round(delay, 1)})
        await self._stop.sleep(delay)
        if reaction is Reaction.RENEW_SESSION:
            created_before = self.sessions.sessions_created
            session = await self.sessions.renew()
            if self.sessions.sessions_created != created_before:
                await self._start_session(session)
        elif reaction is Reaction.RECREATE_SESSION:
            await self._start_session(await self.sessions.replace())

    # ---- one message ---------------------------------------------------------------------------------------

    async def handle(self, message: Message) -> None:
        """Acknowledge and acquire (beside the loop), publish, then bookkeeping (exposed for tests)."""
        self.last_message_id = message.message_id
        if message.statistics is not None:
            self._record_statistics(message.statistics)
        redelivered = message.message_id in self._handled
        if not redelivered:
            self.offers.offered((job.runner_request_id for job in message.jobs_available), self._clock.now())
            self.side_calls.acquire(job.runner_request_id for job in message.jobs_available)
            if message.jobs_started or message.jobs_completed:
                self.scaler.note_job_event()
        # The decision records this message as acted on (the cursor); acknowledged only after it, so a listener
        # killed in between leaves the message to be delivered again to its successor (docs/listener.md).
        session = self.sessions.current()
        decision = await self.publish(self.statistics.total_assigned_jobs)
        self.side_calls.acknowledge(session, message.message_id)
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
            self._bookkeep(message.jobs_started, message.jobs_completed)
        self._handled.add(message.message_id)

    async def _skip(self, exc: UnreadableMessage) -> None:
        """Acknowledge a message that cannot be read and move past it (docs/listener.md, "Poison messages").

        The first delivery is skipped at once: the next message may be a good one. The service answered, so
        the credentials work, but a skip is not a successful poll: the backoff is not reset and liveness is
        not renewed. The same message delivered again is a failed poll (the reported state says ``Failing``
        with ``UnreadableMessage``) and waits for the backoff, so a service that keeps sending it is polled
        ever more slowly instead of thousands of times a second.
        """
        self._strikes.accepted()
        self.last_message_id = exc.message_id
        self.side_calls.acknowledge(self.sessions.current(), exc.message_id)
        if exc.message_id in self._handled:
            await self._delivered_again(exc.message_id, error_class(exc), reason=exc.skip_reason)
            return
        log.warning(
            "skipping a queue message that cannot be read",
            extra={"message_id": exc.message_id, "reason": exc.skip_reason, "error": exc.detail},
        )
        if self.metrics is not None:
            self.metrics.record_skipped_message(exc.skip_reason)
        self._handled.add(exc.message_id)

    async def _delivered_again(self, message_id: int, error: str, *, reason: str) -> None:
        """A message ID seen before came back: a failed poll (``error`` in the reported state), waited out with
        the backoff, so a service that keeps sending it (ignoring the acknowledgement or ``lastMessageId``) is
        polled ever more slowly instead of thousands of times a second (docs/listener.md, "Poison messages")."""
        self.health.poll_failed(error)
        delay = self._backoff.next_delay()
        log.warning(
            "the service delivered a message again; polling again after the backoff",
            extra={"message_id": message_id, "reason": reason, "retry_in_s": round(delay, 1)},
        )
        await self._stop.sleep(delay)

    def _record_statistics(self, statistics: Statistics) -> None:
        self.statistics = statistics
        self.side_calls.note_available_jobs(statistics.total_available_jobs)
        if self.metrics is not None:
            self.metrics.record_statistics(statistics)

    async def publish(self, assigned_jobs: int) -> ScaleDecision:
        """Patch the ERS with the next decision for ``assigned_jobs``, retrying until it lands.

        Only shutdown interrupts the retries (raising Stopping): without this patch the runner count is
        wrong, so there is nothing better to do than insist.
        """
        while True:
            try:
                async with asyncio.timeout(self.settings.call_timeout):
                    decision = await self.scaler.publish(assigned_jobs, cursor=self._cursor())
            except Exception as exc:
                if not is_retryable(exc):
                    raise
                delay = self._publish_backoff.next_delay()
                log.warning(
                    "patching the EphemeralRunnerSet failed; retrying",
                    extra={"error": str(exc) or error_class(exc), "retry_in_s": round(delay, 1)},
                )
                await self._stop.sleep(delay)
                continue
            self._publish_backoff.reset()
            self.last_decision = decision
            if self.metrics is not None:
                self.metrics.record_desired_runners(decision.target)
                if self.scaler.state.schedule:
                    self.metrics.record_static(
                        min_runners=self.scaler.min_runners, max_runners=self.settings.max_runners
                    )
            return decision

    def _cursor(self) -> ListenerCursor | None:
        """Where a successor resumes (api/listener_cursor.py): this session, the last message acted on (the one
        whose decision is being published) and the acquisitions not confirmed; ``None`` without a session."""
        session = self.sessions.session
        if session is None:
            return None
        return ListenerCursor(
            scale_set_id=self.settings.scale_set_id,
            session_id=session.session_id,
            last_message_id=self.last_message_id,
            acquiring=self.side_calls.unconfirmed(MAX_RECORDED_REQUESTS),
        )

    # ---- bookkeeping, after the decision -------------------------------------------------------------------

    def _bookkeep(self, started: Sequence[JobStarted], completed: Sequence[JobCompleted]) -> None:
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
        now = self._clock.now()  # when the job started, as far as the listener knows: its runner's timeline
        for started_job in started:
            self._started_jobs.put_nowait((started_job, now))
        if started and not self._bookkeepers:
            self._bookkeepers = [
                asyncio.create_task(self._record_started_jobs()) for _ in range(self.settings.bookkeeping_concurrency)
            ]

    async def _record_started_jobs(self) -> None:
        """One bookkeeping worker: record queued started jobs, one at a time, until cancelled."""
        while True:
            job, started_at = await self._started_jobs.get()
            try:
                await self._record_started(job, started_at)
            finally:
                self._started_jobs.task_done()

    async def _record_started(self, job: JobStarted, started_at: dt.datetime) -> None:
        for attempt in range(1, self.settings.attempts + 1):
            try:
                async with asyncio.timeout(self.settings.call_timeout):
                    await self.scaler.record_job_started(
                        job, started_at=started_at, offered_at=self.offers.take(job.runner_request_id)
                    )
                log.info("job started", extra={"runner": job.runner_name, "request_id": job.runner_request_id})
                return
            except Exception as exc:
                if attempt == self.settings.attempts or not is_retryable(exc):
                    # Not retryable is a bug: log it whole, through the redacting logger, and keep going.
                    log.warning(
                        "giving up recording a started job on its runner",
                        extra={"runner": job.runner_name, "error": str(exc) or error_class(exc)},
                        exc_info=not is_retryable(exc),
                    )
                    return
                await self._clock.sleep(min(2.0 ** (attempt - 1), 5.0))

    async def _finish_side_work(self, *, drain: float) -> None:
        """Let pending side calls and bookkeeping finish within ``drain`` seconds (on the clock), then stop them."""
        await self.side_calls.aclose(drain=drain)
        if not self._bookkeepers:
            return
        if drain > 0:
            pending: asyncio.Future[None] = asyncio.ensure_future(self._started_jobs.join())
            timer: asyncio.Future[None] = asyncio.ensure_future(self._clock.sleep(drain))
            waiters: set[asyncio.Future[Any]] = {pending, timer}
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for waiter in (pending, timer):
                waiter.cancel()
            await asyncio.gather(pending, timer, return_exceptions=True)
        bookkeepers, self._bookkeepers = self._bookkeepers, []
        for task in bookkeepers:
            task.cancel()
        await asyncio.gather(*bookkeepers, return_exceptions=True)
