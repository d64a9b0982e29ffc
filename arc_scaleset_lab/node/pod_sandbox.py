"""What one container of a pod needs to run as a local process: its environment, its volumes, its
Kubernetes credentials. The kubelet's part of "create container", for nodes that run no containers.

:func:`prepare_sandbox` builds a private directory (mode 0700) for one pod:

- **Volumes.** Each volume the container mounts is materialised under ``<root>/volumes/<name>``: a Secret
  or ConfigMap as one file per key (or per ``items`` entry), an emptyDir as an empty directory. Other
  volume kinds are skipped with a warning (the projected API-access volume silently: see credentials).
  Environment values that name a path under a mount path are rewritten to the local copy, so
  ``LISTENER_CONFIG_PATH=/etc/gha-listener/config.json`` points at a real file.
- **Environment.** The container's ``env`` (``value``; ``valueFrom`` ``secretKeyRef``/``configMapKeyRef``
  read from the API, ``fieldRef`` from the pod) and ``envFrom``; an optional reference that is missing is
  skipped, a required one raises :class:`SandboxError` (the kubelet's ``CreateContainerConfigError``).
  ``HOSTNAME`` is the pod's hostname (``spec.hostname`` or its name), as in a pod.
- **Credentials.** A token for the pod's ServiceAccount minted with the TokenRequest API (bound to the
  pod, so it dies with it) and a kubeconfig with that token file and the cluster CA in ``KUBECONFIG``:
  the process has exactly its Role's permissions, as in a real pod. When TokenRequest fails the admin
  kubeconfig is used instead, with a warning. :func:`refresh_token` rewrites the token file, as the
  kubelet rotates projected tokens; the client re-reads it.

Secret values go only into files of mode 0600 and the child's environment, never into logs or messages.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.credentials import ConnectionConfig
from arc_scaleset.kube.errors import ApiError, KubeError, NotFound
from arc_scaleset.kube.resources import CONFIG_MAPS, SECRETS

log = logging.getLogger(__name__)

DEFAULT_TOKEN_SECONDS: Final = 3600
TOKEN_REFRESH_FRACTION: Final = 0.8
"""Refresh a token once this fraction of its lifetime has passed (the kubelet's rule)."""


class SandboxError(Exception):
    """The container cannot be configured (a required Secret, ConfigMap or key is missing)."""


@dataclass
class Sandbox:
    """The private directory of one pod's container and what was prepared in it."""

    root: Path
    env: dict[str, str] = field(repr=False)
    credentials: str
    """``service account <ns>/<name>`` or ``admin kubeconfig``: what the process authenticates as."""
    token_expiry: dt.datetime | None = None
    mounts: dict[str, Path] = field(default_factory=dict)
    """Container mount path -> local directory."""

    @property
    def token_file(self) -> Path:
        return self.root / "serviceaccount" / "token"

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


# -- pod fields ---------------------------------------------------------------------------------------


def container_of(pod: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    for container in (pod.get("spec") or {}).get("containers") or ():
        if container.get("name") == name:
            return container  # type: ignore[no-any-return]
    return None


def _field_value(pod: Mapping[str, Any], path: str) -> str:
    """A ``fieldRef.fieldPath`` of the downward API."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": status.get("podIP"),
        "status.hostIP": status.get("hostIP"),
    }
    if path in simple:
        return str(simple[path] or "")
    for prefix, source in (("metadata.labels", "labels"), ("metadata.annotations", "annotations")):
        if path.startswith(prefix + "['") and path.endswith("']"):
            return str((meta.get(source) or {}).get(path[len(prefix) + 2 : -2], ""))
    raise SandboxError(f"fieldRef {path!r} is not supported")


# -- API reads ----------------------------------------------------------------------------------------


class _Reader:
    """Secrets and ConfigMaps of one namespace, read once per preparation."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self._cache: dict[tuple[str, str], dict[str, bytes] | None] = {}

    async def data(self, kind: str, name: str) -> dict[str, bytes] | None:
        """The decoded data of Secret or ConfigMap ``name`` (``None`` when it does not exist)."""
        key = (kind, name)
        if key not in self._cache:
            self._cache[key] = await self._read(kind, name)
        return self._cache[key]

    async def _read(self, kind: str, name: str) -> dict[str, bytes] | None:
        try:
            obj = await self.kube.get(SECRETS if kind == "secret" else CONFIG_MAPS, name, namespace=self.namespace)
        except NotFound:
            return None
        if kind == "secret":
            return {key: base64.b64decode(value) for key, value in (obj.get("data") or {}).items()}
        data = {key: str(value).encode() for key, value in (obj.get("data") or {}).items()}
        data.update({key: base64.b64decode(value) for key, value in (obj.get("binaryData") or {}).items()})
        return data

    async def key(self, kind: str, ref: Mapping[str, Any]) -> str | None:
        """A ``secretKeyRef``/``configMapKeyRef`` value; ``None`` when optional and missing."""
        name, key = str(ref.get("name") or ""), str(ref.get("key") or "")
        data = await self.data(kind, name)
        if data is not None and key in data:
            return data[key].decode("utf-8", "replace")
        if ref.get("optional"):
            return None
        what = f"{kind} {self.namespace}/{name}" + ("" if data is None else f" has no key {key!r}")
        raise SandboxError(f"{what} is missing" if data is None else what)


# -- preparation --------------------------------------------------------------------------------------


async def prepare_sandbox(
    kube: KubeClient,
    connection: ConnectionConfig,
    pod: Mapping[str, Any],
    *,
    container: str,
    parent: Path,
    admin_kubeconfig: Path,
    token_seconds: int = DEFAULT_TOKEN_SECONDS,
) -> Sandbox:
    """Prepare ``container`` of ``pod`` to run as a local process (see the module docstring).

    Raises :class:`SandboxError` when it cannot be configured; the directory is removed then.
    """
    meta = pod.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    spec = container_of(pod, container)
    if spec is None:
        raise SandboxError(f"pod {namespace}/{name} has no container named {container!r}")
    root = _private_directory(parent, prefix=f"{name}-")
    reader = _Reader(kube, namespace)
    try:
        mounts = await _materialise_volumes(reader, pod, spec, root)
        env = await _container_env(reader, pod, spec)
        env = {key: rewrite_path(value, mounts) for key, value in env.items()}
        env["HOSTNAME"] = str((pod.get("spec") or {}).get("hostname") or name)
        sandbox = Sandbox(root=root, env=env, credentials="", mounts=mounts)
        await _credentials(kube, connection, pod, sandbox, admin_kubeconfig=admin_kubeconfig, seconds=token_seconds)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return sandbox


async def _materialise_volumes(
    reader: _Reader, pod: Mapping[str, Any], container: Mapping[str, Any], root: Path
) -> dict[str, Path]:
    volumes = {volume.get("name"): volume for volume in (pod.get("spec") or {}).get("volumes") or ()}
    mounts: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or ():
        volume = volumes.get(mount.get("name"))
        if volume is None:
            raise SandboxError(f"volumeMount {mount.get('name')!r} names no volume of the pod")
        local = root / "volumes" / str(volume["name"])
        if not local.exists():
            local.mkdir(parents=True)
            await _fill_volume(reader, volume, local)
        sub_path = str(mount.get("subPath") or "")
        mounts[str(mount.get("mountPath") or "").rstrip("/")] = local / sub_path if sub_path else local
    return mounts


async def _fill_volume(reader: _Reader, volume: Mapping[str, Any], local: Path) -> None:
    for kind, source_key, name_key in (("secret", "secret", "secretName"), ("configmap", "configMap", "name")):
        source = volume.get(source_key)
        if source is None:
            continue
        name = str(source.get(name_key) or "")
        data = await reader.data(kind, name)
        if data is None:
            if source.get("optional"):
                return
            raise SandboxError(f"{kind} {reader.namespace}/{name} (volume {volume['name']!r}) is missing")
        items = source.get("items") or [{"key": key, "path": key} for key in data]
        for item in items:
            key = str(item.get("key"))
            if key not in data:
                if source.get("optional"):
                    continue
                raise SandboxError(f"{kind} {reader.namespace}/{name} has no key {key!r} (volume {volume['name']!r})")
            target = local / str(item.get("path") or key)
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_private(target, data[key])
        return
    if "emptyDir" in volume:
        return
    sources = (volume.get("projected") or {}).get("sources") or ()
    if any("serviceAccountToken" in source for source in sources):
        return  # the API-access volume admission adds: credentials come through KUBECONFIG instead
    log.warning("volume %r: only secret, configMap and emptyDir volumes are materialised; left empty", volume["name"])


async def _container_env(reader: _Reader, pod: Mapping[str, Any], container: Mapping[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    for source in container.get("envFrom") or ():
        prefix = str(source.get("prefix") or "")
        for kind, ref_key in (("secret", "secretRef"), ("configmap", "configMapRef")):
            ref = source.get(ref_key)
            if ref is None:
                continue
            data = await reader.data(kind, str(ref.get("name") or ""))
            if data is None:
                if ref.get("optional"):
                    continue
                raise SandboxError(f"{kind} {reader.namespace}/{ref.get('name')} (envFrom) is missing")
            env.update({prefix + key: value.decode("utf-8", "replace") for key, value in data.items()})
    for var in container.get("env") or ():
        name = str(var.get("name"))
        value_from = var.get("valueFrom")
        if value_from is None:
            env[name] = str(var.get("value") or "")
            continue
        resolved: str | None
        if "secretKeyRef" in value_from:
            resolved = await reader.key("secret", value_from["secretKeyRef"])
        elif "configMapKeyRef" in value_from:
            resolved = await reader.key("configmap", value_from["configMapKeyRef"])
        elif "fieldRef" in value_from:
            resolved = _field_value(pod, str(value_from["fieldRef"].get("fieldPath")))
        else:
            log.warning("env %s: only secretKeyRef, configMapKeyRef and fieldRef are resolved; skipped", name)
            resolved = None
        if resolved is not None:
            env[name] = resolved
    return env


def rewrite_path(value: str, mounts: Mapping[str, Path]) -> str:
    """``value`` with a leading container mount path replaced by its local directory."""
    for mount_path in sorted(mounts, key=len, reverse=True):
        if mount_path and (value == mount_path or value.startswith(mount_path + "/")):
            return str(mounts[mount_path]) + value[len(mount_path) :]
    return value


def _private_directory(parent: Path, *, prefix: str) -> Path:
    """A new directory under ``parent`` (created if needed) that only this user can enter."""
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))  # mkdtemp creates it with mode 0700


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` readable by this user only, replacing the file atomically."""
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    temporary.replace(path)


# -- credentials --------------------------------------------------------------------------------------


async def _credentials(
    kube: KubeClient,
    connection: ConnectionConfig,
    pod: Mapping[str, Any],
    sandbox: Sandbox,
    *,
    admin_kubeconfig: Path,
    seconds: int,
) -> None:
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    account = str((pod.get("spec") or {}).get("serviceAccountName") or "default")
    try:
        sandbox.token_expiry = await refresh_token(kube, pod, sandbox, seconds=seconds)
    except KubeError as exc:
        log.warning(
            "pod %s/%s: TokenRequest for service account %s failed (%s); the process gets the admin kubeconfig",
            namespace,
            meta.get("name"),
            account,
            exc,
        )
        sandbox.env["KUBECONFIG"] = str(admin_kubeconfig)
        sandbox.credentials = "admin kubeconfig"
        return
    kubeconfig = sandbox.root / "kubeconfig"
    _write_private(kubeconfig, pod_kubeconfig(connection, token_file=sandbox.token_file, namespace=namespace))
    sandbox.env["KUBECONFIG"] = str(kubeconfig)
    sandbox.credentials = f"service account {namespace}/{account}"


async def refresh_token(kube: KubeClient, pod: Mapping[str, Any], sandbox: Sandbox, *, seconds: int) -> dt.datetime:
    """Mint a token for the pod's ServiceAccount, bound to the pod, into ``sandbox.token_file``; its expiry.

    Raises :class:`~arc_scaleset.kube.errors.KubeError` when the API refuses.
    """
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    account = str((pod.get("spec") or {}).get("serviceAccountName") or "default")
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "expirationSeconds": seconds,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"), "uid": meta.get("uid")},
        },
    }
    result = await kube.request_raw(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token", body=body
    )
    status = (result.get("status") or {}) if isinstance(result, dict) else {}
    token = status.get("token")
    if not isinstance(token, str) or not token:
        raise ApiError(500, "InternalError", "TokenRequest answered without a token")
    sandbox.token_file.parent.mkdir(mode=0o700, exist_ok=True)
    _write_private(sandbox.token_file, token.encode())
    expiry = _parse_time(status.get("expirationTimestamp"))
    return expiry or dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)


def refresh_delay(expiry: dt.datetime, *, now: dt.datetime, lifetime: float) -> float:
    """Seconds until a token expiring at ``expiry`` should be refreshed (at 80% of ``lifetime``, at least 1 s)."""
    remaining = (expiry - now).total_seconds()
    return max(1.0, remaining - (1.0 - TOKEN_REFRESH_FRACTION) * lifetime)


def pod_kubeconfig(connection: ConnectionConfig, *, token_file: Path, namespace: str) -> bytes:
    """A kubeconfig for ``connection``'s server and CA that authenticates with the token in ``token_file``."""
    cluster: dict[str, Any] = {"server": connection.server}
    if connection.ca_data is not None:
        cluster["certificate-authority-data"] = base64.b64encode(connection.ca_data).decode()
    if connection.insecure_skip_tls_verify:
        cluster["insecure-skip-tls-verify"] = True
    if connection.tls_server_name:
        cluster["tls-server-name"] = connection.tls_server_name
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": cluster}],
        "users": [{"name": "pod", "user": {"tokenFile": str(token_file)}}],
        "contexts": [{"name": "pod", "context": {"cluster": "cluster", "user": "pod", "namespace": namespace}}],
        "current-context": "pod",
    }
    return yaml.safe_dump(document, sort_keys=False).encode()


def _parse_time(value: object) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    with contextlib.suppress(ValueError):
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None
