"""An EphemeralRunner whose name GitHub already holds, on the real control plane: a registration of another
scale set under that name deletes the runner with a Warning Event, and the set replaces it."""

from __future__ import annotations

import pytest

from arc_scaleset.github import ActionsClient, PersonalAccessToken, SystemInfo, parse_config_url
from arc_scaleset.kube.resources import EVENTS
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import PAT, harness_fixture  # noqa: F401 - fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]


async def test_a_runner_whose_name_another_scale_set_holds_is_deleted_with_a_warning_and_replaced(
    h: ControllerHarness,
) -> None:
    # One runner created by the set while no EphemeralRunner controller runs (no registration yet).
    await h.start("EphemeralRunnerSet")
    await h.create_ers(replicas=1, patch_id=0)
    (runner,) = await h.wait_runners(lambda rs: len(rs) == 1, what="one runner")
    await h.stop()
    name = runner["metadata"]["name"]
    client = ActionsClient(
        parse_config_url(h.config_url, environ={}), PersonalAccessToken(PAT), system_info=SystemInfo(subsystem="tests")
    )
    try:
        other = await client.create_runner_scale_set(name=f"other-{h.namespace[-6:]}", runner_group_id=1)
        taken = await client.generate_jit_runner_config(other.id, name=name, work_folder="")
    finally:
        await client.aclose()

    await h.start()

    async def replaced() -> bool:
        names = [r["metadata"]["name"] for r in await h.runners()]
        return len(names) == 1 and name not in names

    await eventually(replaced, what="the runner deleted and replaced by the set")
    events = (await h.kube.list(EVENTS, namespace=h.namespace)).items
    reasons = [e["reason"] for e in events if (e.get("regarding") or {}).get("name") == name]
    assert "RunnerNameTaken" in reasons
    # The other scale set's registration is not ours to remove.
    assert [r.id for r in h.sim.state.runners.values() if r.name == name] == [taken.runner.id]
