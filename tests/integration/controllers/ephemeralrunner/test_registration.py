"""The EphemeralRunner's registration shortcuts on the real control plane: a runner's first pass registers
without reading its JIT Secret, and still never makes a second registration when an earlier process left
a Secret behind."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.controllers.ephemeralrunner.builders import desired_jit_secret, secret_runner_id
from arc_scaleset.github import ActionsClient, PersonalAccessToken, SystemInfo, parse_config_url
from arc_scaleset.kube.resources import SECRETS
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import PAT, harness_fixture  # noqa: F401 - fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]


async def _pending_runner(h: ControllerHarness) -> dict[str, Any]:
    """One runner created by the set while no EphemeralRunner controller runs (no registration yet)."""
    await h.start("EphemeralRunnerSet")
    await h.create_ers(replicas=1, patch_id=0)
    (runner,) = await h.wait_runners(lambda rs: len(rs) == 1, what="one runner")
    await h.stop()
    return dict(runner)


async def _runner_id_in_status(h: ControllerHarness, name: str) -> int | None:
    for runner in await h.runners():
        if runner["metadata"]["name"] == name and (runner.get("status") or {}).get("runnerId"):
            return int(runner["status"]["runnerId"])
    return None


async def test_runner_registered_before_a_restart_keeps_that_registration_and_its_secret(h: ControllerHarness) -> None:
    runner = await _pending_runner(h)
    name = runner["metadata"]["name"]
    # An earlier controller process registered the runner and stored its Secret, then stopped before
    # writing the status.
    client = ActionsClient(parse_config_url(h.config_url, environ={}), PersonalAccessToken(PAT),
                           system_info=SystemInfo(subsystem="tests"))  # fmt: skip
    try:
        jit = await client.generate_jit_runner_config(h.scale_set_id, name=name, work_folder="")
    finally:
        await client.aclose()
    await h.kube.create(SECRETS, desired_jit_secret(runner, encoded_jit_config=jit.encoded_jit_config,
                                                    runner_id=jit.runner.id, runner_name=name,
                                                    scale_set_id=h.scale_set_id))  # fmt: skip

    await h.start()
    (running,) = await h.wait_running(1)

    assert running["status"]["runnerId"] == jit.runner.id
    assert [r.id for r in h.sim.state.runners.values() if r.name == name] == [jit.runner.id]
    secret = await h.kube.get(SECRETS, name, namespace=h.namespace)
    assert secret_runner_id(secret) == jit.runner.id


async def test_secret_left_by_a_vanished_registration_is_used_and_the_new_registration_given_back(
    h: ControllerHarness,
) -> None:
    runner = await _pending_runner(h)
    name = runner["metadata"]["name"]
    # A Secret whose registration the service no longer knows (removed, or expired unused).
    await h.kube.create(SECRETS, desired_jit_secret(runner, encoded_jit_config="c3RhbGU=", runner_id=424242,
                                                    runner_name=name, scale_set_id=h.scale_set_id))  # fmt: skip

    await h.start()

    # The first pass registers and writes the Secret, the pod and the status at once; the Secret's
    # AlreadyExists then makes the next pass adopt the existing Secret's runner ID. The status may show
    # the fresh registration's ID for that moment, so wait for the settled value.
    async def adopted() -> bool:
        return await _runner_id_in_status(h, name) == 424242

    await eventually(adopted, what="the existing Secret's runner ID in the status")
    assert await eventually(lambda: _no_registration(h, name), what="the extra registration removed")


async def _no_registration(h: ControllerHarness, name: str) -> bool:
    return name not in h.registered()
