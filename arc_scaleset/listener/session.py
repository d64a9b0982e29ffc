"""The listener's message session: obtained patiently, renewed or replaced in-process, always released.

The Actions service allows one message session per scale set. :class:`SessionKeeper` holds it:

- :meth:`SessionKeeper.open` creates it with the pod's hostname as owner. A 409 means an older session
  (typically the previous pod's, killed before it could say goodbye) still holds the scale set: the
  keeper waits with jittered backoff until the service releases it, rather than exiting and
  crash-looping (ARC #3209). Passing failures are retried the same way.
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

from arc_scaleset.backoff import Backoff
from arc_scaleset.github.errors import (
    FatalError,
    NotFound,
    RateLimited,
    SessionConflict,
    Unauthorized,
)
from arc_scaleset.github.models import MessageSession
from arc_scaleset.listener.errors import FatalListenerError, Stopping, is_retryable
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

    ``on_attempt`` is called after every answered or failed attempt to obtain a session, so that a
    liveness probe can tell "patiently waiting for a held session" from "stuck".
    """

    def __init__(
        self,
        api: SessionAPI,
        *,
        scale_set_id: int,
        owner: str,
        stop: StopSignal,
        strikes: CredentialStrikes | None = None,
        call_timeout: float = 30.0,
        backoff: Backoff | None = None,
        on_attempt: Callable[[], None] = lambda: None,
    ) -> None:
        self._api = api
        self.scale_set_id = scale_set_id
        self.owner = owner
        self._stop = stop
        self._strikes = strikes if strikes is not None else CredentialStrikes()
        self._call_timeout = call_timeout
        # Jitter spreads the retries of listeners that lost their sessions together (a service outage).
        self._backoff = backoff if backoff is not None else Backoff(base=1.0, cap=30.0, jitter=0.5)
        self._on_attempt = on_attempt
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

    async def open(self) -> MessageSession:
        """Create a session, waiting out a held one and passing failures; raises Stopping or FatalListenerError."""
        waiting_since_conflict = False
        while True:
            self._stop.check()
            try:
                session = await self._call(lambda: self._api.create_message_session(self.scale_set_id, self.owner))
            except Stopping:
                raise
            except SessionConflict:
                self._on_attempt()
                if not waiting_since_conflict:
                    log.warning(
                        "another session holds the scale set (an earlier listener's?); waiting for the service to "
                        "release it",
                        extra={"scale_set_id": self.scale_set_id, "owner": self.owner},
                    )
                    waiting_since_conflict = True
                await self._stop.sleep(self._backoff.next_delay())
                continue
            except NotFound as exc:
                raise FatalListenerError(
                    f"runner scale set {self.scale_set_id} does not exist ({exc}); it was deleted on GitHub: the "
                    "controller will register it again"
                ) from None
            except Unauthorized as exc:
                self._on_attempt()
                self._strikes.refused(exc)
                log.warning("the service refused the credentials; trying once more", extra={"error": str(exc)})
                await self._stop.sleep(self._backoff.next_delay())
                continue
            except FatalError as exc:
                raise FatalListenerError(f"cannot create a message session: {exc}") from None
            except RateLimited as exc:
                self._on_attempt()
                delay = exc.retry_after if exc.retry_after is not None else self._backoff.next_delay()
                log.warning("rate limited while creating the session", extra={"retry_in_s": round(delay, 1)})
                await self._stop.sleep(delay)
                continue
            except Exception as exc:
                if not is_retryable(exc):
                    raise
                self._on_attempt()
                delay = self._backoff.next_delay()
                log.warning(
                    "creating the message session failed; retrying",
                    extra={"error": str(exc) or type(exc).__name__, "retry_in_s": round(delay, 1)},
                )
                await self._stop.sleep(delay)
                continue
            self._backoff.reset()
            self._strikes.accepted()
            self._on_attempt()
            self.session = session
            self.sessions_created += 1
            log.info(
                "message session created",
                extra={"scale_set_id": self.scale_set_id, "owner": self.owner, "session_id": session.session_id},
            )
            return session

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
        try:
            async with asyncio.timeout(within):
                await self._api.delete_message_session(self.scale_set_id, session.session_id)
        except NotFound:
            log.info("message session was already gone", extra={"session_id": session.session_id})
            return True
        except Exception as exc:
            # The service expires an abandoned session by itself; the next listener waits for that.
            log.warning(
                "could not delete the message session",
                extra={"session_id": session.session_id, "error": str(exc) or type(exc).__name__},
            )
            return False
        log.info("message session deleted", extra={"session_id": session.session_id})
        return True
