"""Calls a message asks for, made beside the loop so that a slow or rate-limited one never stops it.

A message asks for an acknowledgement (``DELETE`` of the message) and, for ``JobAvailable``, an acquisition
(``acquirejobs``). Neither decides the desired count (the message's statistics do), so the loop hands them to
:class:`SideCalls` and goes on publishing and polling. ARC made them inline, with retries nested in message
handling: a 429 with ``Retry-After`` on acquisition stopped polling and scaling for up to about 45 s.

Two workers, one per kind, each working through its own queue:

- **acknowledgements**, in order, each bound to the session whose queue delivered the message: once that
  session is replaced, its pending acknowledgements are dropped (a new session numbers its messages afresh,
  so the ID could name another message). A lost acknowledgement only means a redelivery, which the loop
  recognises;
- **acquisitions**, batched: every runner request offered while an acquisition is in flight goes into the
  next call. A request ID is never acquired twice: IDs acquired, being acquired or waiting are skipped.

Each call gets ``attempts`` tries, honouring ``Retry-After`` (a longer wait than ``max_wait`` gives up at
once, as waiting that long would delay every later call), then it is given up. An unacknowledged message is
redelivered by the service. A job whose acquisition was given up is tried again by the listener: after a
backoff (``retry_base`` doubling up to ``retry_cap``, never sooner than the ``Retry-After`` the service asked
for), on the same session, until it is acquired or the service's statistics say no job is available any more
(someone else took it, or it was cancelled). ARC's listener exits on such a failure, and its next session is
offered the job again; this one keeps its session, so it must ask again itself, or the job would wait for a
runner for as long as the session lives. A session that is gone or whose token is refused gives up at once:
the next poll finds that out and recovers, and the new session is offered the waiting jobs. These calls
never end the process.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from arc_scaleset.backoff import Backoff
from arc_scaleset.clock import Clock
from arc_scaleset.github.errors import RateLimited
from arc_scaleset.github.models import MessageSession
from arc_scaleset.listener.errors import Reaction, error_class, is_retryable, reaction_to
from arc_scaleset.listener.session import SessionKeeper

log = logging.getLogger(__name__)

T = TypeVar("T")


class SideAPI(Protocol):
    """The calls of :class:`arc_scaleset.github.ActionsClient` made beside the loop."""

    async def delete_message(self, session: MessageSession, message_id: int) -> None: ...

    async def acquire_jobs(
        self, session: MessageSession, scale_set_id: int, request_ids: Sequence[int]
    ) -> list[int]: ...


class Remembered:
    """A bounded set of integers, oldest forgotten first (acquired request IDs, handled message IDs)."""

    def __init__(self, capacity: int) -> None:
        self._items: OrderedDict[int, None] = OrderedDict()
        self._capacity = capacity

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: int) -> None:
        self._items[item] = None
        self._items.move_to_end(item)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()


@dataclass(frozen=True)
class GivenUp:
    """What :meth:`SideCalls._call` returns for a call it gave up on.

    ``session_lost``: the session is gone, replaced or its token refused (the next poll recovers, and a new
    session is offered its waiting jobs); otherwise the call kept failing, and ``retry_after`` is the wait the
    service asked for last (0 when it asked for none).
    """

    session_lost: bool = False
    retry_after: float = 0.0


class SideCalls:
    """Acknowledges messages and acquires jobs for the loop, beside it (see the module docstring)."""

    def __init__(
        self,
        api: SideAPI,
        *,
        sessions: SessionKeeper,
        scale_set_id: int,
        clock: Clock,
        attempts: int = 3,
        call_timeout: float = 30.0,
        max_wait: float = 60.0,
        remembered_ids: int = 10_000,
        retry_base: float = 5.0,
        retry_cap: float = 60.0,
    ) -> None:
        self._api = api
        self._sessions = sessions
        self._scale_set_id = scale_set_id
        self._clock = clock
        self._attempts = attempts
        self._call_timeout = call_timeout
        self._max_wait = max_wait
        self.acquired = Remembered(remembered_ids)
        self._acks: deque[tuple[MessageSession, int]] = deque(maxlen=remembered_ids)
        self._wanted: dict[int, None] = {}  # ordered: offered, waiting for the next acquisition
        self._acquiring: set[int] = set()
        self._deferred: dict[int, None] = {}  # given up on ``_deferred_session``: acquired again after a backoff
        self._deferred_session: MessageSession | None = None
        self._retry_backoff = Backoff(base=retry_base, cap=retry_cap, jitter=0.2)
        self._retry_timer: asyncio.Task[None] | None = None
        self._acks_ready = asyncio.Event()
        self._acquisitions_ready = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()

    # ---- what the loop asks for --------------------------------------------------------------------------

    def acknowledge(self, session: MessageSession, message_id: int) -> None:
        """Delete ``message_id`` from ``session``'s queue, soon."""
        self._start()
        self._acks.append((session, message_id))
        self._acks_ready.set()

    def acquire(self, request_ids: Iterable[int]) -> None:
        """Acquire the runner requests not acquired, being acquired or waiting already, soon."""
        self._start()
        for request_id in request_ids:
            if request_id not in self.acquired and request_id not in self._acquiring:
                self._wanted[request_id] = None
        if self._wanted:
            self._acquisitions_ready.set()

    def note_available_jobs(self, count: int) -> None:
        """The service's latest ``totalAvailableJobs``: with none available, no given-up acquisition is worth
        trying again (the jobs were taken by someone else, or cancelled)."""
        if count == 0 and self._deferred:
            log.info("no job is available any more: not acquiring again", extra={"request_ids": list(self._deferred)})
            self._deferred.clear()

    def unconfirmed(self, limit: int) -> tuple[int, ...]:
        """Up to ``limit`` runner requests asked for and not seen acquired (waiting, in flight or to be tried
        again), oldest first: what a successor resuming the session must ask for again (api/listener_cursor.py)."""
        pending = dict.fromkeys([*self._deferred, *sorted(self._acquiring), *self._wanted])
        return tuple(pending)[:limit]

    @property
    def idle(self) -> bool:
        """Nothing waiting and nothing in flight (acquisitions to try again later do not count)."""
        return not self._acks and not self._wanted and self._busy == 0

    async def aclose(self, *, drain: float = 0.0) -> None:
        """Give pending calls up to ``drain`` seconds (on the clock) to finish, then stop. Never raises."""
        if drain > 0 and not self.idle:
            finished = asyncio.ensure_future(self._idle.wait())
            timer = asyncio.ensure_future(self._clock.sleep(drain))
            await asyncio.wait({finished, timer}, return_when=asyncio.FIRST_COMPLETED)
            for waiter in (finished, timer):
                waiter.cancel()
            await asyncio.gather(finished, timer, return_exceptions=True)
            if not self.idle:
                log.info(
                    "shutting down with calls still pending; the service redelivers or offers them again",
                    extra={"acknowledgements": len(self._acks), "acquisitions": len(self._wanted)},
                )
        tasks = [*self._workers, *([self._retry_timer] if self._retry_timer is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._workers.clear()

    # ---- the workers -----------------------------------------------------------------------------------

    def _start(self) -> None:
        self._idle.clear()
        if not self._workers:
            self._workers = [
                asyncio.create_task(self._run(self._acknowledge_next, self._acks_ready, lambda: bool(self._acks))),
                asyncio.create_task(
                    self._run(self._acquire_next, self._acquisitions_ready, lambda: bool(self._wanted))
                ),
            ]

    async def _run(
        self, step: Callable[[], Awaitable[None]], ready: asyncio.Event, pending: Callable[[], bool]
    ) -> None:
        while True:
            if not pending():
                if self.idle:
                    self._idle.set()
                ready.clear()
                await ready.wait()
                continue
            self._busy += 1
            try:
                await step()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug, not a service failure (those are handled in _call): say so loudly, keep serving.
                log.exception("a call beside the loop failed unexpectedly")
            finally:
                self._busy -= 1

    async def _acknowledge_next(self) -> None:
        session, message_id = self._acks.popleft()
        if session is not self._sessions.session:
            return  # replaced (or given up): that queue and its numbering are gone
        await self._call(
            "acknowledge message",
            lambda: self._api.delete_message(session, message_id),
            session=session,
            context={"message_id": message_id},
        )

    async def _acquire_next(self) -> None:
        wanted, self._wanted = list(self._wanted), {}
        self._acquiring.update(wanted)
        try:
            session = self._sessions.session
            if session is None:
                return  # no session: the service offers the jobs again to the next one
            acquired = await self._call(
                "acquire jobs",
                lambda: self._api.acquire_jobs(session, self._scale_set_id, wanted),
                session=session,
                context={"request_ids": wanted},
            )
        finally:
            self._acquiring.difference_update(wanted)
        if isinstance(acquired, GivenUp):
            if not acquired.session_lost:
                self._defer(session, wanted, retry_after=acquired.retry_after)
            return
        self._retry_backoff.reset()
        for request_id in acquired:
            self.acquired.add(request_id)
        log.info("jobs acquired", extra={"requested": len(wanted), "acquired": len(acquired)})

    def _defer(self, session: MessageSession, request_ids: Iterable[int], *, retry_after: float) -> None:
        """Acquire ``request_ids`` again on ``session`` after the retry backoff (see the module docstring)."""
        if session is not self._deferred_session:
            self._deferred.clear()
            self._deferred_session = session
        for request_id in request_ids:
            if request_id not in self.acquired:
                self._deferred[request_id] = None
        if self._deferred and self._retry_timer is None:
            delay = max(self._retry_backoff.next_delay(), retry_after)
            log.info(
                "acquiring the jobs again later",
                extra={"request_ids": list(self._deferred), "retry_in_s": round(delay, 1)},
            )
            self._retry_timer = asyncio.create_task(self._acquire_deferred_after(delay))

    async def _acquire_deferred_after(self, delay: float) -> None:
        try:
            await self._clock.sleep(delay)
        finally:
            self._retry_timer = None
        deferred, self._deferred = list(self._deferred), {}
        if deferred and self._deferred_session is self._sessions.session:
            self.acquire(deferred)

    async def _call(
        self,
        what: str,
        call: Callable[[], Awaitable[T]],
        *,
        session: MessageSession,
        context: dict[str, object],
    ) -> T | GivenUp:
        """``call`` with bounded attempts, or why it was given up."""
        backoff = Backoff(base=1.0, cap=5.0, jitter=0.2)
        for attempt in range(1, self._attempts + 1):
            try:
                async with asyncio.timeout(self._call_timeout):
                    return await call()
            except Exception as exc:
                if not is_retryable(exc):
                    raise
                error = {**context, "error": str(exc) or error_class(exc)}
                if reaction_to(exc) in (Reaction.RECREATE_SESSION, Reaction.RENEW_SESSION):
                    log.warning(f"cannot {what}: the session is gone or its token refused", extra=error)
                    return GivenUp(session_lost=True)
                delay = backoff.next_delay()
                if isinstance(exc, RateLimited) and exc.retry_after is not None:
                    delay = max(delay, exc.retry_after)  # a Retry-After of 0 is no reason to call again at once
                if attempt == self._attempts or delay > self._max_wait:
                    log.warning(f"giving up: cannot {what}", extra=error)
                    retry_after = exc.retry_after if isinstance(exc, RateLimited) else None
                    return GivenUp(retry_after=retry_after or 0.0)
                log.info(f"cannot {what}; retrying", extra={**error, "retry_in_s": round(delay, 1)})
                await self._clock.sleep(delay)
                if session is not self._sessions.session:
                    return GivenUp(session_lost=True)  # the session was replaced meanwhile
        return GivenUp()
