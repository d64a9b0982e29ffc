"""A scale-down of many idle runners with GitHub App credentials, against the real control plane, the simulated
GitHub and kwok pods (issue 20): the runners are removed from GitHub several at a time, every one is gone in
the end, each is removed once, by the set (its own deletion path knows the set's removal and does not ask
again, nor on every event), and the App's private key was parsed once for the whole scale-up and scale-down.
The runners, their pods and their JIT Secrets are deleted in batches, one request per kind, except runners
without an instance label (made by ARC), which are deleted one by one."""

from __future__ import annotations

import base64
import collections
from collections.abc import AsyncIterator
from typing import Any

import pytest

import arc_scaleset.controllers.ephemeralrunner.deletion as deletion_module
import arc_scaleset.controllers.ephemeralrunnerset.cleanup as cleanup_module
import arc_scaleset.github.credentials as credentials_module
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.keys import LABEL_RUNNER_INSTANCE
from arc_scaleset.controllers.runner_github import Removal, remove_registration
from arc_scaleset.github import ActionsClient
from arc_scaleset.github.rs256 import load_pem_private_key
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.resources import SECRETS
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import harness, runner_template

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

APP_SECRET = "github-app"
RUNNERS = 12
CONCURRENCY = 4


class Spies:
    """Counts App key parses, how many scale-down removals of the set are under way at once, and the removals
    each runner's own deletion path asks for."""

    def __init__(self) -> None:
        self.key_loads = 0
        self.removals = self.under_way = self.most_at_once = 0
        self.runner_removals: collections.Counter[int] = collections.Counter()

    def load_key(self, data: bytes) -> Any:
        self.key_loads += 1
        return load_pem_private_key(data)

    async def remove(self, client: ActionsClient, runner_id: int) -> Removal:
        self.removals += 1
        self.under_way += 1
        self.most_at_once = max(self.most_at_once, self.under_way)
        try:
            return await remove_registration(client, runner_id)
        finally:
            self.under_way -= 1

    async def remove_by_runner(self, client: ActionsClient, runner_id: int) -> Removal:
        self.runner_removals[runner_id] += 1
        return await remove_registration(client, runner_id)


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> Spies:
    spied = Spies()
    monkeypatch.setattr(credentials_module, "load_pem_private_key", spied.load_key)
    monkeypatch.setattr(cleanup_module, "remove_registration", spied.remove)
    monkeypatch.setattr(deletion_module, "remove_registration", spied.remove_by_runner)
    return spied


@pytest.fixture
async def h(kube: KubeClient, namespace: str, crds_installed: list[str]) -> AsyncIterator[ControllerHarness]:
    async with harness(kube, namespace) as running:
        app = running.sim.credentials.add_app(app_id=77, installation_ids=[78])
        assert app.private_key_pem is not None
        fields = {
            "github_app_id": "77",
            "github_app_installation_id": "78",
            "github_app_private_key": app.private_key_pem,
        }
        await kube.create(SECRETS, {
            "metadata": {"name": APP_SECRET, "namespace": namespace},
            "data": {key: base64.b64encode(value.encode()).decode() for key, value in fields.items()},
        })  # fmt: skip
        await running.start(runner_create_concurrency=CONCURRENCY)
        yield running


async def test_a_scale_down_of_idle_runners_removes_them_concurrently_and_parses_the_app_key_once(
    h: ControllerHarness, spies: Spies
) -> None:
    await h.create_ers(replicas=RUNNERS, patch_id=0, secret=APP_SECRET)
    runners = await h.wait_running(RUNNERS)
    assert h.registered() == {r["metadata"]["name"] for r in runners}
    await h.wait_cached(runners)  # every runner ID known to the set's pass, as in a scale-down that comes later

    await h.patch_ers(replicas=0, patchID=0)

    await h.wait_runners(lambda rs: rs == [], what="every runner deleted")
    assert h.registered() == set()
    assert spies.removals == RUNNERS
    assert 1 < spies.most_at_once <= CONCURRENCY
    # GitHub confirmed each removal to the set: the runners' deletion paths did not ask again (ARC does).
    assert not spies.runner_removals
    # Counted as GitHub sees them, not by status: a repeated removal would answer 204 like the first.
    assert len([r for r in h.sim.requests if r.route == "remove_runner"]) == RUNNERS
    # One client for the set and its runners: registrations and removals reuse it.
    assert spies.key_loads == 1


async def _jit_secrets(h: ControllerHarness, runner_names: set[str]) -> set[str]:
    return {s["metadata"]["name"] for s in (await h.kube.list(SECRETS, namespace=h.namespace)).items} & runner_names


async def _scale_to_zero(h: ControllerHarness, names: set[str]) -> collections.Counter[tuple[str, str]]:
    """Scale the set to 0, wait until no runner, pod or JIT Secret of ``names`` is left; the requests sent."""
    before = collections.Counter(h.kube.request_counts)
    await h.patch_ers(replicas=0, patchID=0)
    await h.wait_runners(lambda rs: rs == [], what="every runner deleted")

    async def nothing_left() -> bool:
        pods = {p["metadata"]["name"] for p in await h.pods()} & names
        return not pods and not await _jit_secrets(h, names)

    await eventually(nothing_left, timeout=30, what="no runner pod nor JIT Secret left")
    return collections.Counter(h.kube.request_counts) - before


async def test_a_scale_down_deletes_runners_pods_and_jit_secrets_in_batches(h: ControllerHarness, spies: Spies) -> None:
    await h.create_ers(replicas=RUNNERS, patch_id=0, secret=APP_SECRET)
    runners = await h.wait_running(RUNNERS)
    names = {r["metadata"]["name"] for r in runners}
    assert await _jit_secrets(h, names) == names
    await h.wait_cached(runners)
    sent = await _scale_to_zero(h, names)
    # One request per kind for the whole batch, where one per runner and kind was sent before (4 writes per
    # runner in all): the runners' own deletion paths waited for the batch and deleted nothing themselves.
    assert sent[("deletecollection", "ephemeralrunners")] == 1
    assert sent[("delete", "ephemeralrunners")] == 0
    assert sent[("deletecollection", "pods")] == sent[("deletecollection", "secrets")] == 1
    assert sent[("delete", "pods")] == sent[("delete", "secrets")] == 0
    assert h.registered() == set()


async def test_runners_without_an_instance_label_are_still_deleted_one_by_one(
    h: ControllerHarness, spies: Spies
) -> None:
    """Runners ARC created (adopted after a migration) carry no instance label: they cannot be named in a batch."""
    await h.create_ers(replicas=RUNNERS, patch_id=0, secret=APP_SECRET)
    runners = await h.wait_running(RUNNERS)
    names = {r["metadata"]["name"] for r in runners}
    unlabelled = sorted(names)[: RUNNERS // 2]
    patched = [
        await h.kube.patch(
            EPHEMERAL_RUNNERS, name, {"metadata": {"labels": {LABEL_RUNNER_INSTANCE: None}}}, namespace=h.namespace
        )
        for name in unlabelled
    ]
    await h.wait_cached([runner for runner in runners if runner["metadata"]["name"] not in unlabelled] + patched)
    sent = await _scale_to_zero(h, names)
    assert sent[("delete", "ephemeralrunners")] == len(unlabelled)
    assert sent[("deletecollection", "ephemeralrunners")] == 1
    assert h.registered() == set()


async def test_pods_whose_template_overrides_the_instance_label_are_still_deleted(
    h: ControllerHarness, spies: Spies
) -> None:
    """A batch names runners by their instance label; a pod template that sets the same label on every pod
    makes the batch miss their pods (and never match a pod of another runner): each runner's own deletion path
    then deletes its pod."""
    template = runner_template()
    template["metadata"] = {"labels": {LABEL_RUNNER_INSTANCE: "set-by-the-template"}}
    await h.create_ers(replicas=RUNNERS // 2, patch_id=0, secret=APP_SECRET, template=template)
    names = {r["metadata"]["name"] for r in await h.wait_running(RUNNERS // 2)}
    assert {p["metadata"]["labels"][LABEL_RUNNER_INSTANCE] for p in await h.pods()} == {"set-by-the-template"}
    sent = await _scale_to_zero(h, names)
    assert sent[("deletecollection", "ephemeralrunners")] == 1
    assert sent[("delete", "pods")] == len(names)
