"""The runner proxy Secret of an EphemeralRunnerSet (docs/controllers.md).

``<ERS name>-<h8(namespace)>-runner-proxy`` in the set's namespace, owned by the set, holding the flattened
proxy settings (``http_proxy``, ``https_proxy``, ``no_proxy``) that every runner pod's environment refers
to. Read uncached; created when missing, its data replaced when it differs, deleted with the set.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Mapping
from typing import Any

from arc_scaleset.api.common import ProxyConfig
from arc_scaleset.api.keys import LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE
from arc_scaleset.api.naming import runner_proxy_secret_name
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.controllers.proxy_secret import proxy_secret_data
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import AlreadyExists, NotFound
from arc_scaleset.kube.ownerrefs import controller_ref
from arc_scaleset.kube.resources import SECRETS


def runner_proxy(ers: Mapping[str, Any]) -> ProxyConfig | None:
    proxy = EphemeralRunnerSetView(ers).runner_spec.get("proxy")
    return None if proxy is None else ProxyConfig.model_validate(proxy)


def _encoded(data: Mapping[str, str]) -> dict[str, str]:
    return {key: base64.b64encode(value.encode("utf-8")).decode("ascii") for key, value in data.items()}


async def reconcile_runner_proxy_secret(kube: KubeClient, ers: Mapping[str, Any]) -> None:
    """Create or update the set's runner proxy Secret when a proxy is configured (else nothing).

    Raises :class:`~arc_scaleset.controllers.errors.ConfigurationError` when a credential Secret is missing.
    """
    proxy = runner_proxy(ers)
    if proxy is None:
        return
    view = EphemeralRunnerSetView(ers)
    name, namespace = view.name, view.namespace
    secret_name = runner_proxy_secret_name(name, namespace)
    data = _encoded(await proxy_secret_data(kube, namespace, proxy))
    labels = {
        key: value for key, value in view.labels.items() if key in (LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE)
    }
    try:
        current = await kube.get(SECRETS, secret_name, namespace=namespace)
    except NotFound:
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": secret_name,
                "namespace": namespace,
                "labels": labels,
                "ownerReferences": [controller_ref(ers)],
            },
            "type": "Opaque",
            "data": data,
        }
        with contextlib.suppress(AlreadyExists):  # created meanwhile; the next pass compares its data
            await kube.create(SECRETS, body)
        return
    if (current.get("data") or {}) != data:
        updated = dict(current)
        updated["data"] = data
        await kube.replace(SECRETS, updated)


async def delete_runner_proxy_secret(kube: KubeClient, ers: Mapping[str, Any]) -> None:
    view = EphemeralRunnerSetView(ers)
    name, namespace = view.name, view.namespace
    await kube.delete(SECRETS, runner_proxy_secret_name(name, namespace), namespace=namespace, missing_ok=True)
