"""The simulated GitHub's HTTP server and its in-process face, :class:`SimulatedGitHub`.

One aiohttp application serves the GitHub REST API (``routes_github``), the Actions service
(``routes_actions``) and the ``/_sim`` admin API (``routes_admin``). A middleware applies fault rules, turns
model errors into the right JSON dialect and records every protocol request (without its credentials). A
background task completes running jobs when their duration has elapsed on the injected clock.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import orjson
from aiohttp import web

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset_lab.sim import errors
from arc_scaleset_lab.sim.auth import DEFAULT_PAT_SCOPES, Credentials, SimApp
from arc_scaleset_lab.sim.faults import FaultInjector, FaultRule
from arc_scaleset_lab.sim.notify import ChangeNotifier
from arc_scaleset_lab.sim.state import (
    JobRecord,
    Runner,
    RunnerExitRequest,
    ScaleSet,
    Session,
    SimConfig,
    SimState,
    Statistics,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Routes answering in GitHub's REST dialect; all other protocol routes speak the Actions service's.
GITHUB_ROUTES = frozenset({"registration_token", "app_access_token", "runner_registration"})
_ROUTE_ATTR = "sim_route"


def named(route: str) -> Callable[[Handler], Handler]:
    """Tag a handler with its route name (used by fault rules and the request log)."""

    def tag(handler: Handler) -> Handler:
        handler.__dict__[_ROUTE_ATTR] = route
        return handler

    return tag


def json_response(data: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json", headers=headers)


@dataclass(frozen=True)
class RequestRecord:
    """One protocol request as the sim saw it. Never holds credentials."""

    at: float  # time.monotonic() of arrival
    method: str
    path: str
    query: str
    route: str
    status: int
    user_agent: str | None
    max_capacity: str | None
    fault: bool


class SimulatedGitHub:
    """A running simulated GitHub. Create with :meth:`start`; stop with :meth:`stop` (or ``async with``)."""

    def __init__(self, *, config: SimConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.state = SimState(clock=clock, config=config)
        self.credentials = Credentials(clock=clock, config=config)
        self.faults = FaultInjector(seed=config.fault_seed)
        self.notifier = ChangeNotifier()
        self.state.on_change = self.notifier.notify
        self.requests: collections.deque[RequestRecord] = collections.deque(maxlen=50_000)
        self.url = ""
        self.ca_pem: str | None = None
        self._runner: web.AppRunner | None = None
        self._timer: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def start(
        cls,
        *,
        config: SimConfig | None = None,
        clock: Clock = REAL_CLOCK,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = False,
    ) -> SimulatedGitHub:
        """Serve on ``host:port`` (0 = a free port). With ``tls`` a CA is generated (:attr:`ca_pem`)."""
        sim = cls(config=config or SimConfig(), clock=clock)
        ssl_context: ssl.SSLContext | None = None
        if tls:
            from arc_scaleset_lab.sim.tls import make_server_tls

            ssl_context, sim.ca_pem = make_server_tls(host)
        app = sim.build_app()
        # Held long polls and injected hangs must not hold up a stop: cancel them after a short grace.
        sim._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await sim._runner.setup()
        site = web.TCPSite(sim._runner, host, port, ssl_context=ssl_context)
        await site.start()
        bound_port = sim._runner.addresses[0][1]
        scheme = "https" if tls else "http"
        url_host = f"[{host}]" if ":" in host else host
        sim.url = f"{scheme}://{url_host}:{bound_port}"
        sim._timer = asyncio.create_task(sim._complete_jobs_forever(), name="sim-job-timer")
        return sim

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
            self._timer = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> SimulatedGitHub:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def build_app(self) -> web.Application:
        from arc_scaleset_lab.sim import routes_actions, routes_admin, routes_github

        app = web.Application(middlewares=[self._middleware], client_max_size=4 * 1024 * 1024)
        routes_github.add_routes(app, self)
        routes_actions.add_routes(app, self)
        routes_admin.add_routes(app, self)
        return app

    async def _complete_jobs_forever(self) -> None:
        while True:
            self.state.complete_due_jobs()
            deadline = self.state.next_deadline()
            wait = None if deadline is None else (deadline - self.clock.now()).total_seconds()
            if wait is not None and wait <= 0:
                continue
            await self.notifier.wait(wait, clock=self.clock)

    # ------------------------------------------------------------------ middleware

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        route: str = getattr(request.match_info.handler, _ROUTE_ATTR, "")
        if not route:  # the admin API and unknown paths: no faults, no log
            return await handler(request)
        arrived = time.monotonic()
        rule = self.faults.take(route, request.method)
        response: web.StreamResponse | None = None
        if rule is not None:
            if rule.latency:
                await self.clock.sleep(rule.latency)
            if rule.drop_connection:
                self._record(request, route, arrived, 0, fault=True)
                if request.transport is not None:
                    request.transport.abort()
                raise web.HTTPServiceUnavailable()  # never reaches the client: the socket is gone
            if rule.status is not None:
                response = self._fault_response(route, rule)
        if response is None:
            try:
                response = await handler(request)
            except errors.ActionsError as error:
                response = json_response(error.body(), status=error.status)
            except errors.GitHubError as error:
                response = json_response(error.body(), status=error.status)
        self._record(request, route, arrived, response.status, fault=rule is not None)
        return response

    def _fault_response(self, route: str, rule: FaultRule) -> web.Response:
        assert rule.status is not None
        headers = {"Retry-After": f"{rule.retry_after:g}"} if rule.retry_after is not None else None
        if route in GITHUB_ROUTES:
            body: dict[str, str] = errors.GitHubError(rule.status, rule.message).body()
        else:
            default_type = "Microsoft.VisualStudio.Services.Common.VssServiceException"
            if rule.status == 401:
                default_type = "Microsoft.VisualStudio.Services.Common.VssUnauthorizedException"
            body = {"typeName": rule.type_name or default_type, "message": rule.message}
        return json_response(body, status=rule.status, headers=headers)

    def _record(self, request: web.Request, route: str, arrived: float, status: int, *, fault: bool) -> None:
        self.requests.append(
            RequestRecord(
                at=arrived,
                method=request.method,
                path=request.path,
                query=request.query_string,
                route=route,
                status=status,
                user_agent=request.headers.get("User-Agent"),
                max_capacity=request.headers.get("X-ScaleSetMaxCapacity"),
                fault=fault,
            )
        )

    # ------------------------------------------------------------------ URLs

    @property
    def api_url(self) -> str:
        """The GitHub REST base a GHES config URL on this server maps to (spec 4.1)."""
        return f"{self.url}/api/v3"

    def config_url(self, org: str, repo: str | None = None) -> str:
        return f"{self.url}/{org}" + (f"/{repo}" if repo else "")

    def enterprise_config_url(self, enterprise: str) -> str:
        return f"{self.url}/enterprises/{enterprise}"

    def tenant_url(self, tenant_id: int) -> str:
        return f"{self.url}/tenant/{tenant_id}/"

    # ------------------------------------------------------------------ credentials

    def add_token(self, token: str, *, scopes: Sequence[str] | frozenset[str] = DEFAULT_PAT_SCOPES) -> None:
        """Accept ``token`` as a PAT with these classic scopes."""
        self.credentials.add_token(token, scopes=scopes)

    def create_app(
        self,
        *,
        app_id: int,
        installation_id: int,
        client_id: str | None = None,
        public_key_pem: str | None = None,
    ) -> SimApp:
        """Register a GitHub App with one installation; without a key, one is generated (``private_key_pem``)."""
        return self.credentials.add_app(
            app_id=app_id, installation_ids=[installation_id], public_key_pem=public_key_pem, client_id=client_id
        )

    def add_runner_group(self, name: str) -> int:
        return self.state.add_runner_group(name).id

    # ------------------------------------------------------------------ jobs and runners

    def enqueue_job(
        self,
        labels: str | Sequence[str],
        *,
        repository: str = "org/repo",
        workflow_ref: str | None = None,
        display_name: str | None = None,
        duration: float = 1.0,
        event_name: str = "push",
        result: str = "succeeded",
    ) -> int:
        """Queue a workflow job for the scale set whose labels include ``labels``; returns its runnerRequestId."""
        return self.state.enqueue_job(
            labels,
            repository=repository,
            workflow_ref=workflow_ref,
            display_name=display_name,
            duration=duration,
            event_name=event_name,
            result=result,
        ).request_id

    def runner_online(self, name: str) -> Runner:
        return self.state.runner_online(name)

    def runner_exit(self, name: str, *, exit_code: int = 0) -> None:
        self.state.runner_exit(name, exit_code=exit_code)

    def fail_runner(self, name: str, *, exit_code: int = 1, reason: str = "requested") -> RunnerExitRequest:
        return self.state.request_runner_exit(name, exit_code=exit_code, reason=reason)

    def runner_events(self, *, after: int = 0) -> list[RunnerExitRequest]:
        """Exit requests for runner pods with ``seq > after`` (0 after a completed job, else a failure)."""
        return self.state.runner_events_after(after)

    async def next_runner_events(self, *, after: int, wait_seconds: float) -> list[RunnerExitRequest]:
        """Wait (real time) until there are events after ``after`` or ``wait_seconds`` pass."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        while not (events := self.runner_events(after=after)):
            if not await self.notifier.wait(deadline - loop.time()):
                return self.runner_events(after=after)
        return events

    def jobs(self) -> list[JobRecord]:
        return sorted(self.state.jobs.values(), key=lambda j: j.request_id)

    def job(self, request_id: int) -> JobRecord:
        return self.state.jobs[request_id]

    def runners(self) -> list[Runner]:
        return sorted(self.state.runners.values(), key=lambda r: r.id)

    def sessions(self) -> list[Session]:
        return list(self.state.sessions.values())

    def scale_sets(self) -> list[ScaleSet]:
        return sorted(self.state.scale_sets.values(), key=lambda s: s.id)

    def scale_set_named(self, name: str) -> ScaleSet | None:
        return next((s for s in self.scale_sets() if s.name == name), None)

    def statistics(self, scale_set_id: int) -> Statistics:
        return self.state.statistics(scale_set_id)

    # ------------------------------------------------------------------ faults on the model

    def evict_session(self, scale_set_id: int) -> bool:
        return self.state.evict_session(scale_set_id)

    def expire_queue_tokens(self) -> None:
        self.state.expire_queue_tokens()

    def expire_admin_tokens(self) -> None:
        self.credentials.expire_admin_tokens()

    def delete_scale_set(self, scale_set_id: int) -> None:
        self.state.delete_scale_set(None, scale_set_id)

    # ------------------------------------------------------------------ waiting

    async def wait_for(self, predicate: Callable[[SimulatedGitHub], bool], *, within: float = 10.0) -> None:
        """Return once ``predicate(self)`` holds; TimeoutError after ``within`` seconds (real time).

        Re-checks on every state change, and at least every 50 ms for conditions on things that are not
        model state (the request log).
        """
        async with asyncio.timeout(within):
            while not predicate(self):
                await self.notifier.wait(0.05)

    def now(self) -> dt.datetime:
        return self.clock.now()
