"""Issue 26 item 5 on the real control plane with the simulated GitHub: when GitHub answers a step of the
authentication chain with 404 (a PAT that lost its access to the organization), no runner removal reads as
"already gone". A scale-down then deletes no runner -- in particular not one that took a job the cache does not
show yet -- and the runner set's ``Degraded`` condition names the configuration error; once GitHub answers
again, the idle runner goes and the busy one stays until its job ends."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.controllers.errors import GitHubAuthenticationStepFailed
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim.faults import FaultRule
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import ORG, harness_fixture  # noqa: F401 - fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


def take_job_unseen(h: ControllerHarness, runner_name: str) -> None:
    """The runner takes a job on GitHub; the listener has not recorded it on the runner yet (the cache shows an
    idle runner: only GitHub's answer to the removal can tell)."""
    request_id = h.sim.state.enqueue_job(h.scale_set_name(), repository=f"{ORG}/repo", duration=3600).request_id
    h.sim.state.runner_online(runner_name)
    assert h.sim.state.acquire_jobs(h.scale_set_id, [request_id]) == [request_id]


def degraded(ers: dict[str, Any]) -> dict[str, Any]:
    return get_condition((ers.get("status") or {}).get("conditions"), "Degraded") or {}


async def test_a_404_on_the_registration_token_step_never_deletes_a_busy_runner(h: ControllerHarness) -> None:
    await h.start()
    await h.create_ers(replicas=2, patch_id=0)
    runners = await h.wait_running(2)
    busy, idle = sorted(r["metadata"]["name"] for r in runners)
    take_job_unseen(h, busy)
    # The PAT loses its access to the organization: a restarted controller has no admin token cached, so its
    # first GitHub call goes through the registration-token step, which now answers 404.
    await h.stop()
    fault = h.sim.faults.add(FaultRule(route="registration_token", status=404, count=None, message="Not Found"))
    await h.start()

    await h.patch_ers(replicas=0, patchID=0)

    async def condition_names_the_error() -> dict[str, Any] | None:
        condition = degraded(await h.get_ers())
        return condition if condition.get("reason") == GitHubAuthenticationStepFailed.reason else None

    condition = await eventually(condition_names_the_error, timeout=60, what="Degraded naming the auth step")
    assert condition["status"] == "True"
    assert "registration token step" in condition["message"]
    assert [r for r in await h.runners() if r["metadata"].get("deletionTimestamp")] == []
    assert {r["metadata"]["name"] for r in await h.runners()} == {busy, idle}
    assert h.registered() == {busy, idle}, "nothing was removed from GitHub either"
    assert not [r for r in h.sim.requests if r.route == "remove_runner"], "no removal was asked without the token"

    # GitHub answers again: the idle runner goes, the busy one is kept (JobStillRunning) and so is its pod.
    h.sim.faults.remove(fault)
    await h.wait_runners(
        lambda rs: [r["metadata"]["name"] for r in rs] == [busy], timeout=60, what="only the busy runner left"
    )
    assert h.registered() == {busy}

    async def condition_cleared() -> bool:
        return degraded(await h.get_ers()).get("status") == "False"

    await eventually(condition_cleared, timeout=30, what="Degraded cleared")
