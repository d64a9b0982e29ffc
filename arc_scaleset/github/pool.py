"""Reuse of :class:`ActionsClient` across reconciles.

A client holds an admin token and open connections; building one per reconcile would mint a registration
token every time (GitHub rate-limits those in a bucket of their own; docs/github.md). The pool keys clients by
everything that shapes them: config URL, namespace (whose Secret the credentials came from), a sha256
fingerprint of the credentials, of the root CA and of the proxy settings. A changed Secret gives a new key,
hence a new client.

A client that can no longer be asked for is evicted, so no open client keeps old credentials for the life of
the process (docs/github.md, "Client pool"):

- **superseded**: callers name the *source* of a client (where its credentials, CA and proxy come from, e.g.
  the Secret's name); when a source in a namespace and config URL now yields another key (the Secret was
  rotated), the client of the old key is evicted unless another source still yields it;
- **scale set deleted**: :meth:`ActionsClientPool.scale_set_deleted` evicts the clients of that namespace and
  config URL. A live scale set that shared one gets a fresh client on its next call (one admin-token refresh).

An evicted client leaves the pool at once and is closed ``retire_grace`` seconds later (120 s by default, on
the pool's clock; checked on each call to the pool), so a reconcile that fetched it moments earlier finishes
its request instead of seeing its connection closed under it. :meth:`ActionsClientPool.aclose` closes all.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.github.actions_client import ActionsClient
from arc_scaleset.github.config_url import GitHubConfig
from arc_scaleset.github.credentials import Credentials
from arc_scaleset.github.proxy import ProxySettings
from arc_scaleset.github.system_info import SystemInfo
from arc_scaleset.github.transport_options import DEFAULT_TRANSPORT, TransportOptions


@dataclass(frozen=True, slots=True)
class ClientKey:
    """What identifies a client. Holds only digests, so it is safe to log."""

    config_url: str
    namespace: str
    credentials_fingerprint: str
    root_ca_fingerprint: str
    proxy_fingerprint: str


@dataclass(frozen=True, slots=True)
class _Source:
    """Where a client's inputs come from (by reference, not by value): rotating what it names changes the key."""

    namespace: str
    config_url: str
    source_digest: str


DEFAULT_RETIRE_GRACE: Final = 120.0


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
        transport: TransportOptions = DEFAULT_TRANSPORT,
        factory: ClientFactory = ActionsClient,
        retire_grace: float = DEFAULT_RETIRE_GRACE,
    ) -> None:
        """``transport`` is every :class:`ActionsClient`'s (timeouts, retry budget...), with the CA and proxy
        :meth:`get` is given; ``retire_grace`` is how long an evicted client stays open for requests already
        under way."""
        self._system_info = system_info
        self._clock = clock
        self._transport = transport
        self._factory = factory
        self._retire_grace = retire_grace
        self._clients: dict[ClientKey, ActionsClient] = {}
        self._sources: dict[_Source, ClientKey] = {}
        self._retiring: list[tuple[float, ActionsClient]] = []
        self._lock = asyncio.Lock()

    def __len__(self) -> int:
        """How many clients can be handed out (evicted ones waiting to be closed excluded)."""
        return len(self._clients)

    @staticmethod
    def key_for(
        config: GitHubConfig,
        *,
        namespace: str,
        credentials: Credentials | None = None,
        root_ca_pem: str | None = None,
        proxy: ProxySettings | None = None,
        fingerprint: str | None = None,
    ) -> ClientKey:
        """The key of a client: ``credentials``, or their ``fingerprint`` (``credentials.fingerprint()``)."""
        if fingerprint is None:
            if credentials is None:
                raise TypeError("key_for needs credentials or their fingerprint")
            fingerprint = credentials.fingerprint()
        proxy_text = "" if proxy is None else f"{proxy.http_proxy}\n{proxy.https_proxy}\n{proxy.no_proxy}\n{proxy.cgi}"
        return ClientKey(
            config_url=config.url,
            namespace=namespace,
            credentials_fingerprint=fingerprint,
            root_ca_fingerprint=_sha256((root_ca_pem or "").strip()),
            proxy_fingerprint=_sha256(proxy_text),
        )

    async def get(
        self,
        config: GitHubConfig,
        *,
        namespace: str,
        credentials: Credentials | Callable[[], Credentials],
        root_ca_pem: str | None = None,
        proxy: ProxySettings | None = None,
        source: str = "",
        fingerprint: str | None = None,
    ) -> ActionsClient:
        """The pooled client for these inputs, built on first use. Raises ``ValueError`` for a bad CA PEM.

        ``credentials`` may be a function that builds them, with their ``fingerprint`` given: it is called only
        when no pooled client has that fingerprint yet, so a GitHub App's key is parsed once per client, not
        once per call (docs/github.md, "Client pool"); whatever it raises propagates and leaves the pool as it
        was.

        ``source`` names where ``credentials``, ``root_ca_pem`` and ``proxy`` were read from (e.g. the Secret's
        and ConfigMap's names; never their values). When the same source in the same namespace and config URL
        gives another key than last time, the old key's client is evicted unless another source still gives it.
        """
        if callable(credentials) and fingerprint is None:
            raise TypeError("credentials given as a function need their fingerprint")
        given = None if callable(credentials) else credentials
        key = self.key_for(
            config,
            namespace=namespace,
            credentials=given,
            root_ca_pem=root_ca_pem,
            proxy=proxy,
            fingerprint=fingerprint,
        )
        origin = _Source(namespace=namespace, config_url=config.url, source_digest=_sha256(source))
        async with self._lock:
            await self._close_retired()
            client = self._clients.get(key)
            if client is None:
                # Built before the source moves to the new key: inputs that fail to build (a bad key, a bad
                # CA) evict nothing.
                client = self._factory(
                    config,
                    credentials() if callable(credentials) else credentials,
                    system_info=self._system_info,
                    transport=replace(self._transport, root_ca_pem=root_ca_pem, proxy=proxy),
                    clock=self._clock,
                )
                self._clients[key] = client
            previous = self._sources.get(origin)
            self._sources[origin] = key
            if previous is not None and previous != key:
                self._evict_if_unused(previous)
            return client

    async def scale_set_deleted(self, *, namespace: str, config_url: str) -> None:
        """A scale set in ``namespace`` for ``config_url`` is gone: evict the clients it may have used.

        Call it once the scale set is deleted on GitHub. Other live scale sets of the same namespace and config
        URL get a new client on their next call.
        """
        config_url = config_url.strip().strip("/")  # as parse_config_url keeps it
        async with self._lock:
            await self._close_retired()
            for origin in [o for o in self._sources if o.namespace == namespace and o.config_url == config_url]:
                del self._sources[origin]
            for key in [k for k in self._clients if k.namespace == namespace and k.config_url == config_url]:
                self._retire(key)

    async def aclose(self) -> None:
        """Close every client, evicted ones included. The pool may be used again afterwards."""
        async with self._lock:
            clients = [*self._clients.values(), *(client for _, client in self._retiring)]
            self._clients, self._sources, self._retiring = {}, {}, []
        for client in clients:
            await client.aclose()

    def _evict_if_unused(self, key: ClientKey) -> None:
        if key not in self._sources.values():
            self._retire(key)

    def _retire(self, key: ClientKey) -> None:
        client = self._clients.pop(key, None)
        if client is not None:
            self._retiring.append((self._clock.monotonic() + self._retire_grace, client))

    async def _close_retired(self) -> None:
        now = self._clock.monotonic()
        due = [client for deadline, client in self._retiring if deadline <= now]
        if not due:
            return
        self._retiring = [(deadline, client) for deadline, client in self._retiring if deadline > now]
        for client in due:
            await client.aclose()
