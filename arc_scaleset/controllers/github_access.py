"""How the reconcilers reach GitHub: credentials, CA and proxy resolved from the cluster, clients pooled.

:class:`GitHubAccess` turns the fields every scale-set object carries (``githubConfigUrl``,
``githubConfigSecret``, ``proxy``, ``githubServerTLS``, ``vaultConfig``) into a pooled
:class:`~arc_scaleset.github.ActionsClient`. Credentials are resolved on every call from the Secret's data
for the version the referenced-object watch shows (fetched once per change,
:mod:`arc_scaleset.controllers.referenced_data`; from the API server on every call while nothing watches it),
so a rotated Secret takes effect on the first reconcile after the watch saw it: the pool keys clients by a
fingerprint of the credentials, so new credentials give a new client.

With ``vaultConfig`` (type ``azure_key_vault``), ``githubConfigSecret`` names a secret in Azure Key Vault
whose value is a JSON object with the Secret's keys, and the GitHub proxy's ``credentialSecretRef`` names a
vault secret holding ``{"username", "password"}`` (as ARC reads them); the vault's own proxy
(``vaultConfig.proxy``) takes its credentials from Kubernetes Secrets. Vault reads go through
:class:`~arc_scaleset.github.keyvault.KeyVaultSecrets` (one client per namespace and vault, values reused for 30
seconds), so a rotation in the vault reaches new resolutions within that time. Every vault read is first checked
against the cluster admin's allow list, when there is one (:mod:`arc_scaleset.controllers.vault_policy`): the
asking namespace must be allowed the vault, the certificate and the secret, and the ``githubConfigUrl`` host the
result will be sent to.

Input a user must fix raises a :class:`~arc_scaleset.controllers.errors.ConfigurationError` subclass with a
CamelCase ``reason`` and a message that never contains a secret value; API failures (transient) propagate
unchanged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import TypeVar

from arc_scaleset.api.common import AZURE_KEY_VAULT, ProxyConfig, ProxyServerConfig, TLSConfig, VaultConfig
from arc_scaleset.api.credentials import (
    PRIVATE_KEY_KEY,
    TOKEN_KEY,
    AppConfig,
    CredentialsError,
    app_config_from_json,
    app_config_from_secret_data,
)
from arc_scaleset.controllers.errors import (
    InvalidGitHubConfigURL,
    InvalidSecret,
    InvalidVaultConfig,
    TLSConfigError,
    VaultSecretNotFound,
    VaultUnavailable,
)
from arc_scaleset.controllers.proxy_secret import (
    HTTP_PROXY_KEY,
    HTTPS_PROXY_KEY,
    NO_PROXY_KEY,
    PASSWORD_KEY,
    USERNAME_KEY,
    proxy_secret_data,
    with_user_info,
)
from arc_scaleset.controllers.referenced_data import ReferencedData, VersionSource
from arc_scaleset.controllers.secrets import read_config_map_value, read_secret_data
from arc_scaleset.controllers.vault_policy import VaultAllowListSource, VaultRead
from arc_scaleset.github import (
    ActionsClient,
    ActionsClientPool,
    GitHubConfig,
    InvalidConfigURL,
    InvalidCredentials,
    ProxySettings,
    credentials_from_fields,
    fingerprint_of_fields,
    parse_config_url,
)
from arc_scaleset.github.keyvault import (
    InvalidKeyVaultConfig,
    KeyVaultError,
    KeyVaultSecretNotFound,
    KeyVaultSecrets,
    KeyVaultSettings,
)
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.observability.logging import register_secret

_T = TypeVar("_T")


class GitHubAccess:
    """Resolves GitHub settings from the cluster and hands out pooled Actions-service clients.

    ``environ`` is consulted for ``GITHUB_ACTIONS_FORCE_GHES`` when parsing config URLs (and by the vault
    client, for ``AZURE_AUTHORITY_HOST``). ``vault_secrets`` reads Azure Key Vault (a private one by default);
    ``vault_allow_list`` is what a cluster admin allows each namespace to read there and where it may be sent
    (``None``: everything, as ARC; :mod:`arc_scaleset.controllers.vault_policy`). ``versions`` (the
    referenced-object watch) lets the credentials Secret, CA ConfigMap and proxy Secrets be fetched once per
    change rather than on every call (:mod:`arc_scaleset.controllers.referenced_data`).
    """

    def __init__(
        self,
        kube: KubeClient,
        *,
        pool: ActionsClientPool,
        environ: Mapping[str, str] = os.environ,
        vault_secrets: KeyVaultSecrets | None = None,
        vault_allow_list: VaultAllowListSource | None = None,
        versions: VersionSource | None = None,
    ) -> None:
        self.reads = ReferencedData(kube, versions)
        self.pool = pool
        self._environ = environ
        self.vault_secrets = vault_secrets if vault_secrets is not None else KeyVaultSecrets(environ=environ)
        self.vault_allow_list = vault_allow_list

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
        app_config = await self.app_config(
            namespace=namespace, secret_name=secret_name, vault=vault, config_url=config_url
        )
        # The pool is asked by fingerprint and builds the credentials only for a new client: building a GitHub
        # App parses its RSA key, milliseconds of CPU that every runner deletion paid (docs/github.md).
        fingerprint = self._checked(lambda: fingerprint_of_fields(app_config), namespace, secret_name)
        root_ca = await self.root_ca_pem(namespace=namespace, tls=tls)
        proxy_settings = await self.proxy_settings(namespace=namespace, proxy=proxy, vault=vault, config_url=config_url)
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
                source=repr((secret_name, proxy, tls, vault)),
            )
        except ValueError as exc:  # the client refuses a CA bundle it cannot load
            raise TLSConfigError(f"githubServerTLS: the CA certificates cannot be used: {exc}") from None

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

    async def app_config(
        self, *, namespace: str, secret_name: str, config_url: str, vault: VaultConfig | None = None
    ) -> AppConfig:
        """The credential fields Secret ``namespace/secret_name`` gives under the one credential rule
        (``api/credentials.py``, ARC's): what the listener's ``config.json`` carries and the client uses.

        With a vault, ``secret_name`` names the vault secret (its value: JSON with the same keys), read only when
        the allow list lets ``namespace`` read it and send it to ``config_url`` (:class:`VaultNotAllowed`).
        """
        if vault is not None and vault.type:
            return await self._vault_app_config(
                namespace=namespace, secret_name=secret_name, vault=vault, config_url=config_url
            )
        data = await read_secret_data(self.reads, namespace, secret_name, purpose="githubConfigSecret")
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

    async def _vault_app_config(
        self, *, namespace: str, secret_name: str, vault: VaultConfig, config_url: str
    ) -> AppConfig:
        where = f"vault secret {secret_name!r} (githubConfigSecret, in {_vault_name(vault)})"
        text = await self.vault_secret(
            namespace=namespace, vault=vault, name=secret_name, purpose="githubConfigSecret", config_url=config_url
        )
        try:
            app_config = app_config_from_json(text)
        except CredentialsError as exc:
            raise InvalidSecret(f"{where} cannot be used: {exc}") from None
        for value in app_config.secrets():
            register_secret(value)
        return app_config

    async def vault_secret(
        self, *, namespace: str, vault: VaultConfig, name: str, purpose: str, config_url: str, proxy_url: str = ""
    ) -> str:
        """The value of vault secret ``name`` (read for ``purpose`` by an object in ``namespace``, to be sent to
        ``config_url``'s host, and for a proxy's credentials to the proxy ``proxy_url``), through the shared
        short-lived cache, whose keys hold the namespace.

        Checked against the allow list first: :class:`VaultNotAllowed` before anything is read (not even the
        certificate file). :class:`InvalidVaultConfig`, :class:`VaultSecretNotFound` or :class:`VaultUnavailable`,
        whose messages name the vault and the secret, never a value.
        """
        settings = vault_settings(vault)
        if self.vault_allow_list is not None:
            await self.vault_allow_list.check(
                VaultRead(
                    namespace=namespace,
                    vault_url=settings.url,
                    certificate_path=settings.certificate_path,
                    secret_name=name,
                    purpose=purpose,
                    github_url=config_url,
                    proxy_url=proxy_url,
                )
            )
        vault_proxy = await self._vault_proxy(namespace, vault)
        try:
            value = await self.vault_secrets.get_secret(settings, name, namespace=namespace, proxy=vault_proxy)
        except InvalidKeyVaultConfig as exc:
            raise InvalidVaultConfig(exc.message) from None
        except KeyVaultSecretNotFound as exc:
            raise VaultSecretNotFound(f"{exc.message} (named by {purpose})") from None
        except KeyVaultError as exc:
            raise VaultUnavailable(exc.message) from None
        register_secret(value.strip())
        return value

    async def _vault_proxy(self, namespace: str, vault: VaultConfig) -> ProxySettings | None:
        """``vaultConfig.proxy`` resolved (credentials from Kubernetes Secrets in ``namespace``, as ARC)."""
        if vault.proxy is None:
            return None
        data = await proxy_secret_data(self.reads, namespace, vault.proxy)
        if not data[HTTP_PROXY_KEY] and not data[HTTPS_PROXY_KEY] and not data[NO_PROXY_KEY]:
            raise InvalidVaultConfig("vaultConfig.proxy is empty: set http, https or noProxy, or remove it")
        return ProxySettings(
            http_proxy=data[HTTP_PROXY_KEY], https_proxy=data[HTTPS_PROXY_KEY], no_proxy=data[NO_PROXY_KEY]
        )

    async def root_ca_pem(self, *, namespace: str, tls: TLSConfig | None) -> str | None:
        """The PEM bundle ``githubServerTLS`` points at (ConfigMap in ``namespace``), or ``None`` when unset."""
        if tls is None:
            return None
        source = tls.certificate_from.config_map_key_ref if tls.certificate_from is not None else None
        if source is None:
            raise TLSConfigError(
                "githubServerTLS is set but names no certificate: set certificateFrom.configMapKeyRef {name, key}"
            )
        value = await read_config_map_value(self.reads, namespace, source.name, source.key)
        if value is None:
            raise TLSConfigError(
                f"githubServerTLS: ConfigMap {namespace}/{source.name} does not exist or has no key {source.key!r}"
            )
        # Imported here: cryptography is several MB resident, and only a scale set with githubServerTLS needs it.
        from cryptography import x509

        try:
            certificates = x509.load_pem_x509_certificates(value.encode("utf-8"))
        except ValueError:
            certificates = []
        if not certificates:
            raise TLSConfigError(
                f"githubServerTLS: key {source.key!r} of ConfigMap {namespace}/{source.name} holds no PEM certificate"
            )
        return value

    async def proxy_settings(
        self, *, namespace: str, proxy: ProxyConfig | None, config_url: str, vault: VaultConfig | None = None
    ) -> ProxySettings | None:
        """The controller's own proxy for GitHub calls to ``config_url``, credentials included; ``None`` without a
        proxy.

        With a vault, each ``credentialSecretRef`` names a vault secret holding ``{"username", "password"}``
        (ARC reads the controller's proxy credentials from the vault; the listener's and the runners' proxy
        Secrets are still made from Kubernetes Secrets, as in ARC), under the same allow list as the GitHub
        credentials: the proxy carries the calls to ``config_url``, so its host must be allowed too, and the
        credentials go to the proxy itself, so the proxy's host must be one the allow list names (``proxyHosts``).
        """
        if proxy is None:
            return None
        if vault is not None and vault.type:
            data = {
                HTTP_PROXY_KEY: await self._vault_proxy_url(namespace, vault, proxy.http, "proxy.http", config_url),
                HTTPS_PROXY_KEY: await self._vault_proxy_url(namespace, vault, proxy.https, "proxy.https", config_url),
                NO_PROXY_KEY: ",".join(proxy.no_proxy or []),
            }
        else:
            data = await proxy_secret_data(self.reads, namespace, proxy)
        if not data[HTTP_PROXY_KEY] and not data[HTTPS_PROXY_KEY]:
            return None
        return ProxySettings(
            http_proxy=data[HTTP_PROXY_KEY], https_proxy=data[HTTPS_PROXY_KEY], no_proxy=data[NO_PROXY_KEY]
        )

    async def _vault_proxy_url(
        self, namespace: str, vault: VaultConfig, server: ProxyServerConfig | None, field: str, config_url: str
    ) -> str:
        if server is None or not server.url:
            return ""
        if not server.credential_secret_ref:
            return server.url
        purpose = f"{field}.credentialSecretRef"
        # Sent to the proxy as Proxy-Authorization: the allow list must allow that proxy too (vault_policy.py).
        text = await self.vault_secret(
            namespace=namespace,
            vault=vault,
            name=server.credential_secret_ref,
            purpose=purpose,
            config_url=config_url,
            proxy_url=server.url,
        )
        try:
            document = json.loads(text)
        except ValueError:
            document = None
        if not isinstance(document, dict) or not isinstance(document.get(USERNAME_KEY, ""), str):
            raise InvalidSecret(
                f"vault secret {server.credential_secret_ref!r} ({purpose}, in {_vault_name(vault)}) must be a JSON"
                f" object with {USERNAME_KEY!r} and {PASSWORD_KEY!r}"
            )
        password = document.get(PASSWORD_KEY) or ""
        register_secret(str(password))
        return with_user_info(server.url, document.get(USERNAME_KEY) or "", str(password))


def vault_settings(vault: VaultConfig) -> KeyVaultSettings:
    """The Azure Key Vault settings of ``vault`` (a set ``type``); :class:`InvalidVaultConfig` when there are none
    or the type is not one this controller knows."""
    if vault.type != AZURE_KEY_VAULT:
        raise InvalidVaultConfig(
            f"vaultConfig.type {vault.type!r} is unknown: the only vault type is {AZURE_KEY_VAULT!r}"
        )
    azure = vault.azure_key_vault
    if azure is None:
        raise InvalidVaultConfig(
            "vaultConfig.type is azure_key_vault but vaultConfig.azureKeyVault is not set (url, tenantId, clientId,"
            " certificatePath)"
        )
    return KeyVaultSettings(
        url=azure.url, tenant_id=azure.tenant_id, client_id=azure.client_id, certificate_path=azure.certificate_path
    )


def _vault_name(vault: VaultConfig) -> str:
    azure = vault.azure_key_vault
    return f"Azure Key Vault {azure.url}" if azure is not None else "the vault"
