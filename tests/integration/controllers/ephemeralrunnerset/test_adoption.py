"""The EphemeralRunnerSet controller with sets made by ARC (docs/migration.md) and the status counts
``kubectl get`` shows with ``--runner-counts-in-status``, against the real control plane, the simulated GitHub and
kwok pods."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import ARC_EPHEMERAL_RUNNER_SET_FINALIZER, EPHEMERAL_RUNNER_SET_FINALIZER
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import (  # noqa: F401 - fixture
    harness,
    runner_template,
    started_harness_fixture,
)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

COUNTS = (
    "currentReplicas",
    "pendingEphemeralRunners",
    "runningEphemeralRunners",
    "failedEphemeralRunners",
    "finishedEphemeralRunners",
    "deletingEphemeralRunners",
)


def names(runners: list[dict[str, Any]]) -> set[str]:
    return {r["metadata"]["name"] for r in runners if not r["metadata"].get("deletionTimestamp")}


async def counts(h: ControllerHarness, name: str) -> tuple[int | None, ...]:
    status = (await h.get_ers(name)).get("status") or {}
    return tuple(status.get(field) for field in COUNTS)


async def scale_set_owner(h: ControllerHarness) -> dict[str, Any]:
    """An AutoscalingRunnerSet to own sets (no controller reconciles it here)."""
    body = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": "arc-runners", "namespace": h.namespace},
        "spec": {"githubConfigUrl": h.config_url, "githubConfigSecret": "github-secret", "template": runner_template()},
    }
    return await h.kube.create(AUTOSCALING_RUNNER_SETS, body)


def owned(body: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    view = ObjectView(owner)
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": view.api_version, "kind": view.kind, "name": view.name, "uid": view.uid, "controller": True}
    ]
    return body


async def test_with_counts_in_status_the_sets_status_counts_follow_its_runners(
    kube: KubeClient, namespace: str, crds_installed: list[str]
) -> None:
    async with harness(kube, namespace) as h:
        await h.start(runner_counts_in_status=True)
        await h.create_ers(replicas=3, patch_id=0)
        runners = await h.wait_running(3)

        async def counted(expected: tuple[int | None, ...]) -> bool:
            return await counts(h, "arc") == expected

        await eventually(lambda: counted((3, 0, 3, 0, 0, 0)), what="3 running runners counted", timeout=30)
        busy = runners[0]["metadata"]["name"]
        await h.make_busy(busy)
        await h.patch_ers(replicas=1, patchID=0)
        await h.wait_runners(lambda rs: names(rs) == {busy} and len(rs) == 1, what="only the busy runner left")
        await eventually(lambda: counted((1, 0, 1, 0, 0, 0)), what="1 running runner counted", timeout=30)


async def test_a_set_holding_arcs_finalizer_is_adopted_and_drains_its_runners_before_it_goes(
    h: ControllerHarness,
) -> None:
    body = h.ers_body("arc", replicas=2, patch_id=0)
    body["metadata"]["finalizers"] = [ARC_EPHEMERAL_RUNNER_SET_FINALIZER]
    await h.kube.create(EPHEMERAL_RUNNER_SETS, body)
    runners = await h.wait_running(2)
    assert (await h.get_ers("arc"))["metadata"]["finalizers"] == [ARC_EPHEMERAL_RUNNER_SET_FINALIZER]
    busy, idle = (r["metadata"]["name"] for r in runners)
    await h.make_busy(busy)

    await h.kube.delete(EPHEMERAL_RUNNER_SETS, "arc", namespace=h.namespace)
    await h.wait_runners(lambda rs: names(rs) == {busy}, what="the idle runner removed, the busy one kept")
    assert h.registered() == {busy}
    assert (await h.get_ers("arc"))["metadata"].get("deletionTimestamp"), "the set waits for its busy runner"

    h.sim.state.runner_exit(busy)  # the job ends
    await h.finish_pod(busy, exit_code=0)

    async def gone() -> bool:
        try:
            await h.get_ers("arc")
        except NotFound:
            return True
        return False

    await eventually(gone, what="the set to go once its busy runner finished", timeout=60)
    assert h.registered() == set()
    assert idle not in h.registered()


async def test_a_set_superseded_by_a_newer_set_of_its_scale_set_removes_its_idle_runners_and_creates_none(
    h: ControllerHarness,
) -> None:
    owner = await scale_set_owner(h)
    # ARC's old set, at the replica count its listener last asked for (a non-zero patch never scales down).
    await h.kube.create(EPHEMERAL_RUNNER_SETS, owned(h.ers_body("arc-runners-b9d4q", replicas=2, patch_id=5), owner))
    old = await h.wait_running(2)
    assert (await h.get_ers("arc-runners-b9d4q"))["metadata"]["finalizers"] == [EPHEMERAL_RUNNER_SET_FINALIZER]
    busy = old[0]["metadata"]["name"]
    await h.make_busy(busy)

    # The scale set's current set appears (ARC stopped before deleting the old one). Made within the same
    # second as the old one, the newer set is told apart by its name (controllers/runner_sets.py).
    await h.kube.create(EPHEMERAL_RUNNER_SETS, owned(h.ers_body("arc-runners-x7k2p", replicas=1, patch_id=0), owner))

    def old_set_drained(runners: list[dict[str, Any]]) -> bool:
        by_set = [r for r in runners if r["metadata"]["ownerReferences"][0]["name"] == "arc-runners-b9d4q"]
        return names(by_set) == {busy} and len(by_set) == 1

    await h.wait_runners(old_set_drained, what="the old set to keep only its busy runner", timeout=60)
    new = await h.wait_runners(
        lambda rs: len([r for r in rs if r["metadata"]["ownerReferences"][0]["name"] == "arc-runners-x7k2p"]) == 1,
        what="the current set's runner",
    )
    assert len(new) == 2
