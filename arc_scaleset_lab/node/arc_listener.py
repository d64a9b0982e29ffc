"""ARC's own listener pods, played by the listener kubelet: what differs from this project's listener.

ARC v0.27.6's controller gives its listener pod's container (named ``autoscaler``) the command
``/github-runnerscaleset-listener`` (that is how such a pod is recognised: :func:`arc_listener_container`)
and the same ``LISTENER_CONFIG_PATH`` + ``listener-config`` Secret volume as this project's, so
:mod:`.pod_sandbox` prepares it unchanged. Two things are ARC's own:

- **In-cluster credentials only.** ARC's listener builds its Kubernetes client with client-go's
  ``rest.InClusterConfig()``: ``KUBERNETES_SERVICE_HOST``/``_PORT`` and the fixed directory
  ``/var/run/secrets/kubernetes.io/serviceaccount`` (token, ca.crt, namespace). That directory is given
  to the process alone: :func:`arc_listener_argv` starts it in a private mount namespace (``unshare``,
  root only) where a tmpfs over ``/run`` holds a bind mount of the sandbox's service-account directory,
  so nothing on this machine changes and other processes never see an in-cluster credential.
- **Its config's metrics address** is ``metricsAddr`` (camel case): pointed at a free loopback port, as the
  kubelet does for this project's listeners (pods of one node share its ports here).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from arc_scaleset.kube.credentials import ConnectionConfig
from arc_scaleset_lab.cluster.localcluster import LOOPBACK
from arc_scaleset_lab.node.pod_sandbox import Sandbox, SandboxError

ARC_LISTENER_COMMAND: Final = "/github-runnerscaleset-listener"
SERVICE_ACCOUNT_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"

# Runs as ``sh -c SCRIPT arc-listener SA_DIR BINARY`` inside the new mount namespace. /var/run is a
# symlink to /run on this machine's distributions, hence the tmpfs over /run; exec keeps one PID
# (the kubelet signals and measures the listener itself).
_MOUNT_SCRIPT: Final = (
    'set -e; R="$(readlink -f /var/run)"; mount -t tmpfs -o mode=0755 tmpfs "$R"; '
    'mkdir -p "$R/secrets/kubernetes.io/serviceaccount"; '
    'mount --bind "$1" "$R/secrets/kubernetes.io/serviceaccount"; exec "$2"'
)


def arc_listener_container(pod: Mapping[str, Any]) -> str | None:
    """The name of the pod's container that runs ARC's listener command (ARC v0.27.6 names it
    ``autoscaler``), or ``None`` when the pod is not one of ARC's listener pods."""
    for container in (pod.get("spec") or {}).get("containers") or ():
        if list(container.get("command") or ()) == [ARC_LISTENER_COMMAND]:
            return str(container.get("name") or "")
    return None


def prepare_in_cluster(sandbox: Sandbox, connection: ConnectionConfig, namespace: str) -> dict[str, str]:
    """Complete the sandbox's service-account directory (token: already minted; ca.crt, namespace) and return
    the environment ``rest.InClusterConfig()`` reads. Raises :class:`SandboxError` without a pod token."""
    account_dir = sandbox.token_file.parent
    if not sandbox.token_file.is_file():
        raise SandboxError("ARC's listener needs the pod's service-account token (TokenRequest failed)")
    if connection.ca_data is None:
        raise SandboxError("ARC's listener needs the API server's CA (the admin kubeconfig has none)")
    (account_dir / "ca.crt").write_bytes(connection.ca_data)
    (account_dir / "namespace").write_text(namespace)
    server = urlsplit(connection.server)
    return {
        "KUBERNETES_SERVICE_HOST": server.hostname or LOOPBACK,
        "KUBERNETES_SERVICE_PORT": str(server.port or 443),
    }


def can_run_arc_listener() -> bool:
    """Whether this process may give ARC's listener its private mount namespace (root, ``unshare`` works)."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(
        [unshare, "--mount", "--propagation", "private", "true"], capture_output=True, timeout=30, check=False
    )
    return probe.returncode == 0


def arc_listener_argv(binary: Path, sandbox: Sandbox) -> list[str]:
    """argv starting ARC's listener ``binary`` with the sandbox's service account mounted where it looks."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        raise SandboxError("running ARC's listener needs root and util-linux's unshare (a private mount namespace)")
    return [
        unshare,
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        _MOUNT_SCRIPT,
        "arc-listener",
        str(sandbox.token_file.parent),
        str(binary),
    ]


ARC_METRICS_ADDR_KEY = "metricsAddr"
"""Where ARC 0.27's listener config holds its metrics address (ours: ``metrics_addr``)."""
