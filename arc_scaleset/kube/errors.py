"""Errors raised by the Kubernetes client.

Two families under :class:`KubeError`:

- :class:`ApiError` and its subclasses: the API server answered with an error ``Status``. There is one
  subclass per ``Status.reason`` that callers branch on (``except NotFound``, ``except Conflict``...);
  anything else is a plain :class:`ApiError` carrying the HTTP status and reason.
- :class:`TransportError` (:class:`ConnectionFailed`, :class:`RequestTimeout`): no answer at all.

Every message is one line built from the server's own message (or the transport failure), never from
request headers, so bearer tokens and client keys cannot leak into logs through ``str(exc)``.
"""

# ruff: noqa: N818  (the names follow Kubernetes Status reasons, as callers expect)
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from arc_scaleset.observability.logging import redact


class KubeError(Exception):
    """Base of every error the Kubernetes client raises."""


class KubeconfigError(KubeError, ValueError):
    """A kubeconfig or in-cluster configuration that cannot be used (missing file, context, user...)."""


class ApiError(KubeError):
    """The API server rejected a request with an error ``Status``.

    ``status`` is the HTTP status code, ``reason`` the ``Status.reason`` (``"NotFound"``, ``"Conflict"``...,
    or the HTTP phrase when the body was not a ``Status``), ``message`` the server's one-line explanation,
    ``details`` the ``Status.details`` object when present. ``request`` (``"GET /api/v1/..."``) says which
    call failed; it never contains credentials.
    """

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        request: str | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = _one_line(message)
        self.details = details
        self.request = request
        super().__init__(str(self))

    def __str__(self) -> str:
        prefix = f"{self.request}: " if self.request else ""
        return f"{prefix}{self.status} {self.reason}: {self.message}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.status, self.reason, self.message, self.details, self.request))


def _rebuild(
    cls: type[ApiError], status: int, reason: str, message: str, details: dict[str, Any] | None, request: str | None
) -> ApiError:
    return cls(status, reason, message, details, request=request)


class BadRequest(ApiError):
    """400: the request was malformed (bad patch, bad selector, bad field)."""


class Unauthorized(ApiError):
    """401: the server did not accept the credentials (expired or unknown token, untrusted client cert)."""


class Forbidden(ApiError):
    """403: authenticated, but RBAC (or an admission policy) does not allow the request."""


class NotFound(ApiError):
    """404: the object (or the namespace, or the resource type) does not exist."""


class AlreadyExists(ApiError):
    """409 ``AlreadyExists``: a create hit an existing object of the same name."""


class Conflict(ApiError):
    """409 ``Conflict``: an optimistic-concurrency precondition (resourceVersion, uid) did not hold."""


class Gone(ApiError):
    """410 ``Gone``/``Expired``: a watch or list resourceVersion (or continue token) is too old; relist."""


class Invalid(ApiError):
    """422 ``Invalid``: the object failed validation; ``details.causes`` lists the fields."""


class TooManyRequests(ApiError):
    """429: throttled by API priority and fairness; ``retry_after`` is the server's hint in seconds."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        request: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.retry_after = retry_after
        super().__init__(status, reason, message, details, request=request)


class ServerError(ApiError):
    """5xx: the server (or something in front of it) failed; usually transient."""


class TransportError(KubeError):
    """No usable HTTP answer: the server could not be reached, TLS failed, or it did not answer in time."""


class ConnectionFailed(TransportError):
    """The connection could not be made or broke (refused, DNS, TLS verification, reset)."""


class RequestTimeout(TransportError):
    """The server did not answer (or a watch went silent) within the client's timeout."""


_BY_REASON: dict[str, type[ApiError]] = {
    "BadRequest": BadRequest,
    "Unauthorized": Unauthorized,
    "Forbidden": Forbidden,
    "NotFound": NotFound,
    "AlreadyExists": AlreadyExists,
    "Conflict": Conflict,
    "Gone": Gone,
    "Expired": Gone,
    "Invalid": Invalid,
    "TooManyRequests": TooManyRequests,
}

_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}

_HTTP_PHRASES: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _one_line(text: str, *, limit: int = 2000) -> str:
    """``text`` on one line, masked of secrets, then cut to ``limit`` characters.

    Masked before the cut: a secret across it (a proxy's page echoing a credential) would leave its first
    characters behind, which neither its registered value nor a credential pattern matches afterwards. Only a
    prefix of ``32 * limit`` characters is masked, so a huge page costs no more than a long message; masked, it
    is still longer than ``limit`` unless almost all of it was secrets.
    """
    flat = redact(" ".join(text.split())[: 32 * limit])
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _parse_retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        # The HTTP-date form is never sent by the API server; ignore it rather than guess.
        return None
    return seconds if seconds >= 0 else None


def error_from_status(
    status: int,
    body: bytes | Mapping[str, Any] | None,
    *,
    request: str | None = None,
    retry_after: str | None = None,
) -> ApiError:
    """Build the :class:`ApiError` subclass for an error response (or an in-stream watch ``ERROR``).

    ``body`` is the raw response body or an already-decoded ``Status``; bodies that are not a ``Status``
    (a proxy's HTML page, plain text) become the message, flattened and shortened to one line.
    ``status`` is overridden by ``Status.code`` when the body carries one (watch ``ERROR`` events).
    """
    status_obj: Mapping[str, Any] | None = None
    text = ""
    if isinstance(body, Mapping):
        status_obj = body
    elif body:
        try:
            decoded = orjson.loads(body)
        except orjson.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict) and decoded.get("kind") == "Status":
            status_obj = decoded
        else:
            text = body.decode("utf-8", errors="replace")

    reason = ""
    message = text
    details: dict[str, Any] | None = None
    if status_obj is not None:
        code = status_obj.get("code")
        if isinstance(code, int) and code >= 400:
            status = code
        reason = str(status_obj.get("reason") or "")
        message = str(status_obj.get("message") or "")
        raw_details = status_obj.get("details")
        details = dict(raw_details) if isinstance(raw_details, Mapping) else None

    if not reason:
        reason = _HTTP_PHRASES.get(status, f"HTTP{status}")
    if not message:
        message = reason

    cls = _BY_REASON.get(reason) or _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else ApiError
    elif cls in (AlreadyExists, Conflict) and status != 409:
        # A reason that contradicts the code (seen from aggregated APIs) falls back to the code.
        cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)

    if cls is TooManyRequests:
        hint = _parse_retry_after(retry_after)
        if hint is None and details is not None:
            seconds = details.get("retryAfterSeconds")
            hint = float(seconds) if isinstance(seconds, int | float) and seconds >= 0 else None
        return TooManyRequests(status, reason, message, details, request=request, retry_after=hint)
    return cls(status, reason, message, details, request=request)
