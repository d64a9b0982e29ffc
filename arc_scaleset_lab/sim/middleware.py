"""The protocol middleware: fault rules, error translation and the request log, around every protocol route.

Only handlers tagged with :func:`~arc_scaleset_lab.sim.http.protocol_route` pass through it; the ``/_sim``
admin API and unknown paths are served untouched (no faults, no log).
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass

from aiohttp import web

from arc_scaleset.clock import Clock
from arc_scaleset_lab.sim import errors
from arc_scaleset_lab.sim.faults import FaultInjector, FaultRule
from arc_scaleset_lab.sim.http import Dialect, Handler, ProtocolRoute, error_response, protocol_route_of

_SERVICE_EXCEPTION = "Microsoft.VisualStudio.Services.Common.VssServiceException"
_UNAUTHORIZED_EXCEPTION = "Microsoft.VisualStudio.Services.Common.VssUnauthorizedException"


@dataclass(frozen=True)
class RequestRecord:
    """One protocol request as the sim saw it. Never holds credentials."""

    at: float  # time.monotonic() of arrival
    method: str
    path: str
    query: str
    route: str
    status: int  # 0 when the connection was dropped by a fault
    user_agent: str | None
    max_capacity: str | None  # the X-ScaleSetMaxCapacity header a listener sends with its polls
    fault: bool
    # The TCP peer's address: through a proxy, the proxy's outgoing address. The proxy tests tell proxied
    # requests from direct ones by it (arc_scaleset_lab/harness/proxy.py binds its outgoing side apart).
    peer: str | None = None


RequestLog = collections.deque[RequestRecord]


class ProtocolMiddleware:
    """Applies the first fault rule that fires, answers model errors in the route's dialect, records the request.

    ``requests`` is appended to (a bounded deque keeps the most recent); ``clock`` times injected latency.
    Install :meth:`handle` as the application's middleware.
    """

    def __init__(self, *, faults: FaultInjector, clock: Clock, requests: RequestLog) -> None:
        self._faults = faults
        self._clock = clock
        self._requests = requests

    @web.middleware
    async def handle(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        route = protocol_route_of(request)
        if route is None:
            return await handler(request)
        arrived = time.monotonic()
        rule = self._faults.take(route.name, request.method)
        response: web.StreamResponse | None = None
        if rule is not None:
            if rule.latency:
                await self._clock.sleep(rule.latency)
            if rule.drop_connection:
                self._record(request, route, arrived, 0, fault=True)
                if request.transport is not None:
                    request.transport.abort()
                raise web.HTTPServiceUnavailable()  # never reaches the client: the socket is gone
            if rule.status is not None:
                response = _fault_response(route, rule, rule.status)
        if response is None:
            try:
                response = await handler(request)
            except (errors.ActionsError, errors.GitHubError) as error:
                response = error_response(error)
        self._record(request, route, arrived, response.status, fault=rule is not None)
        return response

    def _record(self, request: web.Request, route: ProtocolRoute, arrived: float, status: int, *, fault: bool) -> None:
        self._requests.append(
            RequestRecord(
                at=arrived,
                method=request.method,
                path=request.path,
                query=request.query_string,
                route=route.name,
                status=status,
                user_agent=request.headers.get("User-Agent"),
                max_capacity=request.headers.get("X-ScaleSetMaxCapacity"),
                fault=fault,
                peer=request.remote,
            )
        )


def _fault_response(route: ProtocolRoute, rule: FaultRule, status: int) -> web.Response:
    """An injected error status, worded as the route words its own errors (so clients classify it as real)."""
    headers = {"Retry-After": f"{rule.retry_after:g}"} if rule.retry_after is not None else None
    error: errors.ActionsError | errors.GitHubError
    if route.dialect is Dialect.GITHUB:
        error = errors.GitHubError(status, rule.message)
    else:
        default_type = _UNAUTHORIZED_EXCEPTION if status == 401 else _SERVICE_EXCEPTION
        error = errors.ActionsError(status, rule.type_name or default_type, rule.message)
    return error_response(error, headers=headers)
