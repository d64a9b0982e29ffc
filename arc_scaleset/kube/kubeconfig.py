"""Reading connection settings: kubeconfig files (as kubectl does) and the in-cluster service account.

Everything here is synchronous and runs once at start-up; every failure is a :class:`KubeconfigError` whose
message names the file and the missing or bad entry, e.g. ``kubeconfig /x: context 'foo' not found``.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.credentials import BasicAuth, ConnectionConfig, NoToken, StaticToken, TokenFile, TokenSource
from arc_scaleset.kube.errors import KubeconfigError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def default_kubeconfig_paths(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The files kubectl would read: the ``$KUBECONFIG`` list if set and non-empty, else ``~/.kube/config``."""
    env = os.environ if environ is None else environ
    listed = [Path(p).expanduser() for p in env.get("KUBECONFIG", "").split(os.pathsep) if p.strip()]
    return listed or [Path("~/.kube/config").expanduser()]


def in_cluster_available(
    environ: Mapping[str, str] | None = None, *, service_account_dir: Path = SERVICE_ACCOUNT_DIR
) -> bool:
    """Whether this process runs in a pod with a mounted service-account token."""
    env = os.environ if environ is None else environ
    return bool(env.get("KUBERNETES_SERVICE_HOST")) and (service_account_dir / "token").is_file()


def load_in_cluster(
    environ: Mapping[str, str] | None = None,
    *,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
    clock: Clock = REAL_CLOCK,
) -> ConnectionConfig:
    """The pod's service account: ``KUBERNETES_SERVICE_HOST``/``PORT``, the CA, the rotating token, the namespace."""
    env = os.environ if environ is None else environ
    host = env.get("KUBERNETES_SERVICE_HOST", "")
    port = env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise KubeconfigError(
            "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set"
        )
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 service address
    token_path = service_account_dir / "token"
    if not token_path.is_file():
        raise KubeconfigError(f"in-cluster: service-account token {token_path} is missing")
    ca_path = service_account_dir / "ca.crt"
    try:
        ca_data = ca_path.read_bytes()
    except OSError as exc:
        raise KubeconfigError(f"in-cluster: cannot read {ca_path}: {exc.strerror or exc}") from None
    try:
        namespace = (service_account_dir / "namespace").read_text().strip() or "default"
    except OSError:
        namespace = "default"
    token = TokenFile(token_path, clock=clock)
    token.authorization()  # fail now, with a clear message, rather than on the first request
    return ConnectionConfig(
        server=f"https://{host}:{port}",
        namespace=namespace,
        ca_data=ca_data,
        token_source=token,
        source="in-cluster service account",
    )


def load_kubeconfig(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    *,
    context: str | None = None,
    clock: Clock = REAL_CLOCK,
) -> ConnectionConfig:
    """Resolve ``context`` (default: ``current-context``) of a kubeconfig into a :class:`ConnectionConfig`.

    ``path`` may be one file or a list merged as kubectl merges ``$KUBECONFIG`` (the first file to define a
    name wins); ``None`` means :func:`default_kubeconfig_paths`. Relative file references resolve against
    the directory of the file that contains them.
    """
    if path is None:
        paths = default_kubeconfig_paths()
    elif isinstance(path, str | os.PathLike):
        paths = [Path(path).expanduser()]
    else:
        paths = [Path(p).expanduser() for p in path]
    merged = _merge([_read(p) for p in paths if len(paths) == 1 or p.exists()], paths)
    label = f"kubeconfig {os.pathsep.join(str(p) for p in paths)}"

    context_name = context or merged.current_context
    if not context_name:
        raise KubeconfigError(f"{label}: no current-context is set and no context was given")
    ctx = merged.contexts.get(context_name)
    if ctx is None:
        known = ", ".join(sorted(merged.contexts)) or "none"
        raise KubeconfigError(f"{label}: context '{context_name}' not found (known: {known})")
    ctx_body, _ = ctx
    cluster_name = _str(ctx_body, "cluster", label)
    user_name = _str(ctx_body, "user", label)
    if not cluster_name:
        raise KubeconfigError(f"{label}: context '{context_name}' names no cluster")
    cluster = merged.clusters.get(cluster_name)
    if cluster is None:
        raise KubeconfigError(f"{label}: cluster '{cluster_name}' (of context '{context_name}') not found")
    user: tuple[Mapping[str, Any], Path] | None = ({}, paths[0]) if not user_name else merged.users.get(user_name)
    if user is None:
        raise KubeconfigError(f"{label}: user '{user_name}' (of context '{context_name}') not found")

    cluster_body, cluster_file = cluster
    user_body, user_file = user
    where = f"kubeconfig {cluster_file}: cluster '{cluster_name}'"
    server = _str(cluster_body, "server", where).rstrip("/")
    if not server:
        raise KubeconfigError(f"{where} has no server")
    if not server.startswith(("https://", "http://")):
        raise KubeconfigError(f"{where}: server {server!r} must start with https:// or http://")
    ca_data = _pem(cluster_body, "certificate-authority", cluster_file, where)
    insecure = bool(cluster_body.get("insecure-skip-tls-verify", False))
    if insecure and ca_data is not None:
        raise KubeconfigError(f"{where}: insecure-skip-tls-verify cannot be combined with a certificate authority")

    proxy_url = _str(cluster_body, "proxy-url", where) or None
    if proxy_url is not None and not proxy_url.startswith(("http://", "https://")):
        raise KubeconfigError(f"{where}: proxy-url {proxy_url!r} is not supported (only http:// and https:// proxies)")

    user_where = f"kubeconfig {user_file}: user '{user_name}'"
    if "exec" in user_body or "auth-provider" in user_body:
        kind = "exec credential plugin" if "exec" in user_body else "auth-provider"
        raise KubeconfigError(
            f"{user_where} uses an {kind}, which arc-scaleset does not support; use a token or a certificate"
        )
    cert = _pem(user_body, "client-certificate", user_file, user_where)
    key = _pem(user_body, "client-key", user_file, user_where)
    if (cert is None) != (key is None):
        raise KubeconfigError(f"{user_where}: client-certificate and client-key must be given together")

    token_source: TokenSource = NoToken()
    token = _str(user_body, "token", user_where)
    token_file = _str(user_body, "tokenFile", user_where)
    username = _str(user_body, "username", user_where)
    if token:
        token_source = StaticToken(token)
    elif token_file:
        token_source = TokenFile(_resolve(token_file, user_file), clock=clock)
        try:
            token_source.authorization()
        except KubeconfigError as exc:
            raise KubeconfigError(f"{user_where}: {exc}") from None
    elif username:
        token_source = BasicAuth(username, _str(user_body, "password", user_where))

    namespace = _str(ctx_body, "namespace", label) or "default"
    return ConnectionConfig(
        server=server,
        namespace=namespace,
        ca_data=ca_data,
        client_cert_data=cert,
        client_key_data=key,
        insecure_skip_tls_verify=insecure,
        tls_server_name=_str(cluster_body, "tls-server-name", where) or None,
        proxy_url=proxy_url,
        token_source=token_source,
        source=f"{label} (context '{context_name}')",
    )


class _Merged:
    def __init__(self) -> None:
        self.current_context = ""
        self.clusters: dict[str, tuple[Mapping[str, Any], Path]] = {}
        self.users: dict[str, tuple[Mapping[str, Any], Path]] = {}
        self.contexts: dict[str, tuple[Mapping[str, Any], Path]] = {}


def _read(path: Path) -> tuple[Path, Mapping[str, Any]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise KubeconfigError(f"kubeconfig {path}: file not found") from None
    except OSError as exc:
        raise KubeconfigError(f"kubeconfig {path}: cannot read: {exc.strerror or exc}") from None
    # Imported here: a process in a pod uses its ServiceAccount and never reads YAML; PyYAML would stay
    # resident in every controller and listener for nothing.
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise KubeconfigError(f"kubeconfig {path}: not valid YAML{at}") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise KubeconfigError(f"kubeconfig {path}: expected a mapping at the top level")
    return path, data


def _merge(files: list[tuple[Path, Mapping[str, Any]]], paths: list[Path]) -> _Merged:
    if not files:
        raise KubeconfigError(f"kubeconfig {os.pathsep.join(str(p) for p in paths)}: no such file")
    merged = _Merged()
    for path, data in files:
        if not merged.current_context:
            merged.current_context = str(data.get("current-context") or "")
        for section, key, target in (
            ("clusters", "cluster", merged.clusters),
            ("users", "user", merged.users),
            ("contexts", "context", merged.contexts),
        ):
            entries = data.get(section) or []
            if not isinstance(entries, list):
                raise KubeconfigError(f"kubeconfig {path}: '{section}' must be a list")
            for entry in entries:
                if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                    raise KubeconfigError(f"kubeconfig {path}: every entry of '{section}' needs a name")
                body = entry.get(key) or {}
                if not isinstance(body, Mapping):
                    raise KubeconfigError(f"kubeconfig {path}: {key} '{entry['name']}' must be a mapping")
                target.setdefault(entry["name"], (body, path))
    return merged


def _str(body: Mapping[str, Any], key: str, where: str) -> str:
    value = body.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise KubeconfigError(f"{where}: '{key}' must be a string")
    return value


def _resolve(ref: str, kubeconfig_file: Path) -> Path:
    path = Path(ref).expanduser()
    return path if path.is_absolute() else kubeconfig_file.parent / path


def _pem(body: Mapping[str, Any], key: str, kubeconfig_file: Path, where: str) -> bytes | None:
    """``<key>-data`` (base64 PEM) or ``<key>`` (a file), read now; ``None`` when neither is set."""
    data = _str(body, f"{key}-data", where)
    if data:
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise KubeconfigError(f"{where}: '{key}-data' is not valid base64") from None
    ref = _str(body, key, where)
    if not ref:
        return None
    path = _resolve(ref, kubeconfig_file)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KubeconfigError(f"{where}: cannot read {key} {path}: {exc.strerror or exc}") from None
