"""Deleting an AutoscalingRunnerSet removes everything it made, in the cluster and on the (simulated) GitHub."""

from __future__ import annotations

from arc_scaleset.api import keys
from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.kube import resources
from arc_scaleset_lab.harness.system import System
from tests.e2e.harness import ScaleSetFactory


async def test_deleting_the_scale_set_cleans_up_everything_here_and_on_github(
    system: System, scale_set: ScaleSetFactory
) -> None:
    runners = await scale_set.create(min_runners=2, max_runners=5, credentials="app")
    ready = await runners.wait_ready()
    listener, scale_set_id = ready.listener_name, ready.scale_set_id
    assert listener is not None
    assert scale_set_id is not None
    await runners.enqueue(2, duration=2.0)
    await runners.assert_every_job_ran_once(timeout=60)

    await runners.delete()

    kube, ns, controller_ns = system.kube, runners.namespace, system.controller_namespace
    prefix = f"{runners.name}-runner-"

    async def leftovers() -> list[str]:
        found: list[str] = []
        for resource, namespace, names in (
            (EPHEMERAL_RUNNER_SETS, ns, {runners.name}),
            (EPHEMERAL_RUNNERS, ns, None),
            (resources.PODS, ns, None),
            (resources.SECRETS, ns, None),
            (AUTOSCALING_LISTENERS, controller_ns, {listener}),
            (resources.PODS, controller_ns, {listener}),
            (resources.SECRETS, controller_ns, {f"{listener}-config", f"{listener}-proxy"}),
            (resources.SERVICE_ACCOUNTS, controller_ns, {listener}),
            (resources.ROLES, ns, {listener}),
            (resources.ROLE_BINDINGS, ns, {listener}),
        ):
            for item in (await kube.list(resource, namespace=namespace)).items:
                name = item["metadata"]["name"]
                if (names is not None and name in names) or (names is None and name.startswith(prefix)):
                    found.append(f"{resource.kind} {namespace}/{name}")
        return found

    async def nothing_left() -> bool:
        return not await leftovers()

    await runners.wait_until(nothing_left, timeout=30, what="no objects of the deleted scale set")
    assert not await leftovers()

    secret = await kube.get(resources.SECRETS, f"{runners.name}-github-app", namespace=ns)
    assert keys.CLEANUP_PROTECTION_FINALIZER not in (secret["metadata"].get("finalizers") or [])
    assert scale_set_id not in {s["id"] for s in await system.sim.scale_sets()}, "the scale set is gone on GitHub"
    assert not [r for r in await system.sim.runners() if r["runnerScaleSetId"] == scale_set_id]
    assert not [s for s in await system.sim.sessions() if s["scaleSetId"] == scale_set_id]
