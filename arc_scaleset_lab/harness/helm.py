"""Helm charts (paths given by the caller, the checkout's ``charts/`` in the tests) driven by the real
``helm`` binary (built with the control plane), for tests.

- :class:`Helm` renders (``helm template``) and installs/uninstalls releases on a cluster; values go in as
  a JSON file (JSON is YAML), so a test writes them as a dict.
- :func:`service_account_kubeconfig` mints a token for a ServiceAccount (TokenRequest) and writes a
  kubeconfig with it: a process started with it has exactly the permissions the charts granted.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import yaml

from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.kubeconfig import load_kubeconfig
from arc_scaleset_lab.cluster import binaries
from arc_scaleset_lab.node.pod_sandbox import pod_kubeconfig

HELM_TIMEOUT = 120.0


class HelmError(RuntimeError):
    """helm exited non-zero; the message is its error output."""


class Helm:
    """``helm`` against the cluster of ``kubeconfig`` (or none: ``template`` needs no cluster)."""

    def __init__(self, *, kubeconfig: Path | None = None, binary: Path | None = None) -> None:
        self.binary = binary or binaries.bin_dir() / "helm"
        if not self.binary.is_file():
            raise FileNotFoundError(f"{self.binary} not found: run `arc-scaleset cluster build` first")
        self.kubeconfig = kubeconfig
        # helm keeps caches and plugins under $HOME; a private directory keeps runs apart.
        self._home = Path(tempfile.mkdtemp(prefix="arc-scaleset-helm-"))

    def close(self) -> None:
        """Remove helm's private home directory."""
        shutil.rmtree(self._home, ignore_errors=True)

    async def template(
        self, chart: Path, release: str, namespace: str, values: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """The objects ``chart`` renders with ``values`` (CRDs not included)."""
        out = await self._run("template", release, str(chart), "--namespace", namespace, values=values)
        return [doc for doc in yaml.safe_load_all(out) if doc]

    async def install(
        self,
        chart: Path,
        release: str,
        namespace: str,
        values: Mapping[str, Any] | None = None,
        *,
        skip_crds: bool = False,
    ) -> None:
        """``skip_crds``: leave the chart's ``crds/`` out (the cluster's CRDs are another chart's)."""
        extra = ("--skip-crds",) if skip_crds else ()
        await self._run("install", release, str(chart), "--namespace", namespace, "--wait=false", *extra, values=values)

    async def upgrade(self, chart: Path, release: str, namespace: str, values: Mapping[str, Any] | None = None) -> None:
        """Upgrade ``release`` to ``chart`` (which may be another chart than the one it was installed from)."""
        await self._run("upgrade", release, str(chart), "--namespace", namespace, "--wait=false", values=values)

    async def uninstall(self, release: str, namespace: str) -> None:
        """Uninstall and return at once: finalizers may still hold objects (that is what tests look at)."""
        await self._run("uninstall", release, "--namespace", namespace)

    async def _run(self, *args: str, values: Mapping[str, Any] | None = None) -> str:
        argv = [str(self.binary), *args]
        if self.kubeconfig is not None:
            argv += ["--kubeconfig", str(self.kubeconfig)]
        if values is not None:
            values_file = self._home / "values.json"
            values_file.write_bytes(orjson.dumps(values))
            argv += ["--values", str(values_file)]
        env = {
            "HOME": str(self._home),
            "HELM_CACHE_HOME": str(self._home / "cache"),
            "HELM_CONFIG_HOME": str(self._home / "config"),
            "HELM_DATA_HOME": str(self._home / "data"),
            "PATH": "/usr/bin:/bin",
        }
        process = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
        )
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), HELM_TIMEOUT)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise HelmError(f"helm {args[0]} did not finish in {HELM_TIMEOUT:g}s") from None
        if process.returncode != 0:
            raise HelmError(stderr.decode(errors="replace").strip())
        return stdout.decode()


async def service_account_kubeconfig(
    kube: KubeClient, admin_kubeconfig: Path, namespace: str, name: str, directory: Path, *, seconds: int = 3600
) -> Path:
    """A kubeconfig for the API server of ``admin_kubeconfig`` that authenticates as ServiceAccount
    ``namespace/name``, with a token valid for ``seconds``; written (private) into ``directory``."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}}
    answer = await kube.request_raw("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", body=body)
    token = ((answer or {}).get("status") or {}).get("token")
    if not token:
        raise RuntimeError(f"TokenRequest for {namespace}/{name} answered without a token")
    token_file = directory / f"{name}.token"
    token_file.touch(mode=0o600)
    token_file.write_text(token)
    kubeconfig = directory / f"{name}.kubeconfig"
    kubeconfig.touch(mode=0o600)
    connection = load_kubeconfig(admin_kubeconfig)
    kubeconfig.write_bytes(pod_kubeconfig(connection, token_file=token_file, namespace=namespace))
    return kubeconfig
