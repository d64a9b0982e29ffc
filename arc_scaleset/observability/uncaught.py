"""Uncaught exceptions go through the redacting logger, never as a raw traceback on standard error.

Python prints an exception nobody caught (in the main thread, another thread, or an asyncio task nobody
awaited) with its own hooks, straight to standard error: past :mod:`arc_scaleset.observability.logging`'s
redaction, in neither of the configured formats. A traceback's text can carry a credential (an exception
message that quotes a response body, a URL with a token). :func:`install_uncaught_exception_logging` routes
all three through ``logger``, after ``configure_logging``; :func:`log_asyncio_exception` is the asyncio
loop's handler (``loop.set_exception_handler``).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from types import TracebackType
from typing import Any

__all__ = ["install_uncaught_exception_logging", "log_asyncio_exception", "log_uncaught"]

_logger = logging.getLogger("arc_scaleset.uncaught")


def log_uncaught(
    exc_type: type[BaseException],
    exc: BaseException,
    tb: TracebackType | None,
    *,
    where: str = "the process",
) -> None:
    """Log an exception nobody caught, with its traceback, at error level (redacted like every log line)."""
    if issubclass(exc_type, KeyboardInterrupt):
        sys.__excepthook__(exc_type, exc, tb)  # Ctrl-C in a terminal: Python's own short message
        return
    _logger.error(f"uncaught exception in {where}: {_describe(exc_type, exc, tb)}", exc_info=(exc_type, exc, tb))


def _describe(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> str:
    # A renderer shows the exception's text with its traceback; one never raised has none to show.
    return exc_type.__name__ if tb is not None else f"{exc_type.__name__}: {exc}"


def _thread_hook(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None:
        return
    name = args.thread.name if args.thread is not None else "a thread"
    log_uncaught(args.exc_type, args.exc_value, args.exc_traceback, where=f"thread {name}")


def log_asyncio_exception(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """An asyncio loop exception handler: what the default one prints, through the logger instead."""
    exc = context.get("exception")
    message = str(context.get("message") or "unhandled exception in the event loop")
    if isinstance(exc, BaseException):
        described = _describe(type(exc), exc, exc.__traceback__)
        _logger.error(
            f"uncaught exception in a task: {message}: {described}", exc_info=(type(exc), exc, exc.__traceback__)
        )
    else:
        _logger.error(f"event loop error: {message}")


def install_uncaught_exception_logging() -> None:
    """Route uncaught exceptions of the main thread and of other threads through the logger (idempotent).

    Asyncio tasks need the loop's own handler: ``asyncio.get_running_loop().set_exception_handler(
    log_asyncio_exception)`` once the loop runs.
    """
    sys.excepthook = log_uncaught
    threading.excepthook = _thread_hook
