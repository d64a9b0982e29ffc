"""Azure Key Vault: reading one secret's value with a client certificate (``vaultConfig``, docs/github.md).

ARC (0.12 and later) can keep a scale set's GitHub credentials in Azure Key Vault instead of a Kubernetes
Secret. This module is the vault client the controller and the listener share:

- :func:`validate_settings` checks a ``vaultConfig.azureKeyVault`` as ARC does (tenant and client IDs set, a
  URL that parses, a certificate path that exists) and raises :class:`InvalidKeyVaultConfig`;
- :class:`KeyVaultClient` authenticates with the certificate (a PEM file holding the client certificate and
  its private key) through azure-identity's ``CertificateCredential`` and reads the latest version of a
  secret through azure-keyvault-secrets' ``SecretClient``, over azure-core's aiohttp transport;
- :class:`KeyVaultSecrets` keeps one client per namespace, vault settings and proxy, and each fetched value
  for a short time (:data:`SECRET_TTL_SECONDS`).

The Azure SDK is imported only when a client is built: most installations have no vault, and the controller
and listener should not pay the SDK's import time and memory for it.

The identity endpoint is the SDK's: ``login.microsoftonline.com`` unless ``AZURE_AUTHORITY_HOST`` names
another (sovereign clouds, or the lab's simulated one). The async credential posts its assertion straight to
``{authority}/{tenant}/oauth2/v2.0/token``: no MSAL, so no instance or OIDC discovery that would call the public
cloud from a sovereign one, and nothing to turn off for it. TLS is verified against the system trust store, as ARC
does (Python's default context honours ``SSL_CERT_FILE``). Error messages name the vault, the secret and what
went wrong, never a secret value nor a token.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from arc_scaleset.github.proxy import ProxySettings

if TYPE_CHECKING:  # the SDK is imported lazily (see the module docstring)
    from azure.keyvault.secrets.aio import SecretClient

__all__ = [
    "SECRET_TTL_SECONDS",
    "VERIFY_CHALLENGE_RESOURCE_ENV",
    "InvalidKeyVaultConfig",
    "KeyVaultClient",
    "KeyVaultError",
    "KeyVaultSecretNotFound",
    "KeyVaultSecrets",
    "KeyVaultSettings",
    "KeyVaultUnavailable",
    "validate_settings",
]

SECRET_TTL_SECONDS: Final = 30.0
"""How long a fetched secret value is reused. A scale-up of 200 runners resolves the credentials 200 times
within seconds; without this each would be a vault call (and Key Vault throttles per vault). A rotation in the
vault reaches new resolutions after at most this long."""

VERIFY_CHALLENGE_RESOURCE_ENV: Final = "ARC_SCALESET_KEY_VAULT_VERIFY_CHALLENGE_RESOURCE"
"""Set to ``false`` to turn off the SDK's check that the vault's authentication challenge names a resource
whose domain holds the vault URL's host. Only for a vault served under a name that is not a subdomain of its
resource (the lab's simulated vault on a loopback address: there is no DNS to give it one); leave it unset
against Azure."""

CONNECT_TIMEOUT_SECONDS: Final = 10.0
READ_TIMEOUT_SECONDS: Final = 30.0
READ_DEADLINE_SECONDS: Final = 60.0
"""The longest a secret read may take, the SDK's retries and the identity endpoint's token included. The SDK's
own bound is a week: it retries a throttled (429) or failing read up to 10 times, each after the
``Retry-After`` the vault names, and its timeouts are per socket operation, so a trickling answer never ends."""


class KeyVaultError(Exception):
    """The vault could not give the secret. ``message`` names the vault and the secret, never a value."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidKeyVaultConfig(KeyVaultError):  # noqa: N818 - reads as the condition it reports
    """The vault settings cannot be used (a missing field, a URL that does not parse, no certificate file)."""


class KeyVaultSecretNotFound(KeyVaultError):  # noqa: N818
    """The vault has no (enabled) secret of that name."""


class KeyVaultUnavailable(KeyVaultError):  # noqa: N818
    """The vault or the identity endpoint could not be reached, or refused the client (wrong certificate,
    no access to the vault)."""


@dataclass(frozen=True, slots=True)
class KeyVaultSettings:
    """One vault and the service principal that reads it (``vaultConfig.azureKeyVault``, ARC's four fields)."""

    url: str
    tenant_id: str
    client_id: str
    certificate_path: str


def validate_settings(settings: KeyVaultSettings) -> None:
    """ARC's checks, every problem at once: :class:`InvalidKeyVaultConfig` when one fails."""
    problems = []
    if not settings.tenant_id:
        problems.append("tenantId is not set")
    if not settings.client_id:
        problems.append("clientId is not set")
    parts = urlsplit(settings.url)
    if parts.scheme != "https" or not parts.hostname:
        problems.append(f"url {settings.url!r} is not an https URL (e.g. https://my-vault.vault.azure.net/)")
    if not settings.certificate_path:
        problems.append("certificatePath is not set")
    elif not os.path.isfile(settings.certificate_path):
        problems.append(
            f"certificatePath {settings.certificate_path!r} is not a file in this container (mount the PEM"
            " holding the client certificate and its private key there)"
        )
    if problems:
        raise InvalidKeyVaultConfig("vaultConfig.azureKeyVault: " + "; ".join(problems))


def _verify_challenge_resource(environ: Mapping[str, str]) -> bool:
    return environ.get(VERIFY_CHALLENGE_RESOURCE_ENV, "").strip().lower() not in ("false", "0", "no")


class KeyVaultClient:
    """A client of one vault, authenticated by a client certificate; use ``async with`` or :meth:`close`.

    ``proxy`` (``vaultConfig.proxy``, resolved) carries the vault's and the identity endpoint's traffic and
    nothing else; without it the process's proxy environment applies, as in ARC. Building the client reads
    the certificate file; :class:`InvalidKeyVaultConfig` when it is not a PEM with a certificate and an RSA key.
    """

    def __init__(
        self,
        settings: KeyVaultSettings,
        *,
        proxy: ProxySettings | None = None,
        environ: Mapping[str, str] = os.environ,
        deadline: float = READ_DEADLINE_SECONDS,
    ) -> None:
        validate_settings(settings)
        self.settings = settings
        self.deadline = deadline
        self._vault = urlsplit(settings.url).hostname or settings.url
        self._client: SecretClient
        self._client, self._credential = _build_client(settings, proxy=proxy, environ=environ)

    async def get_secret(self, name: str) -> str:
        """The value of the latest version of secret ``name``.

        :class:`KeyVaultSecretNotFound` when there is none, :class:`KeyVaultUnavailable` when the vault or
        the identity endpoint cannot be reached or refuses the client, or the read takes longer than
        ``deadline`` seconds (:data:`READ_DEADLINE_SECONDS`).
        """
        from azure.core.exceptions import AzureError, ClientAuthenticationError, ResourceNotFoundError

        where = f"Azure Key Vault {self._vault}"
        try:
            async with asyncio.timeout(self.deadline):
                secret = await self._client.get_secret(name)
        except TimeoutError:
            raise KeyVaultUnavailable(
                f"{where}: reading secret {name!r} failed: the vault did not answer within {self.deadline:g} s"
                " (throttled, or not answering)"
            ) from None
        except ResourceNotFoundError:
            raise KeyVaultSecretNotFound(f"{where} has no secret named {name!r}") from None
        except ClientAuthenticationError as exc:
            # The identity endpoint's or the vault's refusal; its text is Azure's error description (codes,
            # trace IDs), never the assertion or a token.
            raise KeyVaultUnavailable(
                f"{where}: client {self.settings.client_id!r} of tenant {self.settings.tenant_id!r} could not"
                f" authenticate with certificate {self.settings.certificate_path!r}: {_first_line(exc)}"
            ) from None
        except AzureError as exc:
            raise KeyVaultUnavailable(f"{where}: reading secret {name!r} failed: {_first_line(exc)}") from None
        except ValueError as exc:
            # The SDK's own refusals (a challenge for another domain, a non-https vault URL).
            raise KeyVaultUnavailable(f"{where}: reading secret {name!r} failed: {_first_line(exc)}") from None
        if secret.value is None:
            raise KeyVaultSecretNotFound(f"{where}: secret {name!r} has no value")
        return secret.value

    async def close(self) -> None:
        await self._client.close()
        await self._credential.close()

    async def __aenter__(self) -> KeyVaultClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:500]


def _build_client(
    settings: KeyVaultSettings, *, proxy: ProxySettings | None, environ: Mapping[str, str]
) -> tuple[Any, Any]:
    """The SDK's secrets client and the credential it authenticates with (both closed by their owner)."""
    from azure.core.pipeline.transport import AioHttpTransport
    from azure.identity.aio import CertificateCredential
    from azure.keyvault.secrets.aio import SecretClient

    class ProxiedTransport(AioHttpTransport):  # type: ignore[misc]  # the SDK's types are not checked
        """aiohttp transport sending each request through ``proxy`` as :class:`ProxySettings` chooses it
        (scheme, ``no_proxy``), with the proxy's credentials as a ``Proxy-Authorization`` header."""

        async def send(self, request: Any, **config: Any) -> Any:
            assert proxy is not None
            choice = proxy.proxy_for(request.url)
            if choice is not None:
                config["proxy"] = choice.url
                config["proxy_headers"] = choice.headers
            return await super().send(request, **config)

    def transport() -> Any:
        # Bounded waits: a reconcile blocked on a silent vault holds a worker (the SDK's default is 5 minutes).
        timeouts = {"connection_timeout": CONNECT_TIMEOUT_SECONDS, "read_timeout": READ_TIMEOUT_SECONDS}
        return ProxiedTransport(**timeouts) if proxy is not None else AioHttpTransport(**timeouts)

    # The SDK logs every request's and response's headers at INFO, and its token cache (MSAL's) each token
    # response (redacted) at DEBUG: multi-line records per vault call that say nothing a user needs. Their
    # warnings still come through; what was read, or why not, is this module's exception.
    for name in ("azure", "msal"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        with open(settings.certificate_path, "rb") as file:
            certificate = file.read()
    except OSError as exc:
        raise InvalidKeyVaultConfig(
            f"vaultConfig.azureKeyVault: certificatePath {settings.certificate_path!r} cannot be read: {exc.strerror}"
        ) from None
    try:
        credential = CertificateCredential(
            settings.tenant_id,
            settings.client_id,
            certificate_data=certificate,
            transport=transport(),
        )
    except ValueError:
        # The SDK's message may quote parts of the file; ours names only the path.
        raise InvalidKeyVaultConfig(
            f"vaultConfig.azureKeyVault: certificatePath {settings.certificate_path!r} is not a PEM (or PKCS12)"
            " file holding the client certificate and its private key"
        ) from None
    client = SecretClient(
        settings.url,
        credential,
        transport=transport(),
        verify_challenge_resource=_verify_challenge_resource(environ),
    )
    return client, credential


def _proxy_key(proxy: ProxySettings | None) -> tuple[str, str, str] | None:
    return None if proxy is None else (proxy.http_proxy, proxy.https_proxy, proxy.no_proxy)


_ClientKey = tuple[str, KeyVaultSettings, tuple[str, str, str] | None]
"""(namespace, settings, proxy) of a vault client."""


@dataclass
class _Cached:
    value: str
    fetched_at: float


@dataclass
class KeyVaultSecrets:
    """Vault clients and recently fetched secret values, shared by every reconciler of a controller.

    One :class:`KeyVaultClient` per (namespace, settings, proxy): a client holds an access token (an hour long)
    and a connection pool, so building one per reconcile would authenticate again every time. The namespace of
    the object that asks is part of every key, of clients and of values: what one namespace read is never
    handed to another without that namespace's own read (and its own allow-list check, docs/github.md). A
    client is built again when its certificate file changes (a renewed certificate mounted from a Secret). A
    value is reused for ``ttl`` seconds and concurrent reads of the same secret share one vault call, so a burst
    of runner creations costs one read (:data:`SECRET_TTL_SECONDS`). Errors are not cached: the next reconcile
    asks again.
    """

    ttl: float = SECRET_TTL_SECONDS
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    _clients: dict[_ClientKey, tuple[int, KeyVaultClient]] = field(default_factory=dict)
    _values: dict[tuple[Any, ...], _Cached] = field(default_factory=dict)
    _inflight: dict[tuple[Any, ...], asyncio.Future[str]] = field(default_factory=dict)

    async def get_secret(
        self, settings: KeyVaultSettings, name: str, *, namespace: str, proxy: ProxySettings | None = None
    ) -> str:
        """The value of secret ``name`` in the vault ``settings`` names, for an object in ``namespace``, at most
        ``ttl`` seconds old."""
        validate_settings(settings)  # the certificate file may have gone since the client was built
        client_key: _ClientKey = (namespace, settings, _proxy_key(proxy))
        key = (*client_key, name)
        cached = self._values.get(key)
        if cached is not None and time.monotonic() - cached.fetched_at < self.ttl:
            return cached.value
        pending = self._inflight.get(key)
        while pending is not None:
            # Share the read in flight; if its caller was cancelled, the next waiter reads for itself.
            await asyncio.wait([pending])
            if not pending.cancelled():
                return pending.result()
            pending = self._inflight.get(key)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            client = await self._client(client_key, settings, proxy)
            value = await client.get_secret(name)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here: nobody else may be waiting
            raise
        else:
            self._values[key] = _Cached(value, time.monotonic())
            future.set_result(value)
            return value
        finally:
            del self._inflight[key]

    async def _client(
        self,
        key: _ClientKey,
        settings: KeyVaultSettings,
        proxy: ProxySettings | None,
    ) -> KeyVaultClient:
        try:
            version = os.stat(settings.certificate_path).st_mtime_ns
        except OSError:
            version = 0  # gone since validation: building the client reports it
        known = self._clients.get(key)
        if known is not None and known[0] == version:
            return known[1]
        client = KeyVaultClient(settings, proxy=proxy, environ=self.environ)
        self._clients[key] = (version, client)
        if known is not None:
            await known[1].close()
        return client

    async def close(self) -> None:
        clients, self._clients = [client for _, client in self._clients.values()], {}
        self._values.clear()
        for client in clients:
            await client.close()
