"""No silent failure and no destructive step before the failing one (issue 26, item 10), on the real control
plane: a scale set whose every pass fails on an API server refusal says so in ``Degraded`` and a Warning Event,
both taken back when it succeeds again; a takeover whose runner set refuses the new listener's writes keeps
ARC's listener running and says why.

The refusal is the cluster's own: a ValidatingAdmissionPolicy that refuses any change of the test's
EphemeralRunnerSets' ``spec`` (metadata and status writes pass), as a policy engine or an old schema would."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import ANNOTATION_RUNNER_SPEC_HASH
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.errors import Invalid, NotFound
from arc_scaleset.kube.resources import Resource
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.harness.arc_install import ArcInstaller
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    PAT,
    RUNNER_TEMPLATE,
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

POLICIES = Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
                    "ValidatingAdmissionPolicy", namespaced=False)  # fmt: skip
BINDINGS = Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
                    "ValidatingAdmissionPolicyBinding", namespaced=False)  # fmt: skip
FROZEN = "the test freezes the spec of this EphemeralRunnerSet"


@contextlib.asynccontextmanager
async def runner_set_specs_frozen(kube: KubeClient, namespace: str, probe: str) -> AsyncIterator[None]:
    """Every change of an EphemeralRunnerSet's ``spec`` in ``namespace`` refused (422) while the block runs; in
    effect once a dry-run spec write of the set ``probe`` is refused."""
    name = f"{namespace}-frozen"
    await kube.create(POLICIES, {
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["actions.github.com"], "apiVersions": ["*"],
                                                    "operations": ["UPDATE"], "resources": ["ephemeralrunnersets"]}]},
            "validations": [{"expression": "object.spec == oldObject.spec", "message": FROZEN}],
        },
    })  # fmt: skip
    await kube.create(BINDINGS, {
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}},
    })  # fmt: skip

    async def refused() -> bool:
        ers = await kube.get(EPHEMERAL_RUNNER_SETS, probe, namespace=namespace)
        patch = {"spec": {"patchID": int(ers["spec"].get("patchID") or 0) + 1}}
        try:
            await kube.patch(EPHEMERAL_RUNNER_SETS, probe, patch, namespace=namespace, dry_run=True)
        except Invalid:
            return True
        return False

    try:
        await eventually(refused, "the policy to refuse spec writes")
        yield
    finally:
        for resource in (BINDINGS, POLICIES):
            await kube.delete(resource, name, missing_ok=True)


async def condition(env: ControllerHarness, type: str, status: str, reason: str | None = None) -> dict[str, Any] | None:
    found = get_condition(((await env.ars()).get("status") or {}).get("conditions"), type)
    if found is None or found["status"] != status or (reason is not None and found["reason"] != reason):
        return None
    return found


async def event(env: ControllerHarness, kind: str, reason: str) -> dict[str, Any] | None:
    for item in await env.events(regarding="arc-runners"):
        if item.get("type") == kind and item.get("reason") == reason:
            return item
    return None


async def strip_runner_set_finalizers(kube: KubeClient, namespace: str) -> None:
    """ARC's finalizer on its set: no EphemeralRunnerSet controller runs here to remove it."""
    for item in (await kube.list(EPHEMERAL_RUNNER_SETS, namespace=namespace)).items:
        with contextlib.suppress(NotFound):
            await kube.patch(EPHEMERAL_RUNNER_SETS, ObjectView(item).name, {"metadata": {"finalizers": None}},
                             namespace=namespace)  # fmt: skip


async def test_a_pass_that_keeps_failing_is_degraded_with_a_warning_and_both_clear_once_it_succeeds(
    start_env: EnvFactory, kube: KubeClient
) -> None:
    async with start_env() as env:
        await env.create_ars()
        await eventually(env.running, "the scale set to run")
        async with runner_set_specs_frozen(kube, env.namespace, "arc-runners"):
            template = {**RUNNER_TEMPLATE, "metadata": {"labels": {"revision": "2"}}}
            await kube.patch(AUTOSCALING_RUNNER_SETS, "arc-runners", {"spec": {"template": template}},
                             namespace=env.namespace)  # fmt: skip
            # The revision bump of every pass is refused: the scale set says so, with the API server's words.
            degraded = await eventually(lambda: condition(env, "Degraded", "True", "Invalid"), "Degraded=True")
            assert FROZEN in degraded["message"]
            assert "no problem found" not in degraded["message"]
            warning = await eventually(lambda: event(env, "Warning", "Invalid"), "a Warning Event")
            assert FROZEN in warning["note"]
            ready = await condition(env, "Ready", "False")
            assert ready is not None

        await eventually(lambda: condition(env, "Degraded", "False"), "Degraded back to False")
        await eventually(lambda: event(env, "Normal", "ReconcileRecovered"), "a ReconcileRecovered Event")
        ers = await env.ers()
        assert ers is not None
        assert ers["spec"]["actionableRevision"] == 1, "the change the policy held back is applied"


async def test_a_takeover_whose_runner_set_refuses_spec_writes_keeps_arcs_listener_and_says_why(
    start_env: EnvFactory, kube: KubeClient, namespace: str, controller_namespace: str, sim: Any
) -> None:
    installer = ArcInstaller(kube, controller_namespace=controller_namespace, config_url=sim.config_url("org"),
                             token=PAT, namespace=namespace)  # fmt: skip
    arc = await installer.install("arc-runners", secret="gh-secret", min_runners=0, max_runners=3,
                                  template=RUNNER_TEMPLATE)  # fmt: skip
    runner_set = await installer.add_runner_set(arc)
    listener = await installer.add_listener(arc)
    arcs_listener_uid = arc.uids[f"AutoscalingListener/{listener}"]

    async with contextlib.AsyncExitStack() as stack:
        # The policy is in force before the controller first sees the scale set.
        frozen = contextlib.AsyncExitStack()
        await frozen.enter_async_context(runner_set_specs_frozen(kube, namespace, runner_set))
        stack.push_async_callback(frozen.aclose)
        env = await stack.enter_async_context(start_env())
        # Before the scale set's deletion: no EphemeralRunnerSet controller runs here to drain ARC's set.
        stack.push_async_callback(strip_runner_set_finalizers, kube, namespace)

        refused = await eventually(lambda: condition(env, "Degraded", "True", "AdoptionRefused"),
                                   "an AdoptionRefused condition")  # fmt: skip
        assert runner_set in refused["message"]
        assert f"ARC's listener {listener} is kept running" in refused["message"]
        assert FROZEN in refused["message"]
        await eventually(lambda: event(env, "Warning", "AdoptionRefused"), "an AdoptionRefused Warning Event")
        live = await env.listener(listener)
        assert live is not None
        assert ObjectView(live).uid == arcs_listener_uid
        assert not ObjectView(live).is_deleting, "ARC's listener is not deleted while the set refuses writes"

        await frozen.aclose()

        async def replaced() -> dict[str, Any] | None:
            found = await env.listener(listener)
            ours = found is not None and ObjectView(found).uid != arcs_listener_uid
            return found if ours and ANNOTATION_RUNNER_SPEC_HASH not in ObjectView(found).annotations else None

        await eventually(replaced, "ARC's listener replaced by this controller's", timeout=60)
