"""How the client proves who it is: TLS material and the ``Authorization`` header.

:class:`ConnectionConfig` is everything needed to talk to one API server, produced by
:mod:`arc_scaleset.kube.kubeconfig` (from a kubeconfig file or the in-cluster service account).
Token sources are objects rather than strings so that rotated tokens (projected service-account tokens
are replaced on disk about every hour) are picked up without restarting the process.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.errors import KubeconfigError


class TokenSource(Protocol):
    """Produces the current ``Authorization`` header value (``None`` = send none).

    ``rotates`` says whether a refresh can yield a different credential, i.e. whether a request that
    got 401 is worth one more try.
    """

    rotates: bool

    def authorization(self, *, refresh: bool = False) -> str | None:
        """The header value; ``refresh=True`` after a 401 forces re-reading any cached credential."""
        ...


class NoToken:
    """Anonymous, or authenticated by a client certificate only."""

    rotates = False

    def authorization(self, *, refresh: bool = False) -> str | None:
        return None

    def __repr__(self) -> str:
        return "NoToken()"


class StaticToken:
    """A bearer token fixed in the kubeconfig."""

    rotates = False

    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token.strip()}"

    def authorization(self, *, refresh: bool = False) -> str | None:
        return self._header

    def __repr__(self) -> str:
        return "StaticToken(<redacted>)"


class BasicAuth:
    """Username and password (rarely enabled on real servers, but valid in a kubeconfig)."""

    rotates = False

    def __init__(self, username: str, password: str) -> None:
        encoded = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
        self._header = f"Basic {encoded}"
        self._username = username

    def authorization(self, *, refresh: bool = False) -> str | None:
        return self._header

    def __repr__(self) -> str:
        return f"BasicAuth({self._username!r}, <redacted>)"


class TokenFile:
    """A bearer token read from a file and re-read as it rotates.

    The file is re-read at most every ``reload_interval`` seconds (client-go uses one minute), and
    immediately when the caller asks for a refresh after a 401. A file that cannot be read after a
    token was once loaded keeps the last good token (the kubelet replaces it atomically, so a failed read
    is transient); a file that was never readable raises :class:`KubeconfigError`.
    """

    rotates = True

    def __init__(self, path: str | os.PathLike[str], *, reload_interval: float = 60.0, clock: Clock = REAL_CLOCK):
        self._path = Path(path)
        self._reload_interval = reload_interval
        self._clock = clock
        self._header: str | None = None
        self._loaded_at = float("-inf")

    @property
    def path(self) -> Path:
        return self._path

    def authorization(self, *, refresh: bool = False) -> str | None:
        now = self._clock.monotonic()
        if refresh or self._header is None or now - self._loaded_at >= self._reload_interval:
            try:
                token = self._path.read_text().strip()
            except OSError as exc:
                if self._header is None:
                    raise KubeconfigError(f"cannot read token file {self._path}: {exc.strerror or exc}") from None
            else:
                if not token and self._header is None:
                    raise KubeconfigError(f"token file {self._path} is empty")
                if token:
                    self._header = f"Bearer {token}"
                    self._loaded_at = now
        return self._header

    def __repr__(self) -> str:
        return f"TokenFile({str(self._path)!r})"


@dataclass(frozen=True)
class ConnectionConfig:
    """Everything needed to reach and authenticate to one API server.

    ``ca_data``/``client_cert_data``/``client_key_data`` are PEM bytes (files named in a kubeconfig are
    read when it is loaded, so errors surface early). ``source`` names where it came from, for messages.
    """

    server: str
    namespace: str = "default"
    ca_data: bytes | None = field(default=None, repr=False)
    client_cert_data: bytes | None = field(default=None, repr=False)
    client_key_data: bytes | None = field(default=None, repr=False)
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    proxy_url: str | None = None
    token_source: TokenSource = field(default_factory=NoToken)
    source: str = ""

    def ssl_context(self) -> ssl.SSLContext | bool:
        """The TLS context for an ``https`` server (``True`` = system defaults for plain http targets)."""
        if not self.server.startswith("https://"):
            return True
        if self.insecure_skip_tls_verify:
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif self.ca_data is None:
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        else:
            # As client-go: a configured CA replaces the system roots rather than adding to them.
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            try:
                context.load_verify_locations(cadata=self.ca_data.decode("ascii", errors="replace"))
            except (ssl.SSLError, ValueError) as exc:
                raise KubeconfigError(f"{self._where()}: certificate authority is not valid PEM: {exc}") from None
        if self.client_cert_data is not None or self.client_key_data is not None:
            if self.client_cert_data is None or self.client_key_data is None:
                raise KubeconfigError(f"{self._where()}: a client certificate needs both the certificate and the key")
            _load_client_cert(context, self.client_cert_data, self.client_key_data, where=self._where())
        return context

    def _where(self) -> str:
        return self.source or self.server


def _load_client_cert(context: ssl.SSLContext, cert: bytes, key: bytes, *, where: str) -> None:
    # The ssl module loads certificate chains only from files. Write them to a private directory
    # (0700, files 0600) for the instant it takes to load, then remove them.
    with tempfile.TemporaryDirectory(prefix="arc-kube-") as tmp:
        cert_path = Path(tmp) / "client.crt"
        key_path = Path(tmp) / "client.key"
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        try:
            context.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as exc:
            reason = exc.reason or "invalid certificate or key"
            raise KubeconfigError(
                f"{where}: client certificate/key cannot be loaded ({reason}); are they a matching PEM pair?"
            ) from None
