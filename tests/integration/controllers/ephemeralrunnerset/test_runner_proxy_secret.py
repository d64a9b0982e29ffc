"""The runners' proxy Secret of an EphemeralRunnerSet, against the real control plane: the proxy's credentials
are written only into a Secret the set controls (docs/controllers.md, "Objects in the way")."""

from __future__ import annotations

import base64

import pytest

from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.naming import runner_proxy_secret_name
from arc_scaleset.kube import resources
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.ephemeralrunnerset.test_bounds import degraded
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import harness_fixture, runner_template  # noqa: F401 - fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

PROXY_PASSWORD = "proxy-pass-5c1e"


def behind_a_proxy() -> dict[str, object]:
    template: dict[str, object] = runner_template()
    url = {"url": "http://proxy.example:3128", "credentialSecretRef": "proxy-credentials"}
    template["proxy"] = {"http": url, "https": url}
    return template


async def test_a_secret_someone_else_made_under_the_runner_proxy_name_never_gets_the_proxy_credentials(
    h: ControllerHarness,
) -> None:
    await h.create_secret("proxy-credentials", {"username": "proxy-user", "password": PROXY_PASSWORD})
    name = runner_proxy_secret_name("arc", h.namespace)
    foreign = await h.kube.create(
        resources.SECRETS, {"metadata": {"name": name}, "stringData": {"note": "mine"}}, namespace=h.namespace
    )
    await h.start()
    await h.create_ers(replicas=0, patch_id=0, template=behind_a_proxy())

    condition = await eventually(degraded(h, "ObjectInTheWay"), what="Degraded ObjectInTheWay", timeout=60)
    assert name in condition["message"]
    await h.wait_for_event("ObjectInTheWay", regarding="arc")
    live = await h.kube.get(resources.SECRETS, name, namespace=h.namespace)
    assert ObjectView(live).resource_version == ObjectView(foreign).resource_version, "left untouched"
    assert all(PROXY_PASSWORD not in base64.b64decode(v).decode() for v in (live.get("data") or {}).values())

    # Deleting the set leaves the Secret that was never its own.
    await h.kube.delete(EPHEMERAL_RUNNER_SETS, "arc", namespace=h.namespace)

    async def set_gone() -> bool:
        try:
            await h.get_ers()
        except NotFound:
            return True
        return False

    await eventually(set_gone, what="the EphemeralRunnerSet deleted", timeout=60)
    still = await h.kube.get(resources.SECRETS, name, namespace=h.namespace)
    assert ObjectView(still).uid == ObjectView(foreign).uid
