"""Which namespaces may use which Azure Key Vault, and where what they read may be sent (docs/github.md).

A scale set's ``vaultConfig`` is tenant input, but the vault, the service principal and the certificate file
(``certificatePath``, a file in the controller's pod) belong to whoever the cluster admin set them up for. So
a namespace may read a vault only as a cluster admin allowed it, in a ConfigMap in the controller namespace
named by ``--vault-allow-list`` (chart: ``vaultAllowList``). Each key is a namespace; its value a JSON object:

.. code-block:: json

    {"vaultUrls": ["https://team-a.vault.azure.net/"],
     "certificatePaths": ["/etc/arc/vault/team-a.pem"],
     "secretPrefixes": ["team-a-"],
     "githubHosts": ["github.com"],
     "proxyHosts": ["proxy.corp.example:3128"]}

A read is allowed when the vault URL, the certificate path and the secret name (``githubConfigSecret``, or a
``proxy.*.credentialSecretRef``) are each allowed for the scale set's namespace, and the host of its
``githubConfigUrl`` (``host`` or ``host:port``; a port is compared only when written) is one the credentials
may be sent to. A proxy's credentials are sent to the proxy itself (``Proxy-Authorization``), whose URL the scale
set names: they are read only for a proxy whose host is in ``proxyHosts`` (same form), so a team cannot point
``proxy.*.url`` at a server of its own and read a password the vault keeps for it (the listener and the runners
get their proxy from Kubernetes Secrets, never from the vault; the controller is the only one that sends it).
A namespace without a key, or a key whose value does not parse, is allowed nothing; a key without
``proxyHosts`` no proxy credentials. Without the flag nothing is restricted, as in ARC (the controller logs a
warning when it starts).

:func:`parse_allow_list` and :func:`vault_refusal` are pure; :class:`VaultAllowListSource` reads the ConfigMap
(uncached GET, reused for a short time).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import Forbidden, NotFound
from arc_scaleset.kube.resources import CONFIG_MAPS

__all__ = [
    "ALLOW_LIST_FLAG",
    "AllowList",
    "VaultAllowListSource",
    "VaultGrant",
    "VaultNotAllowed",
    "VaultRead",
    "parse_allow_list",
    "vault_refusal",
]

ALLOW_LIST_FLAG: Final = "--vault-allow-list"
"""The controller flag naming the ConfigMap (in the controller namespace)."""

_FIELDS: Final = ("vaultUrls", "certificatePaths", "secretPrefixes", "githubHosts", "proxyHosts")
_DEFAULT_PORTS: Final = {"https": 443, "http": 80}


class VaultNotAllowed(ConfigurationError):  # noqa: N818 - reads as the condition it reports
    """The cluster admin did not allow this namespace this vault, certificate, secret or GitHub host."""

    reason = "VaultNotAllowed"


@dataclass(frozen=True, slots=True)
class VaultGrant:
    """What one namespace may use: every field of a read must be allowed (``secret_prefixes``: a prefix)."""

    vault_urls: frozenset[str] = frozenset()
    certificate_paths: frozenset[str] = frozenset()
    secret_prefixes: tuple[str, ...] = ()
    github_hosts: frozenset[str] = frozenset()
    proxy_hosts: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class AllowList:
    """The parsed ConfigMap: ``grants`` by namespace, ``broken`` the namespaces whose entry did not parse (with
    why), ``source`` where it lives (for messages: ``<namespace>/<name>``), ``unusable`` why the ConfigMap gives
    nothing at all (it does not exist, or the controller may not read it; then nothing is allowed)."""

    source: str
    grants: Mapping[str, VaultGrant] = field(default_factory=dict)
    broken: Mapping[str, str] = field(default_factory=dict)
    unusable: str = ""


@dataclass(frozen=True, slots=True)
class VaultRead:
    """One intended vault read: who asks (``namespace``), what it reads and where the result goes.

    ``purpose`` is the field naming the secret (``githubConfigSecret``, ``proxy.https.credentialSecretRef``).
    ``proxy_url``: for a proxy's credentials, the proxy they are sent to (``proxy.*.url`` as written; no scheme
    means ``http://``); ``""`` for anything else.
    """

    namespace: str
    vault_url: str
    certificate_path: str
    secret_name: str
    purpose: str
    github_url: str
    proxy_url: str = ""


def parse_allow_list(data: Mapping[str, object], *, source: str) -> AllowList:
    """The allow list in a ConfigMap's ``data``; an entry that does not parse allows nothing (and says why)."""
    grants: dict[str, VaultGrant] = {}
    broken: dict[str, str] = {}
    for namespace, text in data.items():
        try:
            grants[namespace] = _grant(text)
        except ValueError as exc:
            broken[namespace] = str(exc)
    return AllowList(source=source, grants=grants, broken=broken)


def _grant(text: object) -> VaultGrant:
    try:
        document = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise ValueError(f"its value is not a JSON object with {', '.join(_FIELDS)}")
    unknown = sorted(set(document) - set(_FIELDS))
    if unknown:
        raise ValueError(f"unknown keys {unknown} (expected {', '.join(_FIELDS)})")
    lists: dict[str, list[str]] = {}
    for key in _FIELDS:
        value = document.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise ValueError(f"{key} must be a list of non-empty strings")
        lists[key] = value
    return VaultGrant(
        vault_urls=frozenset(_vault_url(url) for url in lists["vaultUrls"]),
        certificate_paths=frozenset(lists["certificatePaths"]),
        secret_prefixes=tuple(lists["secretPrefixes"]),
        github_hosts=frozenset(host.strip().lower() for host in lists["githubHosts"]),
        proxy_hosts=frozenset(host.strip().lower() for host in lists["proxyHosts"]),
    )


def _vault_url(url: str) -> str:
    """A vault URL as compared: scheme and host lower-cased, no trailing slash (``https://v.vault.azure.net``)."""
    parts = urlsplit(url.strip())
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


def _host_matches(allowed: frozenset[str], github_url: str) -> bool:
    """Whether the config URL's host is allowed: ``host`` entries match the scheme's default port only,
    ``host:port`` entries that port only (a server on another port of an allowed host is another server)."""
    try:
        parts = urlsplit(github_url.strip())
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        return False
    host = (parts.hostname or "").lower()
    if not host:
        return False
    default = _DEFAULT_PORTS.get(parts.scheme.lower())
    return f"{host}:{port}" in allowed or (port == default and host in allowed)


def _proxy_url(url: str) -> str:
    """A proxy URL as it is used (:func:`arc_scaleset.controllers.proxy_secret.with_user_info`): without a scheme,
    an http proxy."""
    url = url.strip()
    return url if "://" in url else f"http://{url}"


def _host_port(url: str) -> str:
    """``host:port`` of ``url`` for a message: never its user information, which may hold a password."""
    try:
        parts = urlsplit(url)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        return "an unreadable URL"
    return f"{(parts.hostname or '').lower()}:{port}"


def vault_refusal(allow_list: AllowList, read: VaultRead) -> str | None:
    """``None`` when ``read`` is allowed; otherwise why not, naming the namespace, the field that is not allowed
    and where a cluster admin allows it (never a secret value: none has been read)."""
    where = f"{ALLOW_LIST_FLAG} ConfigMap {allow_list.source}"
    ns = read.namespace
    if allow_list.unusable:
        return (
            f"namespace {ns!r} may not use vaultConfig: {where} {allow_list.unusable}, so no namespace may use a"
            " vault (a cluster admin makes it readable, with an entry for this namespace)"
        )
    if ns in allow_list.broken:
        return f"namespace {ns!r} may not use vaultConfig: its entry in {where} cannot be read: {allow_list.broken[ns]}"
    grant = allow_list.grants.get(ns)
    if grant is None:
        return f"namespace {ns!r} may not use vaultConfig: {where} has no entry for it (a cluster admin adds one)"
    fix = f"a cluster admin allows it in the entry {ns!r} of {where}"
    if _vault_url(read.vault_url) not in grant.vault_urls:
        return f"namespace {ns!r} may not use vaultConfig.azureKeyVault.url {read.vault_url!r} (vaultUrls): {fix}"
    if read.certificate_path not in grant.certificate_paths:
        return (
            f"namespace {ns!r} may not use vaultConfig.azureKeyVault.certificatePath {read.certificate_path!r}"
            f" (certificatePaths): {fix}"
        )
    if not any(read.secret_name.startswith(prefix) for prefix in grant.secret_prefixes):
        return (
            f"namespace {ns!r} may not read vault secret {read.secret_name!r} ({read.purpose}; secretPrefixes): {fix}"
        )
    if not _host_matches(grant.github_hosts, read.github_url):
        return (
            f"namespace {ns!r} may not send credentials read from a vault to githubConfigUrl {read.github_url!r}"
            f" (its host is not in githubHosts): {fix}"
        )
    # The proxy's credentials go to the proxy, not to GitHub: a proxy the team chose would read them.
    if read.proxy_url and not _host_matches(grant.proxy_hosts, _proxy_url(read.proxy_url)):
        return (
            f"namespace {ns!r} may not send the credentials of vault secret {read.secret_name!r} ({read.purpose})"
            f" to proxy {_host_port(_proxy_url(read.proxy_url))!r} (its host is not in proxyHosts): {fix}"
        )
    return None


class VaultAllowListSource:
    """The allow list as ConfigMap ``namespace/name`` says now: read with a GET (the controller caches no
    ConfigMaps), reused for ``ttl`` seconds so a burst of runner creations costs one read. A missing ConfigMap,
    or one the controller may not read, allows nothing; other API errors propagate (the reconcile is retried)."""

    def __init__(self, kube: KubeClient, *, namespace: str, name: str, ttl: float) -> None:
        self._kube = kube
        self._namespace = namespace
        self._name = name
        self._ttl = ttl
        self._read: tuple[float, AllowList] | None = None

    async def current(self) -> AllowList:
        now = time.monotonic()
        if self._read is not None and now - self._read[0] < self._ttl:
            return self._read[1]
        source = f"{self._namespace}/{self._name}"
        try:
            config_map = await self._kube.get(CONFIG_MAPS, self._name, namespace=self._namespace)
        except NotFound:
            allow_list = AllowList(source=source, unusable="does not exist")
        except Forbidden:
            allow_list = AllowList(
                source=source, unusable="cannot be read by the controller (grant it get on configmaps there)"
            )
        else:
            allow_list = parse_allow_list(config_map.get("data") or {}, source=source)
        self._read = (now, allow_list)
        return allow_list

    async def check(self, read: VaultRead) -> None:
        """:class:`VaultNotAllowed` unless the allow list allows ``read``."""
        refusal = vault_refusal(await self.current(), read)
        if refusal is not None:
            raise VaultNotAllowed(refusal)
