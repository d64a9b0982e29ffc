"""A real HTTP forward proxy for the tests and the demo: Debian's tinyproxy, requiring proxy credentials.

Why tinyproxy (README, "Proxy and private CA"): a small, long-maintained C proxy packaged by Debian, which
speaks HTTP CONNECT (the only way an ``https://`` request goes through a proxy), checks ``Proxy-Authorization``
Basic credentials (407 otherwise) and writes a plain log of every tunnel it opens. Nothing of ours sits
between the clients and the proxy, so a test that reads its log proves what a user's proxy would see.

:class:`TinyProxy` listens on 127.0.0.1 and binds its *outgoing* connections to :data:`PROXY_EGRESS_ADDRESS`
(another loopback address): a server that records its TCP peers (the sim's ``requestPeers``) tells proxied
requests (from that address) from direct ones (from 127.0.0.1).

tinyproxy is installed with apt-get when missing (CI starts on a fresh Debian machine, as root).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from arc_scaleset_lab.cluster.localcluster import free_port
from arc_scaleset_lab.cluster.processes import die_with_parent
from arc_scaleset_lab.harness.waiting import wait_until

PROXY_EGRESS_ADDRESS = "127.0.0.2"
_ESTABLISHED = re.compile(r'Established connection to host "(?P<host>[^"]+)"')
_REQUEST = re.compile(r"Request \(file descriptor (?P<fd>\d+)\): (?P<method>[A-Z]+) (?P<target>\S+)")


class ProxyUnavailableError(RuntimeError):
    """tinyproxy is missing and cannot be installed, or did not start."""


def ensure_tinyproxy() -> str:
    """The path of ``tinyproxy``, installed with apt-get first when it is not on PATH."""
    found = shutil.which("tinyproxy")
    if found:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise ProxyUnavailableError("tinyproxy is missing and apt-get cannot install it here (needs Debian, root)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "tinyproxy"], check=True, env=env)
    found = shutil.which("tinyproxy")
    if not found:
        raise ProxyUnavailableError("apt-get installed tinyproxy but it is not on PATH")
    return found


@dataclass(frozen=True)
class Tunnel:
    """One CONNECT the proxy accepted (credentials checked) and opened to ``target`` (``host:port``)."""

    target: str


class TinyProxy:
    """``with TinyProxy(workdir) as proxy:`` a running tinyproxy; ``proxy.url`` carries no credentials.

    ``user``/``password`` are the credentials it requires (a fresh password per instance: finding it in a
    log can only mean a leak); ``user``/``rotated_password`` are accepted too, so a test can rotate the
    credentials a scale set uses without restarting the proxy. :meth:`requests` and :meth:`tunnels` read its log.
    ``tie_to_parent``: the kernel kills the proxy when the process that started it dies (the demo's way of
    leaving nothing behind; ``demo --keep`` leaves it off).
    """

    def __init__(self, workdir: Path, *, user: str = "arc-proxy-user", tie_to_parent: bool = False) -> None:
        self.workdir = workdir
        self.user = user
        self.tie_to_parent = tie_to_parent
        # tinyproxy's config syntax takes no quoting: letters and digits only.
        self.password = secrets.token_hex(12)
        self.rotated_password = secrets.token_hex(12)
        self.port = 0
        self.log_path = workdir / "tinyproxy.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def address(self) -> str:
        """``host:port``, as a proxy URL in a Secret-less setting would name it."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        binary = ensure_tinyproxy()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        config = self.workdir / "tinyproxy.conf"
        config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "Listen 127.0.0.1",
                    f"Bind {PROXY_EGRESS_ADDRESS}",
                    "Timeout 600",  # listeners long-poll through it
                    f'LogFile "{self.log_path}"',
                    "LogLevel Info",
                    f'PidFile "{self.workdir / "tinyproxy.pid"}"',
                    "MaxClients 200",
                    "Allow 127.0.0.1",
                    f"BasicAuth {self.user} {self.password}",
                    f"BasicAuth {self.user} {self.rotated_password}",
                    "DisableViaHeader Yes",
                    "",
                ]
            )
        )
        config.chmod(0o600)
        output = open(self.workdir / "tinyproxy.out", "wb")  # noqa: SIM115 -- the child keeps it
        self._process = subprocess.Popen(
            [binary, "-d", "-c", str(config)],
            stdout=output,
            stderr=output,
            preexec_fn=die_with_parent if self.tie_to_parent else None,
        )
        output.close()
        process = self._process
        try:  # until it accepts connections, or exits
            wait_until(
                lambda: process.poll() is not None or "Accepting connections" in self._log_text(),
                "tinyproxy to start",
                timeout=10,
            )
            started = process.poll() is None
        except TimeoutError:
            started = False
        if not started:
            self.stop()
            raise ProxyUnavailableError(f"tinyproxy did not start: see {self.workdir}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def __enter__(self) -> TinyProxy:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def requests(self) -> list[str]:
        """Every request line the proxy received (``CONNECT host:port HTTP/1.1``, ``GET http://...``), in order,
        whether or not its credentials were right."""
        return [f"{m['method']} {m['target']}" for m in _REQUEST.finditer(self._log_text())]

    def tunnels(self) -> list[Tunnel]:
        """The CONNECTs it accepted and opened, in order: a request whose credentials were wrong is answered
        407 and never reaches "Established connection"."""
        opened: list[Tunnel] = []
        pending: dict[str, str] = {}
        for line in self._log_text().splitlines():
            request = _REQUEST.search(line)
            if request and request["method"] == "CONNECT":
                pending[request["fd"]] = request["target"]
                continue
            if _ESTABLISHED.search(line) and pending:
                # tinyproxy serves one client per process: the last CONNECT read is the one being opened.
                fd = next(reversed(pending))
                opened.append(Tunnel(pending.pop(fd)))
        return opened
