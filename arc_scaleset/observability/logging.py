"""Process-wide logging: structlog over stdlib logging, text or JSON, with secrets masked on the way out.

One call per process, at start-up::

    configure_logging(level="info", fmt="json")
    log = get_logger(__name__)
    with log_context(namespace="arc-runners", name="my-set"):
        log.info("reconciling", replicas=3)

- Levels are ARC's names: ``debug``, ``info``, ``warn`` (``warning`` also accepted), ``error``.
- ``fmt="text"``: one human-readable line per event (structlog's console renderer, no colours, plain
  tracebacks); ``fmt="json"``: one JSON object per line (``timestamp``, ``level``, ``logger``, ``event`` and
  the bound keys).
- Both structlog loggers and plain ``logging`` loggers (third-party libraries, code that logs with
  ``extra={...}``) go through the same handler, renderer and redaction.
- Context bound with :func:`log_context` (or ``structlog.contextvars``) is carried by every event logged in
  that task, so a reconcile binds ``key``/``namespace``/``name`` once.

**Redaction.** Values registered with :func:`register_secret` (8 characters or more; shorter values would
mask ordinary words) and anything that looks like a credential — GitHub tokens (``ghp_``, ``gho_``,
``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``), JWTs (three base64url segments, ``eyJ...``: App, admin and
queue tokens), PEM ``PRIVATE KEY`` blocks, the value of an ``Authorization`` header, ``Bearer``/
``RemoteAuth``/``Basic``/``token`` credentials, ``token=``/``password:``-style pairs and the password of a
URL's user information (``scheme://user:password@host``) — are replaced by
``[REDACTED]`` twice: in the event's values before rendering (so JSON escaping cannot split a secret) and in
the finished line (which covers keys, tracebacks and reprs). :class:`RedactingFilter` applies the same
masking to ``LogRecord`` messages, for handlers this module does not own.

:func:`redact` is the one masking function of the process: Kubernetes Event notes and status condition
messages go through it too (``kube/events.py``, ``kube/conditions.py``), so text that reaches the API server
is masked exactly as a log line is.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any, Final, TextIO

import orjson
import structlog

__all__ = [
    "LEVELS",
    "REDACTED",
    "RedactingFilter",
    "configure_logging",
    "get_logger",
    "log_context",
    "redact",
    "register_secret",
    "unregister_secret",
]

#: ARC's level names (``--log-level``) to stdlib levels.
LEVELS: Final[Mapping[str, int]] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
FORMATS: Final = ("text", "json")
REDACTED: Final = "[REDACTED]"
MIN_SECRET_LENGTH: Final = 8

# Credential shapes masked whether or not anyone registered them.
_CREDENTIAL_PATTERNS: Final = (
    # PEM private keys, including a block cut short by truncation (then everything after BEGIN goes).
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY-----|.*)",
    # GitHub tokens: personal (classic and fine-grained), OAuth, user-to-server, server-to-server, refresh.
    r"\bgh[pousr]_[A-Za-z0-9]{16,}",
    r"\bgithub_pat_[A-Za-z0-9_]{16,}",
    # JWTs (GitHub App JWTs, Actions-service admin and message-queue tokens): a JSON header, base64url-encoded,
    # always starts "eyJ"; the signature may be empty (alg "none").
    r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*",
)
# Authorization schemes: keep the scheme word so a reader still sees what kind of credential it was.
# Eight characters or more, so prose such as "Bearer auth" stays readable.
_AUTH_SCHEME_RE: Final = re.compile(r"(?i)\b(Bearer|RemoteAuth|Basic)(\s+)(?!\[REDACTED\])[^\s\"',;\\]{8,}")
# GitHub's REST API also takes "Authorization: token <x>". "token" is a common word, so its value must look
# like a credential: a run of token characters with a digit in it (8 or more), or 20 or more of them.
_TOKEN_CHARS: Final = r"[A-Za-z0-9_.~+/=-]"
_TOKEN_SCHEME_RE: Final = re.compile(
    rf"(?i)\b(token)(\s+)(?:(?={_TOKEN_CHARS}*\d){_TOKEN_CHARS}{{8,}}|{_TOKEN_CHARS}{{20,}})"
)
# "Authorization: <anything>" (a header echoed by a proxy, a dict repr, JSON): the value goes, the scheme word
# stays. Also Proxy-Authorization.
_SCHEMES: Final = "bearer|remoteauth|basic|token|digest|negotiate"
_AUTH_HEADER_RE: Final = re.compile(
    r"(?i)\b((?:proxy-)?authorization)([\"']?\s*[:=]\s*[\"']?)"
    rf"(?:({_SCHEMES})(\s+))?(?!(?:{_SCHEMES})\s)(?!\[REDACTED\])([^\s\"',;}}]+)"
)
# key=value and "key": "value" pairs whose key names a credential (an echoed form, query or JSON body).
_SECRET_PAIR_RE: Final = re.compile(
    r"(?i)\b((?:access_|refresh_|id_|registration_|installation_)?token|password|passwd|client_secret|"
    r"private_key|secret)([\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED\])([^\s\"',;&}]{8,})"
)

# The password of a URL's user information (``scheme://user:password@host``: a proxy URL, a clone URL): the user
# name stays, so a reader still sees which account it was. A password may hold any character but the
# delimiters of the authority (``@``, ``/``, ``?``, ``#``) and white space; ``[REDACTED]`` is never re-masked.
_URL_PASSWORD_RE: Final = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/?#@:]*:)(?!\[REDACTED\]@)[^\s/?#@]+@")

_secrets: set[str] = set()
_secrets_lock = threading.Lock()
_pattern: re.Pattern[str] | None = None  # rebuilt lazily after the registry changes


def register_secret(value: str) -> None:
    """Mask ``value`` wherever it appears in any later log line. Values under 8 characters are ignored."""
    global _pattern
    if not isinstance(value, str) or len(value) < MIN_SECRET_LENGTH:
        return
    with _secrets_lock:
        if value not in _secrets:
            _secrets.add(value)
            _pattern = None


def unregister_secret(value: str) -> None:
    """Stop masking ``value`` (a rotated credential); credential-shaped text stays masked regardless."""
    global _pattern
    with _secrets_lock:
        if value in _secrets:
            _secrets.discard(value)
            _pattern = None


def _current_pattern() -> re.Pattern[str]:
    global _pattern
    pattern = _pattern
    if pattern is None:
        with _secrets_lock:
            # Longest first, so a secret that contains another is masked whole.
            literals = [re.escape(s) for s in sorted(_secrets, key=len, reverse=True)]
            pattern = re.compile("|".join([*literals, *_CREDENTIAL_PATTERNS]), re.DOTALL)
            _pattern = pattern
    return pattern


def redact(text: str) -> str:
    """``text`` with every registered secret and credential-shaped substring replaced by ``[REDACTED]``."""
    masked = _current_pattern().sub(REDACTED, text)
    masked = _URL_PASSWORD_RE.sub(rf"\1{REDACTED}@", masked)
    masked = _AUTH_HEADER_RE.sub(_mask_header_value, masked)
    masked = _AUTH_SCHEME_RE.sub(rf"\1\2{REDACTED}", masked)
    masked = _TOKEN_SCHEME_RE.sub(rf"\1\2{REDACTED}", masked)
    return _SECRET_PAIR_RE.sub(rf"\1\2{REDACTED}", masked)


def _mask_header_value(match: re.Match[str]) -> str:
    name, separator, scheme, space = match.group(1, 2, 3, 4)
    return f"{name}{separator}{scheme or ''}{space or ''}{REDACTED}"


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {_redact_value(k): _redact_value(v) for k, v in value.items()}
    if isinstance(value, tuple):
        # Stays a tuple: ``exc_info`` is one, and the console renderer prints only a tuple (as a list, the
        # traceback was dropped); its text is masked in the finished line.
        return tuple(_redact_value(item) for item in value)
    if isinstance(value, list | set | frozenset):
        return [_redact_value(item) for item in value]
    return value


def redact_event_dict(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: mask secrets in every value (and key) of the event before it is rendered."""
    for key in list(event_dict):
        if key.startswith("_"):  # structlog's private members (_record, _from_structlog)
            continue
        value = event_dict[key]
        clean_key = redact(key)
        if clean_key != key:
            del event_dict[key]
        event_dict[clean_key] = _redact_value(value)
    return event_dict


class RedactingFilter(logging.Filter):
    """A stdlib filter that masks secrets in a record's message, arguments and ``extra`` strings in place.

    Attach it to a handler: logger-level filters do not see records propagated from child loggers.
    """

    _STANDARD: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

    def filter(self, record: logging.LogRecord) -> bool:
        # A dict message is a structlog event on its way to ProcessorFormatter, which must get it intact:
        # redact_event_dict masks it there.
        if not isinstance(record.msg, dict):
            try:
                message = record.getMessage()
            except (TypeError, ValueError):  # mismatched %-arguments: logging reports those itself later
                message = None
            if message is not None:
                record.msg = redact(message)
                record.args = None
        for key, value in list(vars(record).items()):
            if key not in self._STANDARD and isinstance(value, str | dict | list | tuple):
                setattr(record, key, _redact_value(value))
        return True


class _RedactingProcessorFormatter(structlog.stdlib.ProcessorFormatter):
    """Masks the finished line too: keys, exception tracebacks and object reprs are rendered late."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def _slog_keys(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Name the JSON members as Go's slog (and so ARC) does: ``time``, ``level``, ``msg``, so log pipelines
    built for ARC's JSON logs read ours unchanged."""
    if "timestamp" in event_dict:
        event_dict["time"] = event_dict.pop("timestamp")
    if "event" in event_dict:
        event_dict["msg"] = event_dict.pop("event")
    return event_dict


def _json_dumps(obj: Any, **_: Any) -> str:
    return orjson.dumps(obj, default=str).decode()


_SHARED_PROCESSORS: Final[list[Any]] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]
_HANDLER_MARK: Final = "_arc_scaleset_handler"


def configure_logging(*, level: str = "info", fmt: str = "text", stream: TextIO | None = None) -> None:
    """Route all logging of this process to ``stream`` (default: standard error) at ``level`` in ``fmt``.

    Idempotent: a second call replaces the handler the first one installed (and nothing else on the root
    logger). Raises ``ValueError`` for an unknown level or format, naming the accepted values.
    """
    level_number = LEVELS.get(level.lower())
    if level_number is None:
        raise ValueError(f"unknown log level {level!r}: expected one of debug, info, warn, error")
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r}: expected text or json")

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_SHARED_PROCESSORS,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached: a logger cached before structlog is reconfigured or reset (tests do both) would keep
        # the old processors; our log volume is far too low for the caching to matter.
        cache_logger_on_first_use=False,
    )

    renderer: Any
    final: list[Any] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if fmt == "json":
        final += [structlog.processors.format_exc_info, redact_event_dict, _slog_keys]
        renderer = structlog.processors.JSONRenderer(serializer=_json_dumps)
    else:
        final += [redact_event_dict]
        renderer = structlog.dev.ConsoleRenderer(
            colors=False,
            # Never rich's traceback: it prints local variables, which is where credentials live.
            exception_formatter=structlog.dev.plain_traceback,
        )
    formatter = _RedactingProcessorFormatter(
        foreign_pre_chain=[*_SHARED_PROCESSORS, structlog.stdlib.ExtraAdder()],
        processors=[*final, renderer],
    )

    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter)
    handler.addFilter(RedactingFilter())
    setattr(handler, _HANDLER_MARK, True)

    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(level_number)


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    """A structlog logger named ``name`` (use ``__name__``); keyword arguments become event keys."""
    logger: structlog.stdlib.BoundLogger = structlog.stdlib.get_logger(name)
    return logger


@contextmanager
def log_context(**values: Any) -> Iterator[None]:
    """Bind ``values`` to every event logged in the current task until the block ends (contextvars)."""
    with structlog.contextvars.bound_contextvars(**values):
        yield
