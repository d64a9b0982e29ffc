"""``arc-scaleset sim``: run the simulated GitHub + Actions service until SIGTERM/SIGINT.

Prints the base URL on stdout (one line) once listening. ``--port-file`` receives the port and
``--state-file`` a JSON object ``{"url", "apiUrl", "pid", "caFile"}`` (written atomically), so a parent
process can find a sim started on port 0. PATs come from ``--token`` (``TOKEN`` or ``TOKEN=scope,scope``)
or, better kept out of ``ps``, ``--token-file`` (one per line, same syntax).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

import orjson

from arc_scaleset.tasks import cancel_and_wait
from arc_scaleset_lab.sim.auth import DEFAULT_PAT_SCOPES
from arc_scaleset_lab.sim.server import SimulatedGitHub
from arc_scaleset_lab.sim.state import SimConfig
from arc_scaleset_lab.sim.workload import WorkloadSpec, run_workload


def configure(parser: argparse.ArgumentParser) -> None:
    defaults = SimConfig()
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on; 0 picks a free one (default: 0)")
    parser.add_argument("--port-file", help="write the bound port to this file once listening")
    parser.add_argument("--state-file", help="write {url, apiUrl, pid, caFile} as JSON to this file once listening")
    parser.add_argument("--tls", action="store_true", help="serve HTTPS with a generated CA (its PEM: caFile)")
    parser.add_argument(
        "--token", action="append", default=[], metavar="TOKEN[=SCOPES]", help="accept this PAT (repeatable)"
    )
    parser.add_argument("--token-file", help="file with one TOKEN[=SCOPES] per line")
    parser.add_argument(
        "--app",
        action="append",
        default=[],
        metavar="APP_ID:INSTALLATION_ID:KEY_PEM_FILE",
        help="register a GitHub App whose JWTs are verified with this key (public or private PEM; repeatable)",
    )
    parser.add_argument("--runner-group", action="append", default=[], help="add a runner group (repeatable)")
    parser.add_argument(
        "--long-poll-seconds",
        type=float,
        default=defaults.long_poll_seconds,
        help=f"how long a message-queue read is held before 202 (default: {defaults.long_poll_seconds:g})",
    )
    for name, value in (
        ("admin-token-ttl", defaults.admin_token_ttl),
        ("queue-token-ttl", defaults.queue_token_ttl),
        ("registration-token-ttl", defaults.registration_token_ttl),
        ("installation-token-ttl", defaults.installation_token_ttl),
        ("session-timeout", defaults.session_timeout),
    ):
        parser.add_argument(f"--{name}", type=float, default=value, help=f"seconds (default: {value:g})")
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the fault injector's RNG (default: 0)")
    workload = parser.add_argument_group("workload (optional: enqueue jobs once started)")
    workload.add_argument("--jobs", type=int, default=0, help="number of jobs to enqueue (default: 0 = none)")
    workload.add_argument("--rate", type=float, default=1.0, help="mean job arrivals per second (default: 1)")
    workload.add_argument("--duration-min", type=float, default=5.0, help="shortest job, seconds (default: 5)")
    workload.add_argument("--duration-max", type=float, default=30.0, help="longest job, seconds (default: 30)")
    workload.add_argument("--seed", type=int, default=0, help="workload RNG seed (default: 0)")
    workload.add_argument(
        "--labels", default="arc-runners", help="comma-separated labels of the jobs (default: arc-runners)"
    )


def _parse_token(spec: str) -> tuple[str, frozenset[str]]:
    token, _, scopes = spec.strip().partition("=")
    return token, (frozenset(s.strip() for s in scopes.split(",") if s.strip()) or DEFAULT_PAT_SCOPES)


def run(args: argparse.Namespace) -> int:
    # Credentials are read before the loop starts: file reads would block it.
    token_specs = list(args.token)
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as f:
            token_specs += [line for line in f.read().splitlines() if line.strip()]
    apps: list[tuple[int, int, str]] = []
    for spec in args.app:
        app_id, installation_id, key_file = spec.split(":", 2)
        with open(key_file, encoding="utf-8") as f:
            apps.append((int(app_id), int(installation_id), f.read()))
    try:
        return asyncio.run(_serve(args, [_parse_token(t) for t in token_specs], apps))
    except KeyboardInterrupt:
        return 130


async def _serve(
    args: argparse.Namespace, tokens: list[tuple[str, frozenset[str]]], apps: list[tuple[int, int, str]]
) -> int:
    config = SimConfig(
        long_poll_seconds=args.long_poll_seconds,
        admin_token_ttl=args.admin_token_ttl,
        queue_token_ttl=args.queue_token_ttl,
        registration_token_ttl=args.registration_token_ttl,
        installation_token_ttl=args.installation_token_ttl,
        session_timeout=args.session_timeout,
        fault_seed=args.fault_seed,
    )
    sim = await SimulatedGitHub.start(config=config, host=args.host, port=args.port, tls=args.tls)
    try:
        for token, scopes in tokens:
            sim.credentials.add_token(token, scopes=scopes)
        for app_id, installation_id, key_pem in apps:
            sim.credentials.add_app(app_id=app_id, installation_ids=[installation_id], public_key_pem=key_pem)
        for group in args.runner_group:
            sim.state.add_runner_group(group)
        _write_files(sim, args)
        print(sim.url, flush=True)

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        workload: asyncio.Task[list[int]] | None = None
        if args.jobs > 0:
            spec = WorkloadSpec(
                jobs=args.jobs,
                rate=args.rate,
                duration_min=args.duration_min,
                duration_max=args.duration_max,
                seed=args.seed,
                labels=tuple(label for label in args.labels.split(",") if label),
            )

            async def enqueue(labels: object, repository: str, duration: float, name: str) -> int:
                job = sim.state.enqueue_job(
                    list(spec.labels), repository=repository, duration=duration, display_name=name
                )
                return job.request_id

            workload = asyncio.create_task(run_workload(spec, enqueue))
        await stop.wait()
        await cancel_and_wait(workload)
    finally:
        await sim.stop()
    return 0


def _write_files(sim: SimulatedGitHub, args: argparse.Namespace) -> None:
    ca_file = None
    if sim.ca_pem is not None:
        base = args.state_file or args.port_file or os.path.join(os.getcwd(), "sim")
        ca_file = base + ".ca.pem"
        _atomic_write(ca_file, sim.ca_pem.encode())
    port = sim.url.rsplit(":", 1)[1]
    if args.port_file:
        _atomic_write(args.port_file, port.encode() + b"\n")
    if args.state_file:
        state = {"url": sim.url, "apiUrl": sim.api_url, "pid": os.getpid(), "caFile": ca_file}
        _atomic_write(args.state_file, orjson.dumps(state))


def _atomic_write(path: str, data: bytes) -> None:
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "wb") as f:
        f.write(data)
    os.replace(temporary, path)
