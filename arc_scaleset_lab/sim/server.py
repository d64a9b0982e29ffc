"""The simulated GitHub as a running server: :class:`SimulatedGitHub`.

One aiohttp application serves the GitHub REST API (:class:`~arc_scaleset_lab.sim.routes_github.GitHubRoutes`),
the Actions service (:class:`~arc_scaleset_lab.sim.routes_actions.ActionsRoutes`) and the ``/_sim`` admin API
(:class:`~arc_scaleset_lab.sim.routes_admin.AdminRoutes`), behind the protocol middleware (faults, error
dialects, request log). A background task completes running jobs when their duration has elapsed on the
injected clock.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from types import TracebackType

from aiohttp import web

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.tasks import cancel_and_wait
from arc_scaleset_lab.sim.address import SimAddress
from arc_scaleset_lab.sim.auth import Credentials
from arc_scaleset_lab.sim.azure import SimAzure
from arc_scaleset_lab.sim.faults import FaultInjector
from arc_scaleset_lab.sim.middleware import ProtocolMiddleware, RequestLog
from arc_scaleset_lab.sim.notify import ChangeNotifier
from arc_scaleset_lab.sim.routes_actions import ActionsRoutes
from arc_scaleset_lab.sim.routes_admin import AdminRoutes
from arc_scaleset_lab.sim.routes_github import GitHubRoutes
from arc_scaleset_lab.sim.slashes import tolerate_repeated_slashes
from arc_scaleset_lab.sim.state import SimConfig, SimState

_REQUEST_LOG_SIZE = 50_000
_MAX_REQUEST_BODY = 4 * 1024 * 1024


class SimulatedGitHub:
    """A running simulated GitHub: its lifecycle, where it is served, and fault injection.

    Create with :meth:`start`; stop with :meth:`stop` (or ``async with``). What it simulates lives in the
    parts it owns, which callers use directly:

    - :attr:`state` (:class:`~arc_scaleset_lab.sim.state.SimState`): scale sets, runners, sessions, jobs, and
      the faults on them (evict a session, expire queue tokens, delete a scale set);
    - :attr:`credentials` (:class:`~arc_scaleset_lab.sim.auth.Credentials`): PATs, Apps, issued tokens;
    - :attr:`faults` (:class:`~arc_scaleset_lab.sim.faults.FaultInjector`): faults on protocol requests;
    - :attr:`changes` (:class:`~arc_scaleset_lab.sim.notify.ChangeNotifier`): wait for the state to change;
    - :attr:`requests`: the most recent protocol requests (:class:`~arc_scaleset_lab.sim.middleware.RequestRecord`);
    - :attr:`address`: the URLs it serves.
    """

    def __init__(self, *, config: SimConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.state = SimState(clock=clock, config=config)
        self.credentials = Credentials(clock=clock, config=config)
        self.faults = FaultInjector(seed=config.fault_seed)
        self.changes = ChangeNotifier()
        self.state.on_change = self.changes.notify
        self.requests: RequestLog = collections.deque(maxlen=_REQUEST_LOG_SIZE)
        self.address = SimAddress()
        # Azure's identity endpoint and Key Vault, for scale sets whose credentials live in a vault.
        self.azure = SimAzure(address=self.address)
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
        # Held long polls and injected hangs must not hold up a stop: cancel them after a short grace.
        sim._runner = web.AppRunner(sim._build_app(), access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await sim._runner.setup()
        site = web.TCPSite(sim._runner, host, port, ssl_context=ssl_context)
        await site.start()
        bound_port = sim._runner.addresses[0][1]
        scheme = "https" if tls else "http"
        url_host = f"[{host}]" if ":" in host else host
        sim.address.url = f"{scheme}://{url_host}:{bound_port}"
        sim._timer = asyncio.create_task(sim._complete_jobs_forever(), name="sim-job-timer")
        return sim

    async def stop(self) -> None:
        if self._timer is not None:
            await cancel_and_wait(self._timer)
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

    def _build_app(self) -> web.Application:
        middleware = ProtocolMiddleware(faults=self.faults, clock=self.clock, requests=self.requests)
        app = web.Application(middlewares=[middleware.handle], client_max_size=_MAX_REQUEST_BODY)
        GitHubRoutes(state=self.state, credentials=self.credentials, address=self.address).register(app)
        ActionsRoutes(
            state=self.state,
            credentials=self.credentials,
            address=self.address,
            changes=self.changes,
            clock=self.clock,
            long_poll_seconds=self.config.long_poll_seconds,
        ).register(app)
        AdminRoutes(
            state=self.state,
            credentials=self.credentials,
            faults=self.faults,
            changes=self.changes,
            address=self.address,
            requests=self.requests,
        ).register(app)
        self.azure.register(app)
        tolerate_repeated_slashes(app)
        return app

    async def _complete_jobs_forever(self) -> None:
        while True:
            self.state.complete_due_jobs()
            deadline = self.state.next_deadline()
            wait = None if deadline is None else (deadline - self.clock.now()).total_seconds()
            if wait is not None and wait <= 0:
                continue
            await self.changes.wait(wait, clock=self.clock)

    # ------------------------------------------------------------------ where it is served

    @property
    def url(self) -> str:
        """``http(s)://HOST:PORT``; empty until :meth:`start` has bound the port."""
        return self.address.url

    @property
    def api_url(self) -> str:
        """The GitHub REST base that a GHES config URL on this server maps to."""
        return self.address.api_url

    def config_url(self, org: str, repo: str | None = None) -> str:
        """A GitHub config URL of an organisation (or one of its repositories) on this server."""
        return self.address.config_url(org, repo)
