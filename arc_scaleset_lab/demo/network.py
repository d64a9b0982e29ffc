"""The demo's enterprise network (``--tls``, ``--proxy``): GitHub over TLS with a private CA, behind a proxy.

- ``--tls``: the simulated GitHub serves HTTPS with a CA of its own, which the scale set trusts only through a
  ConfigMap named by ``githubServerTLS.certificateFrom.configMapKeyRef`` (a GitHub Enterprise Server with a
  private CA).
- ``--proxy`` (implies ``--tls``): a real forward proxy (tinyproxy, :mod:`arc_scaleset_lab.harness.proxy`)
  requiring credentials, named by the scale set's ``proxy.https.url`` with a ``credentialSecretRef`` Secret, so
  the controller, the listener and the runner pods are all configured through it as ARC configures them. The
  proxy needs TLS: an ``https://`` request crosses a proxy as a CONNECT tunnel (what a corporate proxy sees,
  and what its log proves), and credentials only go out over TLS. The sim is served under this machine's host
  name, because loopback addresses are never proxied (docs/github.md).

:func:`proxy_traffic` turns the proxy's own log and the sim's record of TCP peers into :class:`ProxyTraffic`:
how many requests went through the proxy and which, if any, bypassed it. It is pure, so it is unit-tested.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from arc_scaleset.kube import resources
from arc_scaleset_lab.cluster.processes import pid_alive, stop_pid
from arc_scaleset_lab.harness.proxy import PROXY_EGRESS_ADDRESS, TinyProxy, Tunnel
from arc_scaleset_lab.node.runner_pods import RUNNER_CONTAINER, RUNNER_POD_SELECTOR

if TYPE_CHECKING:
    from arc_scaleset_lab.harness.system import System, SystemOptions

PROXY_DIR = "proxy"
CA_KEY = "ca.crt"


class NetworkError(RuntimeError):
    """The demo's network could not be set up (no resolvable host name, no proxy); the message says why."""


@dataclass(frozen=True)
class ProxyTraffic:
    """What went through the proxy, from the proxy's log and the sim's record of who connected to it.

    - ``tunnels``: CONNECTs the proxy accepted (credentials checked) and opened to the simulated GitHub;
    - ``refused``: CONNECTs to the sim it did not open (wrong or missing credentials: 407);
    - ``elsewhere``: request lines the proxy received for anything but a tunnel to the sim (distinct);
    - ``via_proxy``: protocol requests the sim served that came from the proxy's outgoing address;
    - ``direct``: protocol requests the sim served from any other address, by address: those bypassed it;
    - ``runner_pods``: live runner pods at the end, and ``runner_pods_without_proxy`` those whose runner
      container does not take ``https_proxy`` from a Secret (the runner proxy Secret ARC writes). The sim's
      runners make no GitHub calls of their own, so their configuration is the evidence for them.
    """

    tunnels: int
    refused: int
    elsewhere: tuple[str, ...]
    via_proxy: int
    direct: Mapping[str, int]
    runner_pods: int = 0
    runner_pods_without_proxy: tuple[str, ...] = ()

    @property
    def all_through_proxy(self) -> bool:
        """Every request the sim served came through the proxy (and some did), and every runner pod is set to."""
        return self.tunnels > 0 and self.via_proxy > 0 and not self.direct and not self.runner_pods_without_proxy

    def lines(self) -> list[str]:
        through = (
            f"{self.via_proxy} requests to the simulated GitHub came through it, "
            f"in {self.tunnels} CONNECT tunnels opened with its credentials"
        )
        if self.all_through_proxy:
            lines = [f"proxy:                 all GitHub traffic went through it: {through}; none bypassed it"]
        else:
            bypassed = ", ".join(f"{count} from {peer or 'unknown'}" for peer, count in sorted(self.direct.items()))
            lines = [
                "proxy:                 NOT all GitHub traffic went through it: "
                + through
                + (f"; bypassed it: {bypassed}" if bypassed else "")
            ]
        if self.runner_pods:
            missing = self.runner_pods_without_proxy
            lines.append(
                f"  runner pods:         {self.runner_pods - len(missing)} of {self.runner_pods} live ones take "
                "https_proxy from the runner proxy Secret" + (f"; not: {', '.join(missing[:5])}" if missing else "")
            )
        if self.refused:
            lines.append(f"  refused by the proxy: {self.refused} CONNECTs without valid credentials")
        if self.elsewhere:
            lines.append(f"  other requests it saw: {', '.join(self.elsewhere[:5])}")
        return lines


def proxy_traffic(
    *,
    requests: Sequence[str],
    tunnels: Sequence[Tunnel],
    sim_target: str,
    request_peers: Mapping[str, int],
    proxy_egress: str = PROXY_EGRESS_ADDRESS,
) -> ProxyTraffic:
    """Combine the proxy's request lines and tunnels with the sim's requests by TCP peer address.

    ``sim_target`` is the sim's ``host:port``. The proxy's outgoing side is bound to ``proxy_egress``, so a
    request the sim got from any other address did not come through the proxy.
    """
    to_sim = [t for t in tunnels if t.target == sim_target]
    connects = sum(1 for line in requests if line == f"CONNECT {sim_target}")
    elsewhere = tuple(dict.fromkeys(line for line in requests if line != f"CONNECT {sim_target}"))
    return ProxyTraffic(
        tunnels=len(to_sim),
        refused=max(0, connects - len(to_sim)),
        elsewhere=elsewhere,
        via_proxy=int(request_peers.get(proxy_egress, 0)),
        direct={peer: int(count) for peer, count in request_peers.items() if peer != proxy_egress and count},
    )


def sim_host_name() -> str:
    """This machine's host name, which clients proxy (loopback addresses never are); it must resolve."""
    name = socket.gethostname()
    try:
        socket.getaddrinfo(name, None)
    except OSError as exc:
        raise NetworkError(f"this machine's host name {name!r} does not resolve: add it to /etc/hosts") from exc
    return name


class DemoNetwork:
    """The TLS and proxy settings of one demo run: starts and stops the proxy, configures the scale set."""

    def __init__(self, workdir: Path, *, tls: bool, proxy: bool, tie_to_parent: bool) -> None:
        self.tls = tls or proxy
        self.proxy = TinyProxy(workdir / PROXY_DIR, tie_to_parent=tie_to_parent) if proxy else None

    def start(self) -> None:
        """Start the proxy (installing tinyproxy first when it is missing); raises :class:`NetworkError`."""
        if self.proxy is None:
            return
        sim_host_name()  # fail before anything starts
        try:
            # On this thread, not a worker's: the kernel's parent-death signal follows the thread that started
            # the child, and a worker thread may end before the demo does.
            self.proxy.start()
        except Exception as exc:  # apt-get or tinyproxy failures: say what happened, not a traceback
            raise NetworkError(f"could not start the proxy: {exc}") from exc

    async def stop(self) -> None:
        if self.proxy is not None:
            await asyncio.to_thread(self.proxy.stop)

    def system_options(self, options: SystemOptions) -> SystemOptions:
        """``options`` with the sim served over TLS, and under a proxied host name when there is a proxy."""
        if not self.tls:
            return options
        host = sim_host_name() if self.proxy is not None else options.sim_host
        return dataclasses.replace(options, sim_tls=True, sim_host=host)

    async def scale_set_spec(self, system: System, *, namespace: str, name: str) -> dict[str, Any]:
        """Create the CA ConfigMap and the proxy credentials Secret; returns the scale set's spec fields for them."""
        spec: dict[str, Any] = {}
        if self.tls:
            ca = system.sim_ca_pem
            if not ca:
                raise NetworkError("the simulated GitHub did not serve TLS")
            await system.kube.create(
                resources.CONFIG_MAPS,
                {"metadata": {"name": self.ca_config_map(name)}, "data": {CA_KEY: ca}},
                namespace=namespace,
            )
            spec["githubServerTLS"] = {
                "certificateFrom": {"configMapKeyRef": {"name": self.ca_config_map(name), "key": CA_KEY}}
            }
        if self.proxy is not None:
            # A secret of the run: the logs are searched for it like the PAT.
            system.ledger.add(self.proxy.password, "proxy password")
            await system.kube.create(
                resources.SECRETS,
                {
                    "metadata": {"name": self.proxy_secret(name)},
                    "stringData": {"username": self.proxy.user, "password": self.proxy.password},
                },
                namespace=namespace,
            )
            spec["proxy"] = {"https": {"url": self.proxy.url, "credentialSecretRef": self.proxy_secret(name)}}
        return spec

    @staticmethod
    def ca_config_map(name: str) -> str:
        return f"{name}-github-ca"

    @staticmethod
    def proxy_secret(name: str) -> str:
        return f"{name}-proxy-credentials"

    async def traffic(self, system: System, *, namespace: str) -> ProxyTraffic | None:
        """What went through the proxy so far, and the runner pods of ``namespace`` (None without a proxy)."""
        if self.proxy is None:
            return None
        stats = await system.sim.stats()
        pods = await system.kube.list(resources.PODS, namespace=namespace, label_selector=RUNNER_POD_SELECTOR)
        live = [p for p in pods.items if not p["metadata"].get("deletionTimestamp")]
        traffic = proxy_traffic(
            requests=self.proxy.requests(),
            tunnels=self.proxy.tunnels(),
            sim_target=urlsplit(system.sim_url).netloc,
            request_peers=dict(stats.get("requestPeers") or {}),
        )
        without = tuple(str(p["metadata"]["name"]) for p in live if not _takes_https_proxy_from_secret(p))
        return dataclasses.replace(traffic, runner_pods=len(live), runner_pods_without_proxy=without)

    def notes(self, *, namespace: str, name: str) -> tuple[str, ...]:
        """Summary lines saying how the scale set reached GitHub."""
        notes = []
        if self.tls:
            notes.append(
                f"GitHub over TLS:       private CA, trusted only through ConfigMap {namespace}/"
                f"{self.ca_config_map(name)} (githubServerTLS)"
            )
        if self.proxy is not None:
            notes.append(
                f"proxy settings:        proxy.https {self.proxy.url} with Secret {namespace}/"
                f"{self.proxy_secret(name)} (tinyproxy, requiring credentials)"
            )
        return tuple(notes)


def _takes_https_proxy_from_secret(pod: Mapping[str, Any]) -> bool:
    for container in pod.get("spec", {}).get("containers") or []:
        if container.get("name") == RUNNER_CONTAINER:
            env = {e.get("name"): e for e in container.get("env") or []}
            return bool(((env.get("https_proxy") or {}).get("valueFrom") or {}).get("secretKeyRef"))
    return False


def stop_recorded(workdir: Path) -> list[str]:
    """Stop the proxy a kept demo in ``workdir`` left running (by the PID tinyproxy recorded)."""
    pid_file = workdir / PROXY_DIR / "tinyproxy.pid"
    try:
        pid = int(pid_file.read_text().strip())
        # The PID may have been reused since: stop it only if it is still a tinyproxy.
        is_proxy = b"tinyproxy" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return []
    if is_proxy and pid_alive(pid):
        stop_pid(pid, timeout=10.0)
        return ["proxy"]
    return []
