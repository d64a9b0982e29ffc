"""The whole system as separate processes on this machine: what the demo and the e2e suite run.

:class:`System` starts, against a running control plane (given by its admin kubeconfig):

- the simulated GitHub (``arc-scaleset sim``), with a fresh random PAT it accepts;
- the CRDs and the controller namespace;
- the controller manager (``arc-scaleset controller``, leader election on), reachable on loopback ports
  for ``/readyz`` and ``/metrics``;
- the node agent (:mod:`arc_scaleset_lab.node.agent`): plays the kubelet for listener pods (a real
  ``arc-scaleset listener`` process per pod) and for runner pods (the sim's runners).

Contract:

- every process writes its output to ``<workdir>/logs/<name>.log``; a restarted controller gets a new file
  (``controller.2.log``...), so no log is ever overwritten;
- every process is started with ``tie_to_parent`` (unless told otherwise, for ``demo --keep``): the kernel
  kills it when the starting process dies, so an interrupted run leaves nothing behind;
- :meth:`System.stop` stops each process by its own PID, newest first, and is safe to call twice;
- ``<workdir>/system.json`` records the PIDs, so another process can stop a system it did not start
  (:func:`stop_recorded`);
- the secrets the system hands out (the PAT, App private keys it asks the sim for) are recorded in
  :attr:`System.ledger`, so a test can prove no log ever contains them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

from arc_scaleset.github.keyvault import VERIFY_CHALLENGE_RESOURCE_ENV
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import AlreadyExists
from arc_scaleset_lab.cluster.localcluster import free_port
from arc_scaleset_lab.cluster.processes import ManagedProcess, pid_alive, stop_pid
from arc_scaleset_lab.harness.cluster import install_crds
from arc_scaleset_lab.harness.secret_scan import SecretLedger
from arc_scaleset_lab.sim.admin_client import SimAdminClient

CONTROLLER_NAMESPACE = "arc-systems"
LISTENER_IMAGE = "ghcr.io/arc-scaleset/arc-scaleset:dev"
ORG = "arc-demo"
LEADER_ELECTION_ID = "arc-scaleset-controller"


class SystemStartError(RuntimeError):
    """A component could not be started or did not become ready; the message has its last log lines."""


def arc_scaleset_command(*args: str) -> list[str]:
    """argv running ``arc-scaleset ARGS`` with this interpreter's installation (the console script when
    present, as a user runs it; else ``python -m arc_scaleset.cli``)."""
    script = Path(sys.executable).with_name("arc-scaleset")
    if script.is_file():
        return [str(script), *args]
    return [sys.executable, "-m", "arc_scaleset.cli", *args]


@dataclass(frozen=True, kw_only=True)
class SystemOptions:
    """How the system is started.

    - ``long_poll_seconds``: the sim's message long poll. The listener re-publishes its state after every
      empty poll, and scale-down to the minimum waits for such a quiet publish: short polls make a demo's
      tail short (the real service holds ~50 s).
    - ``session_timeout``: seconds after which the sim lets a new listener take over a session nobody polls
      (a listener killed by SIGKILL never deletes its own); None keeps the sim's default.
    - ``tie_to_parent``: children die with this process (False for ``demo --keep``).
    - ``watch_namespace``: restrict the controller to this namespace (plus its own). On a cluster shared
      with other tests, an unrestricted controller would reconcile their scale sets too.
    - ``controller_args``: extra flags for ``arc-scaleset controller``.
    - ``controller_kubeconfig``: the controller's own credentials (e.g. a chart's ServiceAccount), instead
      of the admin kubeconfig the rest of the system uses.
    - ``sim_host``: the address or host name the sim listens on and puts in its URLs. A name that is not
      ``localhost`` (e.g. this machine's host name) makes clients send GitHub traffic through a configured
      proxy: loopback addresses are never proxied (docs/github.md).
    - ``sim_tls``: serve the sim over HTTPS with a CA of its own (:attr:`System.sim_ca_pem`), which no
      client trusts unless given it (``githubServerTLS``).
    - ``azure_on_sim``: the sim is also Azure (its identity endpoint and Key Vault, ``sim/azure.py``): the
      controller and the node agent (so the listeners) get ``AZURE_AUTHORITY_HOST`` = the sim, trust the sim's
      CA as if it were in the system store (``SSL_CERT_FILE``: the vault client uses the system store, as
      ARC's) and skip the SDK's challenge-resource check (the sim's vault is not under vault.azure.net).
      Needs ``sim_tls``.
    """

    controller_namespace: str = CONTROLLER_NAMESPACE
    listener_image: str = LISTENER_IMAGE
    long_poll_seconds: float = 5.0
    session_timeout: float | None = None
    leader_election: bool = True
    log_level: str = "info"
    tie_to_parent: bool = True
    watch_namespace: str | None = None
    controller_args: tuple[str, ...] = ()
    controller_kubeconfig: Path | None = None
    ready_timeout: float = 90.0
    sim_host: str = "127.0.0.1"
    sim_tls: bool = False
    azure_on_sim: bool = False


@dataclass
class _Started:
    process: ManagedProcess
    extra: dict[str, Any] = field(default_factory=dict)


class System:
    """Start with ``async with System(workdir, kubeconfig=...) as system`` (or :meth:`start`/:meth:`stop`)."""

    def __init__(
        self,
        workdir: Path,
        *,
        kubeconfig: Path,
        options: SystemOptions | None = None,
        extra_log_dirs: Sequence[Path] = (),
    ) -> None:
        self.workdir = workdir
        self.kubeconfig = kubeconfig
        self.options = options or SystemOptions()
        self.log_dir = workdir / "logs"
        self.extra_log_dirs = list(extra_log_dirs)
        self.ledger = SecretLedger()
        # A PAT unique to this run: finding it in a log can only mean this run leaked it.
        self.pat = "ghp_" + secrets.token_hex(18)
        self.ledger.add(self.pat, "PAT")
        self.sim_url = ""
        self.sim_ca_file: str | None = None  # the CA's PEM file when the sim serves HTTPS
        self.controller_metrics_url = ""
        self.controller_health_url = ""
        self._sim: ManagedProcess | None = None
        self._controller: ManagedProcess | None = None
        self._controller_starts = 0
        self._agent: ManagedProcess | None = None
        self._kube: KubeClient | None = None
        self._sim_admin: SimAdminClient | None = None
        self._http: aiohttp.ClientSession | None = None

    # -- access ----------------------------------------------------------------------------------------

    @property
    def kube(self) -> KubeClient:
        assert self._kube is not None, "System not started"
        return self._kube

    @property
    def sim(self) -> SimAdminClient:
        assert self._sim_admin is not None, "System not started"
        return self._sim_admin

    @property
    def controller_namespace(self) -> str:
        return self.options.controller_namespace

    @property
    def sim_ca_pem(self) -> str | None:
        """The PEM of the CA the sim's certificate chains to (``sim_tls``), else None."""
        return Path(self.sim_ca_file).read_text() if self.sim_ca_file else None

    def config_url(self, org: str = ORG) -> str:
        """A GitHub config URL (organisation scope) served by the sim."""
        return f"{self.sim_url}/{org}"

    @property
    def controller_pid(self) -> int | None:
        return self._controller.pid if self._controller and self._controller.exit_code() is None else None

    @property
    def agent_pid(self) -> int | None:
        return self._agent.pid if self._agent and self._agent.exit_code() is None else None

    def pids(self) -> dict[str, int]:
        """The running processes this system started (name -> PID)."""
        running = {}
        for name, process in (("sim", self._sim), ("controller", self._controller), ("node-agent", self._agent)):
            if process is not None and process.pid and process.exit_code() is None:
                running[name] = process.pid
        return running

    def log_files(self) -> list[Path]:
        """Every log file written so far by this system's processes (and the extra log directories)."""
        files: list[Path] = []
        for directory in (self.log_dir, *self.extra_log_dirs):
            if directory.is_dir():
                files += sorted(p for p in directory.rglob("*.log") if p.is_file())
        return files

    # -- lifecycle -------------------------------------------------------------------------------------

    async def __aenter__(self) -> System:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start sim, CRDs, controller namespace, controller and node agent; on failure stop what started."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            await self._start_sim()
            self._kube = KubeClient.from_kubeconfig(self.kubeconfig)
            await install_crds(self._kube)
            await self.ensure_namespace(self.controller_namespace)
            await self.start_controller()
            await self._start_agent()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Stop the node agent (and with it the listeners), the controller and the sim, by PID."""
        for process in (self._agent, self._controller, self._sim):
            if process is not None:
                await asyncio.to_thread(process.stop, timeout=15.0)
        await self.detach()

    async def detach(self) -> None:
        """Close this process's clients but leave every process running (``demo --keep``)."""
        self._write_state()
        for closable in (self._sim_admin, self._kube):
            if closable is not None:
                with contextlib.suppress(Exception):
                    await closable.close()
        if self._http is not None:
            await self._http.close()
        self._sim_admin = self._kube = self._http = None

    # -- components ------------------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str], *, env: dict[str, str] | None = None) -> ManagedProcess:
        process = ManagedProcess(name, argv, log_path=self.log_dir / f"{name}.log", env={**os.environ, **(env or {})})
        process.start(tie_to_parent=self.options.tie_to_parent)
        self._write_state()
        return process

    async def _start_sim(self) -> None:
        token_file = self.workdir / "sim-tokens"
        token_file.touch(mode=0o600)
        token_file.write_text(self.pat + "\n")
        state_file = self.workdir / "sim.json"
        state_file.unlink(missing_ok=True)
        self._sim = self._spawn(
            "sim",
            arc_scaleset_command(
                "sim",
                f"--host={self.options.sim_host}",
                "--port=0",
                *(["--tls"] if self.options.sim_tls else []),
                f"--state-file={state_file}",
                f"--token-file={token_file}",
                f"--long-poll-seconds={self.options.long_poll_seconds:g}",
                *([f"--session-timeout={self.options.session_timeout:g}"] if self.options.session_timeout else []),
            ),
        )
        sim = self._sim

        async def state_written() -> bool:
            return state_file.is_file()

        await self._wait(sim, state_written, "the simulated GitHub to listen")
        state = json.loads(state_file.read_text())
        self.sim_url = state["url"]
        self.sim_ca_file = state.get("caFile") or None
        self._sim_admin = SimAdminClient(self.sim_url, ca_file=self.sim_ca_file)
        self._write_state()

    async def start_controller(self) -> None:
        """Start (or start again) ``arc-scaleset controller``; returns once ``/readyz`` answers 200.

        With leader election, ready means "caches synced", not "leading": a restarted controller may still
        wait for the previous holder's Lease to expire before it reconciles.
        """
        if self._controller is not None and self._controller.exit_code() is None:
            raise SystemStartError("the controller is already running")
        self._controller_starts += 1
        metrics_port, health_port = free_port(), free_port()
        self.controller_metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        self.controller_health_url = f"http://127.0.0.1:{health_port}"
        args = [
            "controller",
            f"--kubeconfig={self.options.controller_kubeconfig or self.kubeconfig}",
            "--auto-scaling-runner-set-only",
            f"--metrics-addr=127.0.0.1:{metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{health_port}",
            # Listener processes share this machine's ports: no fixed metrics port for them.
            "--listener-metrics-addr=0",
            f"--log-level={self.options.log_level}",
            "--log-format=text",
            *self.options.controller_args,
        ]
        if self.options.watch_namespace:
            args.append(f"--watch-namespace={self.options.watch_namespace}")
        if self.options.leader_election:
            args += ["--enable-leader-election", f"--leader-election-id={LEADER_ELECTION_ID}"]
        name = "controller" if self._controller_starts == 1 else f"controller.{self._controller_starts}"
        self._controller = self._spawn(
            name,
            arc_scaleset_command(*args),
            env={
                "CONTROLLER_MANAGER_POD_NAMESPACE": self.controller_namespace,
                "CONTROLLER_MANAGER_CONTAINER_IMAGE": self.options.listener_image,
                **self._azure_env(),
            },
        )
        controller = self._controller

        async def ready() -> bool:
            return await self._http_ok(self.controller_health_url + "/readyz")

        await self._wait(controller, ready, "the controller's /readyz")

    async def stop_controller(self, *, timeout: float = 30.0) -> None:
        """Stop the controller as a Deployment scaled to 0 would (SIGTERM: it releases its Lease and exits)."""
        process = self._controller
        if process is None or process.exit_code() is not None:
            raise SystemStartError("the controller is not running")
        await asyncio.to_thread(process.stop, timeout=timeout)

    @property
    def controller_running(self) -> bool:
        return self._controller is not None and self._controller.exit_code() is None

    async def kill_controller(self) -> None:
        """SIGKILL the controller (no cleanup, no Lease release) and reap it."""
        process = self._controller
        if process is None or process.pid is None or process.exit_code() is not None:
            raise SystemStartError("the controller is not running")
        os.kill(process.pid, signal.SIGKILL)
        await asyncio.to_thread(process.stop, timeout=10.0)  # reaps it (the SIGTERM it may add is moot)

    async def _start_agent(self) -> None:
        ready_file = self.workdir / "node-agent.ready"
        ready_file.unlink(missing_ok=True)
        self._agent = self._spawn(
            "node-agent",
            [
                sys.executable,
                "-m",
                "arc_scaleset_lab.node.agent",
                f"--kubeconfig={self.kubeconfig}",
                f"--sim-url={self.sim_url}",
                *([f"--sim-ca-file={self.sim_ca_file}"] if self.sim_ca_file else []),
                f"--listener-namespace={self.controller_namespace}",
                f"--log-dir={self.log_dir}",
                f"--work-dir={self.workdir / 'pods'}",
                f"--ready-file={ready_file}",
            ],
            env=self._azure_env(),
        )
        agent = self._agent

        async def ready() -> bool:
            return ready_file.is_file()

        await self._wait(agent, ready, "the node agent")

    def _azure_env(self) -> dict[str, str]:
        """The environment ``azure_on_sim`` gives the controller and the node agent (empty without it)."""
        if not self.options.azure_on_sim:
            return {}
        if not self.sim_ca_file:
            raise SystemStartError("azure_on_sim needs sim_tls: Azure's endpoints are served over TLS")
        return {
            "AZURE_AUTHORITY_HOST": self.sim_url,
            "SSL_CERT_FILE": self.sim_ca_file,
            VERIFY_CHALLENGE_RESOURCE_ENV: "false",
        }

    def listener_pids(self) -> dict[str, int]:
        """Running listener processes (pod name -> PID): the node agent's ``arc-scaleset listener`` children."""
        agent = self.agent_pid
        return _listener_children(agent) if agent else {}

    # -- helpers ---------------------------------------------------------------------------------------

    async def ensure_namespace(self, name: str, *, labels: dict[str, str] | None = None) -> None:
        body = {"metadata": {"name": name, "labels": labels or {}}}
        with contextlib.suppress(AlreadyExists):
            await self.kube.create(resources.NAMESPACES, body)

    async def create_pat_secret(self, namespace: str, name: str = "github-token") -> str:
        """A GitHub-credentials Secret with the run's PAT (key ``github_token``); returns its name."""
        body = {"metadata": {"name": name}, "stringData": {"github_token": self.pat}}
        await self.kube.create(resources.SECRETS, body, namespace=namespace)
        return name

    async def create_app_secret(self, namespace: str, name: str = "github-app") -> str:
        """A GitHub App credentials Secret (a fresh App registered in the sim); returns its name."""
        key_pem = await create_app_secret(self.kube, self.sim, namespace, name=name)
        self.ledger.add_private_key(key_pem, f"the App private key of Secret {namespace}/{name}")
        return name

    async def controller_metrics(self) -> str:
        """The controller's ``/metrics`` text ('' when it does not answer)."""
        try:
            async with self._session().get(
                self.controller_metrics_url, timeout=aiohttp.ClientTimeout(total=5)
            ) as response:
                return await response.text() if response.status == 200 else ""
        except (aiohttp.ClientError, TimeoutError):
            return ""

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession()
        return self._http

    async def _http_ok(self, url: str) -> bool:
        try:
            async with self._session().get(url, timeout=aiohttp.ClientTimeout(total=2)) as response:
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    async def _wait(self, process: ManagedProcess, check: Any, what: str) -> None:
        deadline = time.monotonic() + self.options.ready_timeout
        while not await check():
            code = process.exit_code()
            if code is not None:
                raise SystemStartError(
                    f"{process.name} exited with code {code} before {what}; "
                    f"last lines of {process.log_path}:\n{process.log_tail(30)}"
                )
            if time.monotonic() > deadline:
                raise SystemStartError(
                    f"timed out after {self.options.ready_timeout:.0f}s waiting for {what}; "
                    f"last lines of {process.log_path}:\n{process.log_tail(30)}"
                )
            await asyncio.sleep(0.1)

    def _write_state(self) -> None:
        state = {"simUrl": self.sim_url, "kubeconfig": str(self.kubeconfig), "pids": self.pids()}
        with contextlib.suppress(OSError):
            (self.workdir / "system.json").write_text(json.dumps(state, indent=2))


def stop_recorded(workdir: Path) -> list[str]:
    """Stop the processes recorded in ``workdir/system.json`` (node agent, controller, sim, in that order)."""
    path = workdir / "system.json"
    if not path.is_file():
        return []
    pids: dict[str, int] = json.loads(path.read_text()).get("pids") or {}
    stopped = []
    for name in ("node-agent", "controller", "sim"):
        pid = pids.get(name)
        if pid and pid_alive(pid):
            stop_pid(pid, timeout=15.0)
            stopped.append(name)
    return stopped


def _listener_children(parent: int) -> dict[str, int]:
    """Children of ``parent`` running ``arc-scaleset listener``, keyed by the pod name in their environment."""
    found: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid != parent:
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"listener" not in argv:
                continue
            environ = dict(
                item.split(b"=", 1) for item in (entry / "environ").read_bytes().split(b"\0") if b"=" in item
            )
        except (OSError, ValueError, IndexError):
            continue
        name = (environ.get(b"HOSTNAME") or environ.get(b"POD_NAME") or entry.name.encode()).decode()
        found[name] = int(entry.name)
    return found


async def create_app_secret(kube: KubeClient, sim: SimAdminClient, namespace: str, *, name: str = "github-app") -> str:
    """Register a fresh GitHub App (and one installation) in the simulated GitHub and write its credentials
    Secret ``name`` in ``namespace``, as ARC's chart does; returns the App's private key (PEM), for callers
    that check it never reaches a log."""
    app_id = secrets.randbelow(900_000) + 100_000
    installation_id = secrets.randbelow(900_000) + 100_000
    app = await sim.create_app(app_id=app_id, installation_id=installation_id)
    key_pem = str(app["privateKeyPem"])
    body = {
        "metadata": {"name": name},
        "stringData": {
            "github_app_id": str(app_id),
            "github_app_installation_id": str(installation_id),
            "github_app_private_key": key_pem,
        },
    }
    await kube.create(resources.SECRETS, body, namespace=namespace)
    return key_pem
