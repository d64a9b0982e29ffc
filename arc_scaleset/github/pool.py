"""Reuse of :class:`ActionsClient` across reconciles.

A client holds an admin token and open connections; building one per reconcile would mint a registration
token every time (GitHub rate-limits those in a bucket of their own; docs/github.md). The pool keys clients by
everything that shapes them: config URL, namespace (whose Secret the credentials came from), a sha256
fingerprint of the credentials, of the root CA and of the proxy settings. A changed Secret gives a new key,
hence a new client. The pool never closes a client behind a caller's back (another reconcile may be using
it); :meth:`ActionsClientPool.discard` closes a namespace's clients when the owner knows they are unused
(e.g. when an AutoscalingRunnerSet is deleted), and :meth:`ActionsClientPool.aclose` closes all at shutdown.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.github.actions_client import ActionsClient
from arc_scaleset.github.config_url import GitHubConfig
from arc_scaleset.github.credentials import Credentials
from arc_scaleset.github.proxy import ProxySettings
from arc_scaleset.github.system_info import SystemInfo


@dataclass(frozen=True, slots=True)
class ClientKey:
    """What identifies a client. Holds only digests, so it is safe to log."""

    config_url: str
    namespace: str
    credentials_fingerprint: str
    root_ca_fingerprint: str
    proxy_fingerprint: str


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


ClientFactory = Callable[..., ActionsClient]


class ActionsClientPool:
    """Clients shared by the controllers of one process; close the pool at shutdown."""

    def __init__(
        self,
        *,
        system_info: SystemInfo,
        clock: Clock = REAL_CLOCK,
        client_options: dict[str, object] | None = None,
        factory: ClientFactory = ActionsClient,
    ) -> None:
        """``client_options`` are passed to every :class:`ActionsClient` (timeouts, retry budget...)."""
        self._system_info = system_info
        self._clock = clock
        self._options = dict(client_options or {})
        self._factory = factory
        self._clients: dict[ClientKey, ActionsClient] = {}
        self._lock = asyncio.Lock()

    def __len__(self) -> int:
        return len(self._clients)

    @staticmethod
    def key_for(
        config: GitHubConfig,
        *,
        namespace: str,
        credentials: Credentials,
        root_ca_pem: str | None = None,
        proxy: ProxySettings | None = None,
    ) -> ClientKey:
        proxy_text = "" if proxy is None else f"{proxy.http_proxy}\n{proxy.https_proxy}\n{proxy.no_proxy}\n{proxy.cgi}"
        return ClientKey(
            config_url=config.url,
            namespace=namespace,
            credentials_fingerprint=credentials.fingerprint(),
            root_ca_fingerprint=_sha256((root_ca_pem or "").strip()),
            proxy_fingerprint=_sha256(proxy_text),
        )

    async def get(
        self,
        config: GitHubConfig,
        *,
        namespace: str,
        credentials: Credentials,
        root_ca_pem: str | None = None,
        proxy: ProxySettings | None = None,
    ) -> ActionsClient:
        """The pooled client for these inputs, built on first use. Raises ``ValueError`` for a bad CA PEM."""
        key = self.key_for(config, namespace=namespace, credentials=credentials, root_ca_pem=root_ca_pem, proxy=proxy)
        async with self._lock:
            client = self._clients.get(key)
            if client is not None:
                return client
            client = self._factory(
                config,
                credentials,
                system_info=self._system_info,
                root_ca_pem=root_ca_pem,
                proxy=proxy,
                clock=self._clock,
                **self._options,
            )
            self._clients[key] = client
            return client

    async def discard(self, *, namespace: str, config_url: str | None = None) -> None:
        """Close and forget the clients of a namespace (optionally only one config URL), e.g. on ARS deletion."""
        async with self._lock:
            gone = [
                k
                for k in self._clients
                if k.namespace == namespace and (config_url is None or k.config_url == config_url)
            ]
            for key in gone:
                await self._clients.pop(key).aclose()

    async def aclose(self) -> None:
        async with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()
