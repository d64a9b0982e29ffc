"""``arc-scaleset listener``: one scale set's listener process (docs/listener.md).

No required flags: the config file is named by ``LISTENER_CONFIG_PATH`` (ARC's ``config.json``), as in a
listener pod. With ``LISTENER_GROUP_SECRET`` set, the process is a shared listener instead, serving every member
of that group's config Secret (:mod:`arc_scaleset.listener.group_command`). With ``LISTENER_STANDBY_LEASE`` set,
it stands by until it holds that Lease (:mod:`arc_scaleset.listener.standby`). ``--kubeconfig`` is for running
outside a cluster (otherwise in-cluster credentials, then ``KUBECONFIG``, then ``~/.kube/config``). SIGTERM or
SIGINT stops the loop, deletes the message session and exits 0; a fatal failure exits 1 after a last log line
that says what is wrong. Anything unexpected (a bug) is logged through the redacting logger with its traceback,
never printed raw, and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from prometheus_client import CollectorRegistry, disable_created_metrics

from arc_scaleset.api.listener_config import PROBE_ADDR_ENV, ListenerConfig, ListenerConfigError
from arc_scaleset.api.listener_group import GROUP_NAMESPACE_ENV, GROUP_SECRET_ENV
from arc_scaleset.api.listener_standby import STANDBY_LEASE_ENV
from arc_scaleset.gc_tuning import freeze_startup_objects
from arc_scaleset.github import ProxySettings
from arc_scaleset.listener.app import ListenerApp, build_listener
from arc_scaleset.listener.config import config_path_from_environment, load_config
from arc_scaleset.listener.errors import FatalListenerError
from arc_scaleset.listener.vault import VaultCredentialsError, with_vault_credentials
from arc_scaleset.observability.logging import configure_logging, register_secret
from arc_scaleset.observability.metrics_server import HealthCheck, MetricsServer, serve_metrics, verdict_check
from arc_scaleset.observability.uncaught import install_uncaught_exception_logging, log_asyncio_exception
from arc_scaleset.tls_buffers import shrink_tls_read_buffers

log = logging.getLogger("arc_scaleset.listener")

LISTENER_TLS_READ_BUFFER = 16 * 1024
"""One TLS record: a listener reads small answers (a message of jobs, a patch's reply) on a handful of
connections, and one pod runs per scale set, so its buffers are kept as small as a record allows."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig to use outside a cluster (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)",
    )
    parser.add_argument(
        "--probe-addr",
        default=os.environ.get(PROBE_ADDR_ENV, ""),
        help=f"host:port for /healthz and /readyz (also served on metrics_addr when metrics are on; "
        f"default ${PROBE_ADDR_ENV})",
    )


def run(args: argparse.Namespace) -> int:
    # Logging first, and every uncaught exception through it: a traceback Python prints by itself would
    # bypass redaction (and the log format).
    configure_logging(level="info", stream=sys.stdout)
    install_uncaught_exception_logging()
    group_secret = os.environ.get(GROUP_SECRET_ENV, "")
    if group_secret:
        # A shared listener pod (docs/listener.md, "Shared listener (process)"): no config file, its members'
        # configs come from the group's Secret. Imported here, so that a listener of one scale set never loads
        # the group's modules (the informer among them): its memory is paid once per scale set.
        from arc_scaleset.listener.group_command import run_group

        return run_group(
            secret=group_secret,
            namespace=os.environ.get(GROUP_NAMESPACE_ENV, ""),
            kubeconfig=args.kubeconfig,
            probe_addr=args.probe_addr,
            tune_process=_tune_process,
        )
    try:
        config = load_config(config_path_from_environment())
    except ListenerConfigError as exc:
        log.error(str(exc))
        return 1
    if config.vault_type:
        # Before anything else starts, as ARC's listener: without credentials there is nothing to do, and the
        # exit (code 1) restarts the pod with the kubelet's backoff.
        try:
            config = asyncio.run(with_vault_credentials(config))
        except VaultCredentialsError as exc:
            log.error(f"listener cannot start: {exc}")
            return 1
    # Redaction is the last line of defence: the listener never logs credentials on purpose.
    for secret in [*config.secrets(), *ProxySettings.from_env(os.environ).secret_values()]:
        register_secret(secret)
    configure_logging(level=config.log_level, fmt=config.log_format, stream=sys.stdout)
    _tune_process()
    try:
        return asyncio.run(_main(config, kubeconfig=args.kubeconfig, probe_addr=args.probe_addr))
    except Exception:
        # A bug, not a failure the listener knows (those end in FatalListenerError): still one redacted log
        # record with the traceback, and exit code 1 so that the pod is restarted.
        log.exception("listener crashed")
        return 1


def _tune_process() -> None:
    # ARC's Go client exports no *_created series; keep the exposition identical.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    shrink_tls_read_buffers(LISTENER_TLS_READ_BUFFER)
    freeze_startup_objects()


async def _run_standby(app: ListenerApp) -> int:
    """docs/listener.md, "Standby listener". Imported here, so that a listener without a standby never loads
    the standby's modules: its memory is that of a listener before standby existed."""
    from arc_scaleset.listener.standby import StandbySettings, run_standby

    try:
        settings = StandbySettings.from_environment(os.environ)
    except FatalListenerError as exc:
        log.error(f"listener cannot start: {exc}")
        return 1
    kube = app.kube_client
    if kube is None:  # the command always lets the app make its own client; said plainly should that change
        log.error("listener cannot start: the standby listener needs its own Kubernetes client")
        return 1
    return await run_standby(app, kube, settings)


async def _main(config: ListenerConfig, *, kubeconfig: str | None, probe_addr: str) -> int:
    try:
        app = build_listener(config, kubeconfig=kubeconfig)
    except FatalListenerError as exc:
        log.error(f"listener cannot start: {exc}")
        return 1
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(log_asyncio_exception)

    def request_stop(signame: str) -> None:
        log.info("shutdown requested", extra={"signal": signame})
        app.stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, request_stop, sig.name)
    liveness: dict[str, HealthCheck] = {"poll": verdict_check(app.health.live)}
    readiness: dict[str, HealthCheck] = {"session": verdict_check(app.health.ready)}
    servers: list[MetricsServer] = []
    try:
        try:
            addresses = [(config.metrics_addr, app.metrics.registry)]
            if probe_addr and probe_addr != config.metrics_addr:
                addresses.append((probe_addr, CollectorRegistry()))  # probes only
            for address, registry in addresses:
                server = await serve_metrics(
                    address=address,
                    path=config.metrics_endpoint or "/metrics",
                    registry=registry,
                    health_checks=liveness,
                    ready_checks=readiness,
                )
                if server is not None:
                    servers.append(server)
        except (OSError, ValueError) as exc:
            log.error(f"listener cannot start: cannot serve metrics/probes: {exc}")
            return 1
        log.info(
            "listener starting",
            extra={
                "scale_set_id": config.runner_scale_set_id,
                "ephemeral_runner_set": f"{config.ephemeral_runner_set_namespace}/{config.ephemeral_runner_set_name}",
                "min_runners": config.min_runners,
                "max_runners": config.max_runners,
                "owner": app.sessions.owner,
                "ports": [server.port for server in servers],
            },
        )
        if os.environ.get(STANDBY_LEASE_ENV):
            return await _run_standby(app)
        return await app.run()
    finally:
        for server in servers:
            await server.close()
        await app.aclose()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
