"""A runner pod the API server rejects: the EphemeralRunner is Failed with ARC's ``InvalidPod`` reason and
message (``Failed to create the pod: <the API server's message>``), which tooling matches, and its
registration is removed.

The runner is created on its own, as the EphemeralRunner controller serves any runner (ARC's does too): an
EphemeralRunnerSet tries its runner spec with a dry run first and creates no runner from a spec the API
server refuses (controllers/ephemeralrunnerset/template_check.py), so a rejection at the runner comes from
what changed in between (an admission policy, a runner written by another tool or by ARC)."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.kube.resources import EVENTS
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import SECRET_NAME, harness_fixture  # noqa: F401 - fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]


def failed(runners: list[dict[str, Any]]) -> bool:
    return len(runners) == 1 and (runners[0].get("status") or {}).get("phase") == "Failed"


async def test_a_pod_the_api_server_rejects_fails_the_runner_with_arcs_invalid_pod_wording(
    h: ControllerHarness,
) -> None:
    # The CRD schema lets any string through as a container name; the API server's pod validation does not.
    rejected = {"spec": {"containers": [{"name": "Not_A_Valid_Name", "image": "ghcr.io/actions/actions-runner"}]}}
    await h.start("EphemeralRunner")
    runner = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {"name": "lone-runner"},
        "spec": {
            "githubConfigUrl": h.config_url,
            "githubConfigSecret": SECRET_NAME,
            "runnerScaleSetId": h.scale_set_id,
            **rejected,
        },
    }
    await h.kube.create(EPHEMERAL_RUNNERS, runner, namespace=h.namespace)

    (er,) = await h.wait_runners(failed, what="the runner to be Failed")
    name = er["metadata"]["name"]
    status = er["status"]
    assert status["reason"] == "InvalidPod"
    message = status["message"]
    assert message.startswith(f'Failed to create the pod: Pod "{name}" is invalid: spec.containers[0].name: ')
    assert "Not_A_Valid_Name" in message
    # The API server's words only: neither our HTTP request line nor the HTTP status.
    assert "POST" not in message
    assert "/api/v1" not in message
    assert "422" not in message
    assert not await h.pods()
    # Recorded first, then unregistered (a crash in between leaves a Failed runner, whose deletion unregisters).
    await eventually(lambda: name not in h.registered(), "the runner that can never run to be unregistered")

    async def invalid_pod_event() -> dict[str, Any] | None:
        for event in (await h.kube.list(EVENTS, namespace=h.namespace)).items:
            if (event.get("regarding") or {}).get("name") == name and event.get("reason") == "InvalidPod":
                return event
        return None

    event = await eventually(invalid_pod_event, "an InvalidPod event")
    assert event["type"] == "Warning"
    assert event["note"] == message
