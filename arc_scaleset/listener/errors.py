"""How the listener reacts to each kind of failure, in one place.

Only :class:`FatalListenerError` ends the process (exit code 1, its message as the last log line). Everything
else is retried in-process: ARC's listener exits on any error and relies on its pod being recreated,
which loses the session, crash-loops on a held session (ARC #3209) and on passing outages (ARC #3210, #3813).
"""

from __future__ import annotations

import asyncio
import enum

import aiohttp
import msgspec

from arc_scaleset.backoff import Backoff
from arc_scaleset.github.errors import (
    ActionsError,
    FatalError,
    MessageQueueTokenExpired,
    NotFound,
    RateLimited,
    SessionConflict,
    TransientError,
    Unauthorized,
)
from arc_scaleset.github.models import MessageFormatError
from arc_scaleset.kube.errors import KubeError

# The one retry policy of the session and the poll (docs/listener.md, "Backoff"): 1 s doubling to 2 minutes,
# each delay stretched by up to 20 % so listeners that failed together (a service outage) spread out.
RETRY_BASE = 1.0
RETRY_CAP = 120.0
RETRY_JITTER = 0.2


def retry_backoff() -> Backoff:
    """The backoff every failed session or poll call goes through (one instance per listener)."""
    return Backoff(base=RETRY_BASE, cap=RETRY_CAP, jitter=RETRY_JITTER)


def error_class(exc: BaseException) -> str:
    """A short, secret-free name for what went wrong (the exception's class), for logs and the reported state."""
    return type(exc).__name__


class FatalListenerError(Exception):
    """The listener cannot go on: bad configuration, refused credentials, or the scale set is gone.

    The message is the process's last log line, so it says what happened and what to do; it never
    contains a secret.
    """


class Stopping(Exception):  # noqa: N818 - a signal, not an error
    """Shutdown was requested while the listener was waiting; unwinds to the top of the loop."""


class Reaction(enum.Enum):
    """What the poll loop does after a failed session-bound call."""

    RETRY = "retry after a backoff delay"
    RENEW_SESSION = "refresh the session (re-create it if that fails)"
    RECREATE_SESSION = "create a new session"
    CREDENTIALS_REFUSED = "count a refusal of the credentials"


def reaction_to(exc: BaseException) -> Reaction:
    """The reaction to ``exc`` raised by a call on the message queue (poll, ack, acquire).

    - the queue token was refused even after the client's own session refresh → renew the session;
    - 404: the service evicted the session (ARC #4356: "session ID doesn't exist") → a new session;
    - any other 401 → the credentials were refused (the client already retried with fresh ones);
    - everything else (5xx, 429, 3xx, timeouts, connection errors, an answer without a readable message)
      → back off and retry.

    Every reaction first waits for the listener's one backoff (:func:`retry_backoff`), so that no failure
    that repeats, whatever its class, makes the listener call the service faster and faster (ARC's listener,
    and this one before, recreated a session as fast as the service answered 404).
    """
    if isinstance(exc, MessageQueueTokenExpired):
        return Reaction.RENEW_SESSION
    if isinstance(exc, NotFound):
        return Reaction.RECREATE_SESSION
    if isinstance(exc, Unauthorized):
        return Reaction.CREDENTIALS_REFUSED
    return Reaction.RETRY


def is_retryable(exc: BaseException) -> bool:
    """Whether ``exc`` is an expected, passing failure of an outbound call (as opposed to a bug)."""
    return isinstance(
        exc,
        ActionsError
        | KubeError
        | TimeoutError
        | asyncio.TimeoutError
        | aiohttp.ClientError
        | OSError
        | MessageFormatError
        | msgspec.ValidationError,
    )


__all__ = [
    "FatalError",
    "FatalListenerError",
    "RateLimited",
    "Reaction",
    "SessionConflict",
    "Stopping",
    "TransientError",
    "error_class",
    "is_retryable",
    "reaction_to",
    "retry_backoff",
]
