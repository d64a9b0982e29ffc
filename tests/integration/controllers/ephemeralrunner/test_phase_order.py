"""A runner's phase never moves backwards (issue 15): a pod that ended while its runner container's exit was not
reported ends the runner; it is never patched from Running back to Pending. Watched on the real control plane,
every state the EphemeralRunner went through."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.kube.informer import Informer
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import started_harness_fixture  # noqa: F401 - fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


@pytest.mark.parametrize("pod_phase", ["Succeeded", "Failed"])
async def test_a_pod_that_ends_without_the_runners_exit_ends_the_runner_and_never_makes_it_pending_again(
    h: ControllerHarness, pod_phase: str
) -> None:
    phases: dict[str, list[str]] = {}

    def saw(runner: Mapping[str, Any]) -> None:
        history = phases.setdefault(runner["metadata"]["name"], [])
        phase = (runner.get("status") or {}).get("phase", "")
        if not history or history[-1] != phase:
            history.append(phase)

    watch = Informer(h.kube, EPHEMERAL_RUNNERS, namespace=h.namespace)
    watch.add_handler(on_add=saw, on_update=lambda _, new: saw(new))
    watch.start()
    await watch.wait_synced()
    try:
        await h.create_ers(replicas=1, patch_id=0)
        (er,) = await h.wait_running(1)
        name = er["metadata"]["name"]
        # The pod ended, and its runner container still reads "running": the kubelet's last word was lost
        # (a node that went away after reporting the phase, a status written in two steps).
        await h.set_pod_status(name, {"phase": pod_phase, "containerStatuses": [{
            "name": "runner", "image": "x", "imageID": "", "ready": False, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]})  # fmt: skip
        await h.wait_runners(lambda rs: len(rs) == 1 and rs[0]["metadata"]["name"] != name, what="replaced")
    finally:
        await watch.stop()
    history = phases[name]
    assert "Running" in history
    assert "Pending" not in history[history.index("Running") :], f"{name} went {history}"
    assert name not in h.registered(), "its registration is removed with it"
