"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (fake nodes), started from the cached binaries.

Contract:
- everything listens on 127.0.0.1, on free ports chosen at start;
- :meth:`LocalCluster.start` returns only when the API answers, the ``default`` namespace exists and the
  kwok node is Ready; a component that fails raises :class:`ClusterError` with its last log lines;
- :meth:`LocalCluster.stop` stops every component it started, by PID, in reverse order;
- ``state.json`` in the work directory records the PIDs so another process (``arc-scaleset cluster
  down``) can stop a cluster it did not start.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from arc_scaleset_lab.cluster import binaries
from arc_scaleset_lab.cluster.admin_api import AdminApi
from arc_scaleset_lab.cluster.pki import ClusterPKI, create_pki
from arc_scaleset_lab.cluster.processes import ManagedProcess, pid_alive, stop_pid
from arc_scaleset_lab.cluster.stages import stages_yaml

LOOPBACK = "127.0.0.1"
NODE_NAME = "kwok-node-0"
KCM_CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "root-ca-certificate-publisher-controller",
    # Keeps each ResourceQuota's status (hard and used) current: quota admission refuses every pod of a
    # namespace whose quota has no status yet, and frees the usage of deleted pods only through it.
    "resourcequota-controller",
)


class ClusterError(RuntimeError):
    """The local control plane could not be started or reached; the message says which part and why."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (racy by nature: callers retry on failure)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


def _wait_until(what: str, check: Callable[[], bool], *, timeout: float, on_fail: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}\n{on_fail()}")


@dataclass(frozen=True)
class ClusterInfo:
    """What a client needs: the API URL and an admin kubeconfig."""

    server: str
    kubeconfig: Path
    workdir: Path


class LocalCluster:
    """One control plane in ``workdir`` (created if missing, wiped of old state on start)."""

    def __init__(self, workdir: Path, *, bin_dir: Path | None = None, start_timeout: float = 90.0) -> None:
        # Absolute: the paths written into the kubeconfig and the processes' flags must not depend on the
        # directory a reader of them runs in (kwok and kubectl resolve them from their own cwd).
        self.workdir = workdir.resolve()
        self.bin_dir = bin_dir or binaries.bin_dir()
        self.start_timeout = start_timeout
        self.processes: list[ManagedProcess] = []
        self.api_port = 0
        self.pki: ClusterPKI | None = None
        self.etcd_url = ""
        self.etcd_data: Path | None = None

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.api_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def info(self) -> ClusterInfo:
        return ClusterInfo(server=self.server, kubeconfig=self.kubeconfig, workdir=self.workdir)

    def admin_api(self) -> AdminApi:
        assert self.pki is not None
        return AdminApi(LOOPBACK, self.api_port, ca=self.pki.ca_cert, cert=self.pki.admin_cert, key=self.pki.admin_key)

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self, *, tie_to_parent: bool = True) -> ClusterInfo:
        """Start every component and wait until the cluster is usable. On failure, stop what started."""
        missing = [b for b in binaries.BINARIES if not (self.bin_dir / b).is_file()]
        if missing:
            raise ClusterError(
                f"control-plane binaries missing in {self.bin_dir}: {', '.join(missing)}; "
                "run `arc-scaleset cluster build` first"
            )
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        (self.workdir / "logs").mkdir(parents=True)
        self.pki = create_pki(self.workdir / "pki")
        try:
            self._start_etcd(tie_to_parent)
            self._start_apiserver(tie_to_parent)
            self._write_kubeconfig()
            self._start_rest(tie_to_parent)
            self._create_node()
        except BaseException:
            self.stop()
            raise
        return self.info

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop every started component: all asked at once, newest first, and any still running after
        ``timeout`` seconds killed (one bound for the whole cluster, not one per component: a loaded machine
        must not turn a Ctrl-C into a minute's wait). Safe to call twice."""
        for process in reversed(self.processes):
            process.terminate()
        deadline = time.monotonic() + timeout
        for process in reversed(self.processes):
            process.wait_or_kill(deadline=deadline)
        self.processes.clear()
        if self.etcd_data is not None:
            shutil.rmtree(self.etcd_data, ignore_errors=True)
        state = self.workdir / "state.json"
        if state.exists():
            state.unlink()

    # -- components ------------------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str], tie_to_parent: bool) -> ManagedProcess:
        process = ManagedProcess(name, argv, log_path=self.workdir / "logs" / f"{name}.log")
        process.start(tie_to_parent=tie_to_parent)
        self.processes.append(process)
        self._write_state()
        return process

    def _failure(self, process: ManagedProcess) -> Callable[[], str]:
        def describe() -> str:
            code = process.exit_code()
            status = f"{process.name} exited with code {code}" if code is not None else f"{process.name} is running"
            return f"{status}; last lines of {process.log_path}:\n{process.log_tail(25)}"

        return describe

    def _alive_and(self, process: ManagedProcess, check: Callable[[], bool]) -> Callable[[], bool]:
        def probe() -> bool:
            if process.exit_code() is not None:
                raise ClusterError(f"{process.name} failed to start\n{self._failure(process)()}")
            return check()

        return probe

    def _start_etcd(self, tie_to_parent: bool) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://{LOOPBACK}:{client}"
        data_dir = memory_dir() or self.workdir
        self.etcd_data = data_dir / f"arc-scaleset-etcd-{client}"
        etcd = self._spawn(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                "--name=default",
                f"--data-dir={self.etcd_data}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://{LOOPBACK}:{peer}",
                f"--initial-advertise-peer-urls=http://{LOOPBACK}:{peer}",
                f"--initial-cluster=default=http://{LOOPBACK}:{peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            tie_to_parent,
        )
        _wait_until(
            "etcd to be healthy",
            self._alive_and(etcd, lambda: _http_ok(self.etcd_url + "/health")),
            timeout=self.start_timeout,
            on_fail=self._failure(etcd),
        )

    def _start_apiserver(self, tie_to_parent: bool) -> None:
        assert self.pki is not None
        self.api_port = free_port()
        apiserver = self._spawn(
            "kube-apiserver",
            [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers={self.etcd_url}",
                f"--bind-address={LOOPBACK}",
                f"--advertise-address={LOOPBACK}",
                "--endpoint-reconciler-type=none",
                f"--secure-port={self.api_port}",
                f"--cert-dir={self.workdir / 'pki'}",
                f"--tls-cert-file={self.pki.serving_cert}",
                f"--tls-private-key-file={self.pki.serving_key}",
                f"--client-ca-file={self.pki.ca_cert}",
                "--authorization-mode=RBAC",
                "--service-cluster-ip-range=10.0.0.0/24",
                f"--service-account-issuer={self.server}",
                f"--service-account-key-file={self.pki.service_account_pub}",
                f"--service-account-signing-key-file={self.pki.service_account_key}",
                "--allow-privileged=true",
                # This plugin taints new nodes not-ready until node-lifecycle-controller lifts it; that
                # controller would also evict pods from kwok's lease-less nodes, so neither runs here.
                "--disable-admission-plugins=TaintNodesByCondition",
                "--enable-priority-and-fairness=false",
                "--v=0",
            ],
            tie_to_parent,
        )
        api = self.admin_api()
        _wait_until(
            "kube-apiserver /readyz",
            self._alive_and(apiserver, lambda: api.ok("/readyz")),
            timeout=self.start_timeout,
            on_fail=self._failure(apiserver),
        )
        _wait_until(
            "namespace 'default'",
            self._alive_and(apiserver, lambda: api.ok("/api/v1/namespaces/default")),
            timeout=self.start_timeout,
            on_fail=self._failure(apiserver),
        )

    def _write_kubeconfig(self) -> None:
        assert self.pki is not None
        config: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "local", "cluster": {"server": self.server, "certificate-authority": str(self.pki.ca_cert)}}
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {"client-certificate": str(self.pki.admin_cert), "client-key": str(self.pki.admin_key)},
                }
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin", "namespace": "default"}}],
            "current-context": "local",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)

    def _start_rest(self, tie_to_parent: bool) -> None:
        assert self.pki is not None
        kc = f"--kubeconfig={self.kubeconfig}"
        stages = self.workdir / "kwok-stages.yaml"
        stages.write_text(stages_yaml())
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bin_dir / "kube-controller-manager"),
                kc,
                "--leader-elect=false",
                f"--bind-address={LOOPBACK}",
                "--secure-port=0",
                f"--controllers={','.join(KCM_CONTROLLERS)}",
                f"--root-ca-file={self.pki.ca_cert}",
                "--concurrent-gc-syncs=5",
                "--v=0",
            ],
            tie_to_parent,
        )
        self._spawn(
            "kube-scheduler",
            [
                str(self.bin_dir / "kube-scheduler"),
                kc,
                "--leader-elect=false",
                f"--bind-address={LOOPBACK}",
                "--secure-port=0",
                "--v=0",
            ],
            tie_to_parent,
        )
        self._spawn(
            "kwok",
            [
                str(self.bin_dir / "kwok"),
                kc,
                f"--config={stages}",
                "--manage-all-nodes=true",
                f"--node-ip={LOOPBACK}",
                "--node-lease-duration-seconds=0",
                "--v=warn",
            ],
            tie_to_parent,
        )

    def _create_node(self) -> None:
        api = self.admin_api()
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": NODE_NAME,
                "labels": {
                    "kubernetes.io/hostname": NODE_NAME,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                },
                "annotations": {"kwok.x-k8s.io/node": "fake"},
            },
            "spec": {},
        }
        status, body = api.request("POST", "/api/v1/nodes", node)
        if status not in (201, 409):
            raise ClusterError(f"creating node {NODE_NAME} failed: HTTP {status}: {body}")

        def node_ready() -> bool:
            for process in self.processes:
                if process.exit_code() is not None:
                    raise ClusterError(f"{process.name} exited\n{self._failure(process)()}")
            code, obj = api.request("GET", f"/api/v1/nodes/{NODE_NAME}")
            conditions = obj.get("status", {}).get("conditions", []) if code == 200 else []
            return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

        kwok = next(p for p in self.processes if p.name == "kwok")
        _wait_until(
            f"node {NODE_NAME} to become Ready (kwok)",
            node_ready,
            timeout=self.start_timeout,
            on_fail=self._failure(kwok),
        )

    # -- state for other processes ---------------------------------------------------------------------

    def _write_state(self) -> None:
        state = {
            "server": self.server if self.api_port else None,
            "kubeconfig": str(self.kubeconfig),
            "etcd_data": str(self.etcd_data) if self.etcd_data else None,
            "pids": {p.name: p.pid for p in self.processes},
        }
        (self.workdir / "state.json").write_text(json.dumps(state, indent=2))


def _http_ok(url: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def read_state(workdir: Path) -> dict[str, Any] | None:
    """The ``state.json`` of a cluster started in ``workdir``, or None when none is recorded."""
    path = workdir / "state.json"
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def memory_dir() -> Path | None:
    """``/dev/shm`` (a memory file system: etcd without disk waits) when the machine has one."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() else None


def stop_recorded(workdir: Path) -> list[str]:
    """Stop the processes recorded in ``workdir/state.json`` (newest first); return their names."""
    state = read_state(workdir)
    if state is None:
        return []
    stopped = []
    for name, pid in reversed(list(state["pids"].items())):
        if pid and pid_alive(pid):
            stop_pid(pid)
            stopped.append(name)
    if etcd_data := state.get("etcd_data"):
        shutil.rmtree(etcd_data, ignore_errors=True)
    (workdir / "state.json").unlink(missing_ok=True)
    return stopped
