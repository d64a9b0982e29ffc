"""The listener's message session: obtained patiently, renewed or replaced in-process, always released.

The Actions service allows one message session per scale set. :class:`SessionKeeper` holds it:

- :meth:`SessionKeeper.open` creates it with the pod's hostname as owner. A 409 means an older session
  (typically the previous pod's, killed before it could say goodbye) still holds the scale set: the
  keeper ends the session its predecessor recorded, if any, and otherwise waits with the listener's one
  backoff until the service releases it, rather than exiting and crash-looping (ARC #3209). Passing
  failures are retried the same way.
- :meth:`SessionKeeper.renew` refreshes it when the queue token was refused, and falls back to
  :meth:`SessionKeeper.replace` (a new session) when the service no longer knows it (ARC #4356).
- :meth:`SessionKeeper.close` deletes it, with a timeout, so shutdown finishes within the pod's grace
  period; it is called on every exit path.

Fatal, ending the process: the scale set does not exist (404 on create), the credentials were refused
twice in a row (each refusal already includes the client's own retry with fresh credentials), or the
service rejects the request outright (:class:`~arc_scaleset.github.errors.FatalError`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from arc_scaleset.api.listener_cursor import ListenerCursor
from arc_scaleset.api.listener_state import SCALE_SET_NOT_FOUND
from arc_scaleset.backoff import Backoff
from arc_scaleset.github.errors import (
    FatalError,
    NotFound,
    RateLimited,
    SessionConflict,
    Unauthorized,
)
from arc_scaleset.github.models import MessageSession
from arc_scaleset.listener.errors import FatalListenerError, Stopping, error_class, is_retryable
from arc_scaleset.listener.health import Health
from arc_scaleset.listener.stop import StopSignal

log = logging.getLogger(__name__)

T = TypeVar("T")

# How many refusals of the credentials in a row end the process (each already includes one refresh).
CREDENTIAL_REFUSALS_FATAL = 2


class SessionAPI(Protocol):
    """The session calls of the Actions-service client (:class:`arc_scaleset.github.client.ActionsClient`)."""

    async def create_message_session(self, scale_set_id: int, owner: str) -> MessageSession: ...

    async def refresh_message_session(self, scale_set_id: int, session_id: str) -> MessageSession: ...

    async def delete_message_session(self, scale_set_id: int, session_id: str) -> None: ...


def session_owner() -> str:
    """The owner name for a new session: the pod's hostname (ARC's choice), else a random one."""
    name = os.environ.get("HOSTNAME") or socket.gethostname()
    return name or f"arc-scaleset-listener-{uuid.uuid4().hex[:12]}"


class CredentialStrikes:
    """Counts refusals of the credentials in a row; the second one is fatal."""

    def __init__(self) -> None:
        self.count = 0

    def refused(self, exc: BaseException) -> None:
        self.count += 1
        if self.count >= CREDENTIAL_REFUSALS_FATAL:
            raise FatalListenerError(
                f"GitHub refused the credentials {self.count} times in a row ({exc}); "
                "check the GitHub config secret (token or GitHub App) and its permissions"
            ) from None

    def accepted(self) -> None:
        self.count = 0


class SessionKeeper:
    """Owns the scale set's message session for the lifetime of the listener process.

    ``backoff`` is the listener's one backoff (:func:`~arc_scaleset.listener.errors.retry_backoff`), shared
    with the loop: creating a session never resets it, only a successful poll does, so a session that is
    created and lost again at once (ARC #4356's eviction, repeated) is recreated ever more slowly.
    ``health`` hears of every session created, given up or waited for.

    ``predecessor`` is the session a previous listener of this scale set recorded and may have left behind
    (docs/listener.md, "Taking over"): when the service answers 409 (a session holds the scale set), the
    keeper deletes that session and creates its own at once, instead of waiting about two minutes for the
    service to expire it. It is tried only while this process has not yet held a session of its own: a
    listener that lost its session later must not take it back from a successor that replaced it.

    ``resume_from`` is where the predecessor had got to in that session (api/listener_cursor.py, docs/listener.md
    "Leaving no gap"): the first :meth:`open` refreshes that session instead of creating one, so the service
    delivers again what the predecessor did not act on; :meth:`take_resumed` then hands the cursor to the loop.
    A session that cannot be refreshed (gone, refused) is left to the usual path: create, taking over on 409.
    """

    def __init__(
        self,
        api: SessionAPI,
        *,
        scale_set_id: int,
        owner: str,
        stop: StopSignal,
        backoff: Backoff,
        health: Health,
        strikes: CredentialStrikes | None = None,
        call_timeout: float = 30.0,
        predecessor: str | None = None,
    ) -> None:
        self._api = api
        self.scale_set_id = scale_set_id
        self.owner = owner
        self._stop = stop
        self._strikes = strikes if strikes is not None else CredentialStrikes()
        self._call_timeout = call_timeout
        self.backoff = backoff
        self._health = health
        self.predecessor = predecessor
        self.resume_from: ListenerCursor | None = None
        self._resumed: ListenerCursor | None = None
        self.session: MessageSession | None = None
        self.sessions_created = 0

    @property
    def held(self) -> bool:
        return self.session is not None

    def current(self) -> MessageSession:
        if self.session is None:
            raise RuntimeError("no message session is held")
        return self.session

    async def _call(self, call: Callable[[], Awaitable[T]]) -> T:
        async with asyncio.timeout(self._call_timeout):
            return await self._stop.race(call())

    async def _wait(self, delay: float | None = None) -> None:
        await self._stop.sleep(self.backoff.next_delay() if delay is None else delay)

    async def open(self) -> MessageSession:
        """Create a session, waiting out a held one and passing failures; raises Stopping or FatalListenerError.

        The first call resumes the predecessor's session instead when ``resume_from`` names one that is alive."""
        cursor, self.resume_from = self.resume_from, None
        if cursor is not None and not self.sessions_created:
            resumed = await self._resume(cursor)
            if resumed is not None:
                return resumed
        waiting_since_conflict = False
        while True:
            self._stop.check()
            try:
                session = await self._call(lambda: self._api.create_message_session(self.scale_set_id, self.owner))
            except Stopping:
                raise
            except SessionConflict as exc:
                if await self._take_over():
                    continue
                self._health.waiting_for_session(error_class(exc))
                if not waiting_since_conflict:
                    log.warning(
                        "another session holds the scale set (an earlier listener's?); waiting for the service to "
                        "release it",
                        extra={"scale_set_id": self.scale_set_id, "owner": self.owner},
                    )
                    waiting_since_conflict = True
                await self._wait()
                continue
            except NotFound as exc:
                # Reported before stopping, so the controller re-registers the scale set now (docs/controllers.md).
                self._health.waiting_for_session(SCALE_SET_NOT_FOUND)
                raise FatalListenerError(
                    f"runner scale set {self.scale_set_id} does not exist ({exc}); it was deleted on GitHub: the "
                    "controller will register it again"
                ) from None
            except Unauthorized as exc:
                self._health.waiting_for_session(error_class(exc))
                self._strikes.refused(exc)
                log.warning("the service refused the credentials; trying once more", extra={"error": str(exc)})
                await self._wait()
                continue
            except FatalError as exc:
                raise FatalListenerError(f"cannot create a message session: {exc}") from None
            except RateLimited as exc:
                self._health.waiting_for_session(error_class(exc))
                # Never sooner than the backoff: a Retry-After of 0 (or a reset time our clock has passed)
                # would otherwise ask again at once, as fast as the service answers.
                delay = max(self.backoff.next_delay(), exc.retry_after or 0.0)
                log.warning("rate limited while creating the session", extra={"retry_in_s": round(delay, 1)})
                await self._wait(delay)
                continue
            except Exception as exc:
                if not is_retryable(exc):
                    raise
                self._health.waiting_for_session(error_class(exc))
                delay = self.backoff.next_delay()
                log.warning(
                    "creating the message session failed; retrying",
                    extra={"error": str(exc) or error_class(exc), "retry_in_s": round(delay, 1)},
                )
                await self._wait(delay)
                continue
            # No backoff reset here: only a successful poll proves the session works.
            self._strikes.accepted()
            self.session = session
            self.sessions_created += 1
            self.predecessor = None
            self._health.session_created(session.session_id)
            log.info(
                "message session created",
                extra={"scale_set_id": self.scale_set_id, "owner": self.owner, "session_id": session.session_id},
            )
            return session

    async def _resume(self, cursor: ListenerCursor) -> MessageSession | None:
        """The predecessor's session, refreshed (a new queue URL and token, the statistics now); ``None`` when the
        service no longer has it or the refresh failed otherwise (never fatal: a session is created instead)."""
        try:
            session = await self._call(lambda: self._api.refresh_message_session(self.scale_set_id, cursor.session_id))
        except Stopping:
            raise
        except Exception as exc:
            if not is_retryable(exc):
                raise
            log.info(
                "the session an earlier listener recorded cannot be resumed; starting one",
                extra={"session_id": cursor.session_id, "error": str(exc) or error_class(exc)},
            )
            return None
        self.session = session
        self.sessions_created += 1  # held: never taken over again, as after a create
        self.predecessor = None
        self._resumed = cursor
        self._health.session_created(session.session_id)
        log.info(
            "message session resumed",
            extra={"scale_set_id": self.scale_set_id, "session_id": session.session_id,
                   "last_message_id": cursor.last_message_id, "acquiring": len(cursor.acquiring)},
        )  # fmt: skip
        return session

    def take_resumed(self) -> ListenerCursor | None:
        """The cursor of the session :meth:`open` resumed, once (``None`` for a session it created)."""
        cursor, self._resumed = self._resumed, None
        return cursor

    async def _take_over(self) -> bool:
        """Delete the predecessor's session, if there is one to try; True when it is gone (create again now)."""
        predecessor = self.predecessor
        if predecessor is None or self.sessions_created:
            return False
        log.info(
            "a session holds the scale set; ending the one an earlier listener recorded",
            extra={"scale_set_id": self.scale_set_id, "session_id": predecessor},
        )
        if not await self._delete_session(predecessor, within=min(self._call_timeout, 10.0)):
            return False  # tried again at the next 409, after the backoff delay
        self.predecessor = None
        return True

    async def renew(self) -> MessageSession:
        """Refresh the session (new queue URL and token); replace it when the service no longer has it."""
        session = self.current()
        try:
            fresh = await self._call(lambda: self._api.refresh_message_session(self.scale_set_id, session.session_id))
        except Stopping:
            raise
        except Exception as exc:
            if not is_retryable(exc):
                raise
            log.info("refreshing the message session failed; creating a new one", extra={"error": str(exc)})
            return await self.replace()
        if fresh is not session:
            session.replace_with(fresh)
        log.info("message session refreshed", extra={"session_id": session.session_id})
        return session

    async def replace(self) -> MessageSession:
        """Drop the current session (deleting it, best effort) and create a new one."""
        old, self.session = self.session, None
        if old is not None:
            await self._delete(old, within=min(self._call_timeout, 5.0))
        return await self.open()

    async def close(self, *, within: float = 10.0) -> bool:
        """Delete the session if one is held; True when the service confirmed (or no session was held).

        Never raises (it runs on exit paths) and never takes longer than ``within`` seconds. It does
        not listen to the stop signal: it is what shutdown is for.
        """
        session, self.session = self.session, None
        if session is None:
            return True
        return await self._delete(session, within=within)

    async def _delete(self, session: MessageSession, *, within: float) -> bool:
        return await self._delete_session(session.session_id, within=within)

    async def _delete_session(self, session_id: str, *, within: float) -> bool:
        deleted = False
        try:
            async with asyncio.timeout(within):
                await self._api.delete_message_session(self.scale_set_id, session_id)
        except NotFound:
            log.info("message session was already gone", extra={"session_id": session_id})
            deleted = True
        except Exception as exc:
            # The service expires an abandoned session by itself; the reported state keeps naming it, so
            # the next listener can end it.
            log.warning(
                "could not delete the message session",
                extra={"session_id": session_id, "error": str(exc) or error_class(exc)},
            )
        else:
            log.info("message session deleted", extra={"session_id": session_id})
            deleted = True
        self._health.session_ended(session_id, deleted=deleted)
        return deleted
