"""Logging for the listener process: ``log_level`` and ``log_format`` (``text`` or ``json``) from its config.

A stop-gap until the shared :mod:`arc_scaleset.observability` setup lands: plain stdlib logging to stdout,
one line per record, with the ``extra={...}`` fields the listener attaches rendered as ``key=value`` (text)
or as JSON members. Nothing here ever sees a secret: the listener never logs credentials or tokens.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
from typing import Any

import orjson

# ARC's level names (debug/info/warn/error) to stdlib levels.
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {key: value for key, value in vars(record).items() if key not in _STANDARD}


def _timestamp(record: logging.LogRecord) -> str:
    return dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(
            f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}" for key, value in _extras(record).items()
        )
        line = f"{_timestamp(record)} {record.levelname:<7} {record.name}: {record.getMessage()}"
        if fields:
            line += " " + fields
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            **_extras(record),
        }
        if record.exc_info:
            document["error"] = self.formatException(record.exc_info)
        return orjson.dumps(document, default=str).decode()


def configure_logging(*, level: str = "info", fmt: str = "text") -> None:
    """Send every record at ``level`` or above to stdout in ``fmt``; replaces earlier handlers."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(LEVELS.get(level, logging.INFO))
    # aiohttp's access and client internals are noise at debug level.
    logging.getLogger("aiohttp").setLevel(max(root.level, logging.INFO))
