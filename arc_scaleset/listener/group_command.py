"""``arc-scaleset listener`` in group mode: a shared listener pod (docs/listener.md, "Shared listener (process)").

Selected by ``LISTENER_GROUP_SECRET`` (the group's config Secret) and ``LISTENER_GROUP_NAMESPACE`` (its
namespace) in the environment, as the controller sets them on a shared listener pod; no config file is read.
The process shares among its members one Kubernetes client, the GitHub connection pools (per root CA), one
metrics registry and server (on the ``metrics_addr`` and ``metrics_endpoint`` the members' configs name, started
when the first member arrives) and the probes. SIGTERM or SIGINT stops every member at once (each deletes its
session) and exits 0.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from arc_scaleset.api.listener_group import GROUP_NAMESPACE_ENV
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.listener.app import Timing
from arc_scaleset.listener.group import SharedListener
from arc_scaleset.listener.group_member import MemberContext
from arc_scaleset.listener.session import session_owner
from arc_scaleset.listener.stop import StopSignal
from arc_scaleset.observability.logging import configure_logging
from arc_scaleset.observability.metrics_server import HealthCheck, MetricsServer, serve_metrics, verdict_check
from arc_scaleset.observability.uncaught import log_asyncio_exception

log = logging.getLogger("arc_scaleset.listener")

GROUP_KUBE_CONNECTIONS = 32
"""The group's Kubernetes requests at once, for all its members (the client's default; a listener of one scale set
has :data:`~arc_scaleset.listener.app.KUBE_CONNECTIONS`). A burst of one member's bookkeeping may make another's
patch wait for the length of one request, where a pool per member would keep a hundred idle TLS connections."""


class _Servers:
    """The probe server (from the start) and the metrics server (once a member names its address)."""

    def __init__(self, group: SharedListener, registry: CollectorRegistry) -> None:
        self._group = group
        self._registry = registry
        self._liveness: dict[str, HealthCheck] = {"members": verdict_check(group.live)}
        self._readiness: dict[str, HealthCheck] = {"sessions": verdict_check(group.ready)}
        self._started: list[MetricsServer] = []
        self._settled = False

    async def serve(self, address: str, registry: CollectorRegistry, path: str = "/metrics") -> MetricsServer | None:
        server = await serve_metrics(
            address=address, path=path, registry=registry, health_checks=self._liveness, ready_checks=self._readiness
        )
        if server is not None:
            self._started.append(server)
        return server

    async def members_changed(self) -> None:
        """Once, when the first readable member config is known: its log settings and its metrics address."""
        config = self._group.first_config()
        if config is None or self._settled:
            return
        self._settled = True
        configure_logging(level=config.log_level, fmt=config.log_format, stream=sys.stdout)
        try:
            server = await self.serve(config.metrics_addr, self._registry, config.metrics_endpoint or "/metrics")
        except (OSError, ValueError) as exc:
            # The members go on: metrics are worth a log line, not every scale set's listener.
            log.error(f"shared listener cannot serve metrics: {exc}")
            return
        if server is not None:
            log.info("shared listener serving metrics", extra={"port": server.port})

    async def close(self) -> None:
        for server in self._started:
            await server.close()


def run_group(
    *, secret: str, namespace: str, kubeconfig: str | None, probe_addr: str, tune_process: Callable[[], None]
) -> int:
    """The process of a shared listener pod; its exit code. ``tune_process`` is the listener's process tuning
    (metrics exposition, TLS buffers, startup objects frozen), called once logging is set up."""
    if not namespace:
        log.error(f"shared listener cannot start: {GROUP_NAMESPACE_ENV} is not set")
        return 1
    # A pod's log is read by machines; the members' configs say otherwise once the first one is read.
    configure_logging(level="info", fmt="json", stream=sys.stdout)
    tune_process()
    try:
        return asyncio.run(main_group(secret=secret, namespace=namespace, kubeconfig=kubeconfig, probe_addr=probe_addr))
    except Exception:
        log.exception("shared listener crashed")
        return 1


async def main_group(*, secret: str, namespace: str, kubeconfig: str | None, probe_addr: str) -> int:
    """Serve the group until SIGTERM/SIGINT; 0 then, 1 when the process cannot start at all."""
    timing = Timing()
    try:
        kube = KubeClient.from_environment(
            kubeconfig, request_timeout=timing.request_timeout, connection_limit=GROUP_KUBE_CONNECTIONS
        )
    except Exception as exc:  # any reason we cannot talk to Kubernetes is fatal and must be readable
        log.error(f"shared listener cannot start: no usable Kubernetes credentials: {exc}")
        return 1
    context = MemberContext(kube=kube, owner=session_owner(), timing=timing)
    registry = CollectorRegistry()
    registry.register(context.metrics)
    group = SharedListener(kube, secret=secret, namespace=namespace, context=context)
    servers = _Servers(group, registry)
    stop = StopSignal()
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(log_asyncio_exception)

    def request_stop(signame: str) -> None:
        log.info("shutdown requested", extra={"signal": signame})
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, request_stop, sig.name)
    try:
        try:
            if probe_addr:
                await servers.serve(probe_addr, CollectorRegistry())  # probes only
        except (OSError, ValueError) as exc:
            log.error(f"shared listener cannot start: cannot serve probes: {exc}")
            return 1
        log.info("shared listener starting", extra={"secret": f"{namespace}/{secret}", "owner": context.owner})
        await group.run(stop, on_applied=servers.members_changed)
        return 0
    finally:
        await servers.close()
        await context.http.aclose()
        await kube.close()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
