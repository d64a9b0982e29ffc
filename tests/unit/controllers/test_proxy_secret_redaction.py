"""A proxy password read from a Kubernetes Secret is masked in every later log line, Event and condition from
the moment the controller reads it (issue 26), in each form a text could show it."""

from __future__ import annotations

import base64
import secrets
from typing import Any
from urllib.parse import quote

from arc_scaleset.api.common import ProxyConfig
from arc_scaleset.controllers.proxy_secret import proxy_secret_data
from arc_scaleset.kube.resources import SECRETS, Resource
from arc_scaleset.observability.logging import REDACTED, redact


class OneSecret:
    """The controller's one read: the proxy credential Secret."""

    def __init__(self, name: str, data: dict[str, str]) -> None:
        self.name, self.data = name, data

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        assert (resource, name) == (SECRETS, self.name)
        encoded = {key: base64.b64encode(value.encode()).decode() for key, value in self.data.items()}
        return {"metadata": {"name": name, "namespace": namespace}, "data": encoded}


async def test_a_proxy_password_from_a_kubernetes_secret_is_masked_wherever_it_appears() -> None:
    password = "pr0xy/" + secrets.token_hex(8)  # shaped like no credential: only the registry can mask it
    kube = OneSecret("proxy-creds", {"username": "ops", "password": password})
    proxy = ProxyConfig.model_validate({"https": {"url": "proxy.corp:3128", "credentialSecretRef": "proxy-creds"}})

    data = await proxy_secret_data(kube, "team-a", proxy)  # type: ignore[arg-type]

    assert data["https_proxy"] == f"http://ops:{quote(password, safe='')}@proxy.corp:3128"
    assert redact(f"dialing {data['https_proxy']}") == f"dialing http://ops:{REDACTED}@proxy.corp:3128"
    assert redact(f"407 from the proxy: bad password {password}") == f"407 from the proxy: bad password {REDACTED}"
    assert password not in redact(f"the proxy echoed {quote(password, safe='')}")
