"""A minimal synchronous HTTPS client for bringing a fresh control plane up (readiness, first node).

The operator and the tests use :mod:`arc_scaleset.kube.client`; this exists so that starting a cluster
depends on nothing but the standard library, and works before any event loop runs.
"""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path
from typing import Any


class AdminApi:
    """Requests as the cluster admin (client certificate), one connection per call, with a timeout."""

    def __init__(self, host: str, port: int, *, ca: Path, cert: Path, key: Path, timeout: float = 5.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._ssl = ssl.create_default_context(cafile=str(ca))
        self._ssl.load_cert_chain(str(cert), str(key))

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Send one request; return ``(status, decoded JSON or text)``. Connection errors propagate."""
        conn = http.client.HTTPSConnection(self.host, self.port, context=self._ssl, timeout=self.timeout)
        try:
            payload = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            raw = response.read().decode("utf-8", "replace")
        finally:
            conn.close()
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, raw

    def ok(self, path: str) -> bool:
        """True when GET ``path`` answers 200 (False on any error)."""
        try:
            status, _ = self.request("GET", path)
        except (OSError, http.client.HTTPException):
            return False
        return status == 200
