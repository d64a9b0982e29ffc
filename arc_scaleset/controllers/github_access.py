"""How the reconcilers reach GitHub: credentials, CA and proxy resolved from the cluster, clients pooled.

:class:`GitHubAccess` turns the fields every scale-set object carries (``githubConfigUrl``,
``githubConfigSecret``, ``proxy``, ``githubServerTLS``, ``vaultConfig``) into a pooled
:class:`~arc_scaleset.github.ActionsClient`. Credentials are resolved on every call from the Secret as the
API server has it now (uncached), so a rotated Secret takes effect on the next reconcile: the pool keys
clients by a fingerprint of the credentials, so new credentials give a new client.

Input a user must fix raises a :class:`~arc_scaleset.controllers.errors.ConfigurationError` subclass with a
CamelCase ``reason`` and a message that never contains a secret value; API failures (transient) propagate
unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TypeVar

from cryptography import x509

from arc_scaleset.api.common import AZURE_KEY_VAULT, ProxyConfig, TLSConfig, VaultConfig
from arc_scaleset.api.credentials import (
    PRIVATE_KEY_KEY,
    TOKEN_KEY,
    AppConfig,
    CredentialsError,
    app_config_from_secret_data,
)
from arc_scaleset.controllers.errors import InvalidGitHubConfigURL, InvalidSecret, TLSConfigError, VaultNotSupported
from arc_scaleset.controllers.proxy_secret import HTTP_PROXY_KEY, HTTPS_PROXY_KEY, NO_PROXY_KEY, proxy_secret_data
from arc_scaleset.controllers.secrets import read_config_map_value, read_secret_data
from arc_scaleset.github import (
    ActionsClient,
    ActionsClientPool,
    Credentials,
    GitHubConfig,
    InvalidConfigURL,
    InvalidCredentials,
    ProxySettings,
    credentials_from_fields,
    fingerprint_of_fields,
    parse_config_url,
)
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.observability.logging import register_secret

_T = TypeVar("_T")


class GitHubAccess:
    """Resolves GitHub settings from the cluster and hands out pooled Actions-service clients.

    ``environ`` is consulted for ``GITHUB_ACTIONS_FORCE_GHES`` when parsing config URLs.
    """

    def __init__(self, kube: KubeClient, *, pool: ActionsClientPool, environ: Mapping[str, str] = os.environ) -> None:
        self._kube = kube
        self.pool = pool
        self._environ = environ

    def parse_url(self, config_url: str) -> GitHubConfig:
        """The parsed config URL; :class:`InvalidGitHubConfigURL` with the parser's explanation."""
        try:
            return parse_config_url(config_url, environ=self._environ)
        except InvalidConfigURL as exc:
            raise InvalidGitHubConfigURL(
                f"githubConfigUrl {config_url!r} cannot be used: {exc.problem}; expected e.g."
                " https://github.com/my-org, https://github.com/my-org/my-repo or https://github.com/enterprises/e"
            ) from None

    async def client_for(
        self,
        *,
        namespace: str,
        config_url: str,
        secret_name: str,
        proxy: ProxyConfig | None = None,
        tls: TLSConfig | None = None,
        vault: VaultConfig | None = None,
    ) -> ActionsClient:
        """The pooled client for an object in ``namespace`` with these GitHub fields.

        Raises a :class:`ConfigurationError` subclass for input a user must fix; Kubernetes API errors
        propagate.
        """
        config = self.parse_url(config_url)
        app_config = await self.app_config(namespace=namespace, secret_name=secret_name, vault=vault)
        # The pool is asked by fingerprint and builds the credentials only for a new client: building a GitHub
        # App parses its RSA key, milliseconds of CPU that every runner deletion paid (docs/github.md).
        fingerprint = self._checked(lambda: fingerprint_of_fields(app_config), namespace, secret_name)
        root_ca = await self.root_ca_pem(namespace=namespace, tls=tls)
        proxy_settings = await self.proxy_settings(namespace=namespace, proxy=proxy)
        try:
            return await self.pool.get(
                config,
                namespace=namespace,
                credentials=lambda: self._checked(lambda: credentials_from_fields(app_config), namespace, secret_name),
                fingerprint=fingerprint,
                root_ca_pem=root_ca,
                proxy=proxy_settings,
                # Named by reference: a rotated Secret (CA, proxy) gives this source a new key, and the pool
                # evicts the client that held the old credentials.
                source=repr((secret_name, proxy, tls)),
            )
        except ValueError as exc:  # the client refuses a CA bundle it cannot load
            raise TLSConfigError(f"githubServerTLS: the CA certificates cannot be used: {exc}") from None

    async def credentials(self, *, namespace: str, secret_name: str, vault: VaultConfig | None = None) -> Credentials:
        """The credentials in Secret ``namespace/secret_name`` (ARC's keys and rule, docs/github.md)."""
        app_config = await self.app_config(namespace=namespace, secret_name=secret_name, vault=vault)
        return self._checked(lambda: credentials_from_fields(app_config), namespace, secret_name)

    @staticmethod
    def _checked(build: Callable[[], _T], namespace: str, secret_name: str) -> _T:
        """``build()``, its :class:`InvalidCredentials` (a malformed App: installation ID, private key) reported
        as :class:`InvalidSecret` on the Secret."""
        try:
            return build()
        except InvalidCredentials as exc:
            raise InvalidSecret(
                f"Secret {namespace}/{secret_name} (githubConfigSecret) cannot be used: {exc}"
            ) from None

    async def app_config(self, *, namespace: str, secret_name: str, vault: VaultConfig | None = None) -> AppConfig:
        """The credential fields Secret ``namespace/secret_name`` gives under the one credential rule
        (``api/credentials.py``, ARC's): what the listener's ``config.json`` carries and the client uses."""
        _refuse_vault(vault)
        data = await read_secret_data(self._kube, namespace, secret_name, purpose="githubConfigSecret")
        # Nothing logs credentials on purpose; redaction catches an accident, also for a Secret the rule
        # refuses. A handful of values per scale set, so the registry stays small (JIT configs, one per
        # runner, are not registered).
        for key in (TOKEN_KEY, PRIVATE_KEY_KEY):
            register_secret(data.get(key, "").strip())
        try:
            return app_config_from_secret_data(data)
        except CredentialsError as exc:
            # The rule's messages are ARC's and name keys, never values.
            raise InvalidSecret(
                f"Secret {namespace}/{secret_name} (githubConfigSecret) cannot be used: {exc}"
            ) from None

    async def root_ca_pem(self, *, namespace: str, tls: TLSConfig | None) -> str | None:
        """The PEM bundle ``githubServerTLS`` points at (ConfigMap in ``namespace``), or ``None`` when unset."""
        if tls is None:
            return None
        source = tls.certificate_from.config_map_key_ref if tls.certificate_from is not None else None
        if source is None:
            raise TLSConfigError(
                "githubServerTLS is set but names no certificate: set certificateFrom.configMapKeyRef {name, key}"
            )
        value = await read_config_map_value(self._kube, namespace, source.name, source.key)
        if value is None:
            raise TLSConfigError(
                f"githubServerTLS: ConfigMap {namespace}/{source.name} does not exist or has no key {source.key!r}"
            )
        try:
            certificates = x509.load_pem_x509_certificates(value.encode("utf-8"))
        except ValueError:
            certificates = []
        if not certificates:
            raise TLSConfigError(
                f"githubServerTLS: key {source.key!r} of ConfigMap {namespace}/{source.name} holds no PEM certificate"
            )
        return value

    async def proxy_settings(self, *, namespace: str, proxy: ProxyConfig | None) -> ProxySettings | None:
        """The controller's own proxy for GitHub calls, credentials included; ``None`` without a proxy."""
        if proxy is None:
            return None
        data = await proxy_secret_data(self._kube, namespace, proxy)
        if not data[HTTP_PROXY_KEY] and not data[HTTPS_PROXY_KEY]:
            return None
        return ProxySettings(
            http_proxy=data[HTTP_PROXY_KEY], https_proxy=data[HTTPS_PROXY_KEY], no_proxy=data[NO_PROXY_KEY]
        )


def _refuse_vault(vault: VaultConfig | None) -> None:
    if vault is None or not vault.type:
        return
    if vault.type != AZURE_KEY_VAULT:
        raise VaultNotSupported(
            f"vaultConfig.type {vault.type!r} is unknown: the only vault type is {AZURE_KEY_VAULT!r}"
        )
    raise VaultNotSupported(
        "vaultConfig: Azure Key Vault is not supported by this controller; store the GitHub credentials in a"
        " Kubernetes Secret and name it in githubConfigSecret (remove vaultConfig)"
    )
