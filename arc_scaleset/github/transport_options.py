"""How one Actions-service client's requests travel: :class:`TransportOptions`, one value from the caller to
the transport.

The controller builds one for all its clients (short deadlines and a small retry budget, so that no reconcile
worker waits on GitHub for long) and the client pool sets each client's CA and proxy on it; the listener builds
its own from its ``config.json`` and environment. The policy these settings tune is in
:mod:`arc_scaleset.github._transport` (docs/github.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from arc_scaleset.github.proxy import ProxySettings

MAX_RESPONSE_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class TransportOptions:
    """The transport settings of one client. Every field has the default a client gets when given none."""

    root_ca_pem: str | None = None
    """A PEM bundle trusted besides the system's trust store (a GHES behind a private CA)."""
    proxy: ProxySettings | None = None
    """Which proxy to send each request through; ``None`` sends every request directly."""
    request_timeout: float = 30.0
    """Seconds for one attempt (connect, headers and body) unless a call gives its own limit."""
    retry_max: int = 4
    """Retries after the first attempt of a request that failed in a way worth retrying."""
    retry_wait_min: float = 1.0
    """The first wait between attempts, doubled after each (plus up to 10 % jitter)..."""
    retry_wait_max: float = 30.0
    """...up to this many seconds."""
    rate_limit_wait_max: float = 30.0
    """The longest rate-limit wait (``Retry-After``) sat out here; a longer one is raised as ``RateLimited``."""
    max_response_bytes: int = MAX_RESPONSE_BYTES
    """A response body over this many bytes is not read further: ``ResponseTooLarge``."""


DEFAULT_TRANSPORT = TransportOptions()
"""The options of a client given none."""
