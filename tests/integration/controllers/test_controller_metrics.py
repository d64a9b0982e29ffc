"""The controller's ``gha_controller_*`` metrics on a live system: the EphemeralRunnerSet and EphemeralRunner
controllers run in-process against the real control plane and the simulated GitHub (kwok plays the kubelet),
and the registry the manager serves at ``/metrics`` is scraped after a scale-up, a job completion, a template
change, a failed runner and the scale set's deletion (docs/observability.md)."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import harness_fixture, runner_template  # noqa: F401 - fixture

REVISION = "actions.github.com/actionable-revision"
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


def _registry(h: ControllerHarness) -> CollectorRegistry:
    assert h.ctx is not None
    return h.ctx.metrics.registry


def sample(h: ControllerHarness, name: str, **labels: str) -> float | None:
    """One series of the scale set ``arc`` (the harness's set carries no GitHub URL labels)."""
    full = {"name": "arc", "namespace": h.namespace, "repository": "", "organization": "", "enterprise": ""}
    return _registry(h).get_sample_value(name, full | labels)


def phase_of(runner: dict[str, Any]) -> str:
    return str((runner.get("status") or {}).get("phase") or "")


async def gauges_match_the_cluster(h: ControllerHarness) -> bool:
    """The phase gauges equal the live runners by phase as the API shows them now."""
    live = await h.live_runners()
    for phase in ("Pending", "Running", "Failed", "Succeeded"):
        expected = sum(1 for runner in live if (phase_of(runner) or "Pending") == phase)
        if sample(h, f"gha_controller_{phase.lower()}_ephemeral_runners") != expected:
            return False
    return True


async def test_scale_up_job_completion_and_template_change_show_in_gauges_and_counters(h: ControllerHarness) -> None:
    await h.start()
    await h.create_ers(replicas=2, patch_id=0)
    runners = await h.wait_running(2)

    # Scale-up: two runners created, both running now; revision 0 wanted and applied.
    assert sample(h, "gha_controller_ephemeral_runners_created_total") == 2
    await eventually(lambda: sample(h, "gha_controller_running_ephemeral_runners") == 2, what="2 running")
    assert sample(h, "gha_controller_pending_ephemeral_runners") == 0
    assert sample(h, "gha_controller_desired_revision") == 0
    assert sample(h, "gha_controller_applied_revision") == 0

    # A job completes: counted once as succeeded and deleted for that reason, whatever the gauge showed.
    await h.finish_pod(runners[0]["metadata"]["name"], exit_code=0)
    await eventually(lambda: sample(h, "gha_controller_ephemeral_runners_succeeded_total") == 1, what="succeeded")
    await eventually(
        lambda: sample(h, "gha_controller_ephemeral_runners_deleted_total", reason="succeeded") == 1,
        what="deleted as succeeded",
    )
    assert sample(h, "gha_controller_ephemeral_runners_failed_total") == 0  # counted from 0 as controller-runtime
    # Patch ID 0 (idle at minRunners) is never held back: the finished runner is replaced. Waited for, so that
    # the replacement is not counted as one of the template change's.
    finished = runners[0]["metadata"]["name"]
    await h.wait_runners(
        lambda rs: len(rs) == 2 and finished not in {r["metadata"]["name"] for r in rs}
        and all(phase_of(r) == "Running" for r in rs),
        timeout=60, what="the finished runner replaced",
    )  # fmt: skip

    # A template change: the new revision is desired, then applied; idle runners replaced for that reason.
    created_before = sample(h, "gha_controller_ephemeral_runners_created_total") or 0
    await h.patch_ers(actionableRevision=1, ephemeralRunnerSpec={"metadata": {"labels": {"rev": "1"}}})
    await eventually(lambda: sample(h, "gha_controller_applied_revision") == 1, timeout=60, what="applied 1")
    assert sample(h, "gha_controller_desired_revision") == 1
    assert (sample(h, "gha_controller_ephemeral_runners_deleted_total", reason="revision") or 0) >= 1
    replaced = await h.wait_runners(
        lambda rs: bool(rs) and all(phase_of(r) == "Running" and r["metadata"]["annotations"].get(REVISION) == "1"
                                    for r in rs),
        timeout=60, what="the runners replaced by running runners of revision 1",
    )  # fmt: skip
    assert sample(h, "gha_controller_ephemeral_runners_created_total") == created_before + len(replaced)
    await eventually(lambda: gauges_match_the_cluster(h), what="gauges equal to the runners by phase")


async def test_a_failed_runner_is_counted_and_shown_until_it_is_reaped(h: ControllerHarness) -> None:
    await h.start()
    # Unschedulable, so kwok leaves the pod alone and we can report what a kubelet would.
    template = runner_template("bad::image")
    template["spec"]["nodeSelector"] = {"arc-scaleset.dev/nowhere": "true"}
    await h.create_ers(replicas=1, patch_id=0, template=template)
    (er,) = await h.wait_runners(lambda rs: len(rs) == 1 and rs[0].get("status", {}).get("runnerId"), what="reg")
    name = er["metadata"]["name"]
    await eventually(lambda: _has_pod(h, name), what="runner pod")
    await h.set_pod_status(name, {"phase": "Pending", "containerStatuses": [{
        "name": "runner", "image": "bad::image", "imageID": "", "ready": False, "restartCount": 0,
        "state": {"waiting": {"reason": "InvalidImageName", "message": "couldn't parse image name"}}}]})  # fmt: skip

    await eventually(lambda: sample(h, "gha_controller_ephemeral_runners_failed_total") == 1, what="failed counted")
    # Kept for failed_runner_min_age (60 s in the harness) before it is reaped: the gauge shows it meanwhile.
    await eventually(lambda: sample(h, "gha_controller_failed_ephemeral_runners") == 1, what="failed gauge")
    assert sample(h, "gha_controller_ephemeral_runners_succeeded_total") == 0


async def test_a_deleted_scale_set_has_no_series_left(h: ControllerHarness) -> None:
    await h.start()
    await h.create_ers(replicas=1, patch_id=0)
    await h.wait_running(1)
    assert sample(h, "gha_controller_ephemeral_runners_created_total") == 1

    await h.kube.delete(EPHEMERAL_RUNNER_SETS, "arc", namespace=h.namespace)
    await h.wait_runners(lambda rs: not rs, what="the runners gone")
    await eventually(lambda: _no_series_of(h), what="every series of the scale set removed")
    assert sample(h, "gha_controller_ephemeral_runners_deleted_total", reason="set_deleted") is None


async def _has_pod(h: ControllerHarness, name: str) -> bool:
    return any(pod["metadata"]["name"] == name for pod in await h.pods())


def _no_series_of(h: ControllerHarness) -> bool:
    for family in _registry(h).collect():
        for series in family.samples:
            if family.name.startswith("gha_controller_") and series.labels.get("namespace") == h.namespace:
                return False
    return True
