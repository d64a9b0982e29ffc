"""The runner proxy Secret of an EphemeralRunnerSet (docs/controllers.md).

``<ERS name>-<h8(namespace)>-runner-proxy`` in the set's namespace, owned by the set, holding the flattened
proxy settings (``http_proxy``, ``https_proxy``, ``no_proxy``) that every runner pod's environment refers
to. Created when missing, its data replaced when it differs, deleted with the set; only a Secret the set
controls: another under the name is in the way (:class:`~arc_scaleset.controllers.errors.ObjectInTheWay`), and the
proxy's credentials are never written into it.

Every pass of a set with a proxy brings the Secret in line, but not with a request each (issue 30's request
budget; a busy set has several passes per job):

- the proxy's credential Secrets are read through the controller's GitHub access (``reads``), which fetches
  their data once per change the referenced-object watch sees (:mod:`~arc_scaleset.controllers.referenced_data`);
- the runner proxy Secret itself is read only when the data it should hold differs from what this process last
  found or wrote there, or when that was ``recheck_after`` seconds ago (:class:`ProxySecretCheck`): so a
  rotated proxy password reaches it at the set's next pass after the watch saw the rotation, and a hand edit or
  deletion of it is put back within ``recheck_after`` (ARC puts it back at the set's next reconcile, from its
  cache of every Secret, which this controller does not keep).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.api.common import ProxyConfig
from arc_scaleset.api.keys import LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE
from arc_scaleset.api.naming import runner_proxy_secret_name
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.controllers.errors import ObjectInTheWay, in_the_way_message
from arc_scaleset.controllers.proxy_secret import proxy_secret_data
from arc_scaleset.controllers.secrets import ObjectGetter
from arc_scaleset.kube.client import KubeClient, Preconditions
from arc_scaleset.kube.errors import AlreadyExists, Conflict, NotFound
from arc_scaleset.kube.ownerrefs import controller_ref, is_controlled_by
from arc_scaleset.kube.resources import SECRETS
from arc_scaleset.kube.views import ObjectView

DEFAULT_RECHECK_AFTER: Final = 300.0
"""Seconds after which a pass reads the runner proxy Secret again although what it is made from is unchanged."""


def data_digest(data: Mapping[str, str]) -> str:
    """A digest of a Secret's ``data`` (pure): what is remembered instead of the data, which holds the proxy's
    password."""
    return hashlib.sha256(json.dumps(dict(data), sort_keys=True).encode("utf-8")).hexdigest()


def check_due(kept: str | None, checked_at: float, wanted: str, *, now: float, recheck_after: float) -> bool:
    """Whether a pass must read the runner proxy Secret (pure): when nothing is kept, when the data it should
    hold (``wanted``) is not what was kept, or when the last check is ``recheck_after`` seconds old."""
    return kept != wanted or now - checked_at >= recheck_after


@dataclass
class ProxySecretCheck:
    """The digest of the runner proxy Secret's data as this process last found or wrote it, and when; one per
    set, in its slot of the controller's memory (:mod:`.scope`). In memory only: after a restart the first pass
    reads the Secret."""

    clock: Clock = REAL_CLOCK
    recheck_after: float = DEFAULT_RECHECK_AFTER
    digest: str | None = None
    checked_at: float = 0.0

    def due(self, wanted: str) -> bool:
        return check_due(
            self.digest, self.checked_at, wanted, now=self.clock.monotonic(), recheck_after=self.recheck_after
        )

    def in_line(self, digest: str) -> None:
        """The Secret was found or written holding data of ``digest``, now."""
        self.digest, self.checked_at = digest, self.clock.monotonic()


def runner_proxy(ers: Mapping[str, Any]) -> ProxyConfig | None:
    proxy = EphemeralRunnerSetView(ers).runner_spec.get("proxy")
    return None if proxy is None else ProxyConfig.model_validate(proxy)


def _encoded(data: Mapping[str, str]) -> dict[str, str]:
    return {key: base64.b64encode(value.encode("utf-8")).decode("ascii") for key, value in data.items()}


async def reconcile_runner_proxy_secret(
    kube: KubeClient, reads: ObjectGetter, ers: Mapping[str, Any], check: ProxySecretCheck
) -> None:
    """Create or update the set's runner proxy Secret when a proxy is configured (else nothing); the credential
    Secrets are read through ``reads``, the runner proxy Secret only when ``check`` says so (module docstring).

    Raises :class:`~arc_scaleset.controllers.errors.ConfigurationError` when a credential Secret is missing.
    """
    proxy = runner_proxy(ers)
    if proxy is None:
        return
    data = _encoded(await proxy_secret_data(reads, EphemeralRunnerSetView(ers).namespace, proxy))
    wanted = data_digest(data)
    if not check.due(wanted):
        return
    if await _bring_in_line(kube, ers, data):
        check.in_line(wanted)


async def _bring_in_line(kube: KubeClient, ers: Mapping[str, Any], data: dict[str, str]) -> bool:
    """Create or update the Secret to hold ``data``; whether it is known to hold it now."""
    view = EphemeralRunnerSetView(ers)
    name, namespace = view.name, view.namespace
    secret_name = runner_proxy_secret_name(name, namespace)
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
        try:
            await kube.create(SECRETS, body)
        except AlreadyExists:
            return False  # created meanwhile: the next pass compares its data
        return True
    if not is_controlled_by(current, ers):
        raise ObjectInTheWay(in_the_way_message("Secret", current, ers))
    if (current.get("data") or {}) != data:
        updated = dict(current)
        updated["data"] = data
        await kube.replace(SECRETS, updated)
    return True


async def delete_runner_proxy_secret(kube: KubeClient, ers: Mapping[str, Any]) -> None:
    """Delete the set's runner proxy Secret, only when the set controls it (never another Secret of its name)."""
    view = EphemeralRunnerSetView(ers)
    secret_name = runner_proxy_secret_name(view.name, view.namespace)
    try:
        current = await kube.get(SECRETS, secret_name, namespace=view.namespace)
    except NotFound:
        return
    if is_controlled_by(current, ers):
        with contextlib.suppress(Conflict):  # replaced meanwhile: not ours
            await kube.delete(SECRETS, secret_name, namespace=view.namespace, missing_ok=True,
                              preconditions=Preconditions(uid=ObjectView(current).uid))  # fmt: skip
