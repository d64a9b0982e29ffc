"""What every route of the simulated GitHub shares: JSON responses, route tags, error translation, auth headers,
request bodies.

The protocol routes speak one of two error dialects (:class:`Dialect`); a handler is tagged with its route
name and dialect by :func:`protocol_route`, which is what fault rules match and what the request log records.
Handlers raise :class:`~arc_scaleset_lab.sim.errors.ActionsError` or
:class:`~arc_scaleset_lab.sim.errors.GitHubError`; :func:`error_response` turns either into its JSON answer.
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from aiohttp import web

from arc_scaleset_lab.sim import errors

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_AnyHandler = TypeVar("_AnyHandler", bound=Callable[..., Awaitable[web.StreamResponse]])

_ROUTE_ATTR = "sim_protocol_route"
_BOM = b"\xef\xbb\xbf"


class Dialect(enum.Enum):
    """How a protocol route words its errors: see :mod:`arc_scaleset_lab.sim.errors`."""

    GITHUB = "github"  # {"message", "documentation_url"}
    ACTIONS = "actions"  # {"typeName", "message"}


@dataclass(frozen=True)
class ProtocolRoute:
    """A protocol endpoint's name (what fault rules match, e.g. ``get_message``) and its error dialect."""

    name: str
    dialect: Dialect


def protocol_route(name: str, dialect: Dialect) -> Callable[[_AnyHandler], _AnyHandler]:
    """Tag a handler (a function or a method) as the protocol route ``name``. Untagged handlers (the admin API)
    get no faults and no request log."""

    def tag(handler: _AnyHandler) -> _AnyHandler:
        setattr(handler, _ROUTE_ATTR, ProtocolRoute(name, dialect))
        return handler

    return tag


def protocol_route_of(request: web.Request) -> ProtocolRoute | None:
    """The tag of the handler ``request`` was routed to; None for the admin API and unknown paths."""
    # A bound method reads its attributes from the function it wraps, so tagged methods are found too.
    route: ProtocolRoute | None = getattr(request.match_info.handler, _ROUTE_ATTR, None)
    return route


def json_response(data: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json", headers=headers)


def no_content() -> web.Response:
    return web.Response(status=204)


def error_response(
    error: errors.ActionsError | errors.GitHubError, *, headers: dict[str, str] | None = None
) -> web.Response:
    """The answer to a protocol error, in the dialect of the error's type."""
    return json_response(error.body(), status=error.status, headers=headers)


def credential(request: web.Request, scheme: str) -> str | None:
    """The credential after ``<scheme> `` in Authorization (the scheme case-insensitive), else None."""
    header = request.headers.get("Authorization", "")
    given, _, value = header.partition(" ")
    if given.lower() != scheme.lower() or not value.strip():
        return None
    return value.strip()


def token_credential(request: web.Request) -> str | None:
    """A PAT or installation token, sent the ways GitHub's REST API takes one; None when none is sent.

    ``Bearer <token>``, the older ``token <token>``, or HTTP Basic with the token as the password and any user
    name (ARC v0.27.6 sends ``Basic base64("github:<PAT>")`` for the registration-token call). A Basic pair
    whose password is empty or ``x-oauth-basic`` carries the token as the user name, GitHub's older form.
    """
    bearer = credential(request, "Bearer") or credential(request, "token")
    if bearer is not None:
        return bearer
    basic = credential(request, "Basic")
    if basic is None:
        return None
    try:
        user, colon, password = base64.b64decode(basic, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    if not colon:
        return None
    token = password if password and password != "x-oauth-basic" else user
    return token or None


async def read_json(request: web.Request, *, invalid: Callable[[], Exception], empty: Any = None) -> Any:
    """The request body as JSON; ``empty`` for a blank body; raises ``invalid()`` when it is not JSON.

    A leading UTF-8 BOM is tolerated, as the real services tolerate it.
    """
    raw = (await request.read()).removeprefix(_BOM)
    if not raw.strip():
        return empty
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise invalid() from None
