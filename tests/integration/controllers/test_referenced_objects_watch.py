"""The referenced Secrets of many listeners in one namespace are watched through one metadata-only watch with a
request budget of its own, against the real API server (issue 26, item 9: one informer per referenced object,
each relisting every 5 to 10 minutes on the controller's shared budget, used all of it with about 2,250
references, and after a failover their relists queued ahead of the reconciles)."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.naming import listener_config_secret_name
from arc_scaleset.controllers.referenced_objects import Reference, ReferencedObjectWatch
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Request
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.autoscalinglistener.test_health import _config, listener_controller_idle
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

TOKEN = "ghp_referenced_watch_token_never_received"
SECRETS_REFERENCED = 40


def secret(name: str, token: str = TOKEN) -> dict[str, Any]:
    return {"metadata": {"name": name}, "stringData": {"github_token": token}}


def listener_of(name: str) -> Request:
    return Request("arc-system", f"listener-of-{name}")


def secret_requests(kube: KubeClient, namespace: str) -> tuple[int, int]:
    """How many lists and watches of ``namespace``'s Secrets ``kube`` has sent (the client is shared by the tests
    of a run; the controller also watches the Secrets of its own namespace, which are not counted)."""
    counts = kube.namespace_request_counts
    return counts[("list", "secrets", namespace)], counts[("watch", "secrets", namespace)]


def since(before: tuple[int, int], kube: KubeClient, namespace: str) -> tuple[int, int]:
    lists, watches = secret_requests(kube, namespace)
    return lists - before[0], watches - before[1]


async def test_many_referenced_secrets_in_one_namespace_use_one_watch_and_a_change_still_queues_its_listener(
    kube: KubeClient, namespace: str
) -> None:
    names = [f"gh-secret-{number}" for number in range(SECRETS_REFERENCED)]
    for name in [*names, "not-referenced"]:
        await kube.create(resources.SECRETS, secret(name), namespace=namespace)
    before = secret_requests(kube, namespace)
    watch = ReferencedObjectWatch(kube)
    for name in [*names, "created-later"]:
        watch.track(listener_of(name), {Reference("Secret", namespace, name)})
    # A scale set whose listener does not exist yet holds its Secret: watched, but a change queues nothing.
    watch.hold(Request(namespace, "new-scale-set"), {Reference("Secret", namespace, "not-referenced")})
    queued: list[Request] = []
    watch.start(queued.append)
    try:
        # The watch starts once the list is applied: from then on a change is seen.
        await eventually(lambda: since(before, kube, namespace)[1], "the watch to start")
        assert queued == [], "the initial list queues nothing"

        await kube.patch(resources.SECRETS, "gh-secret-17", {"stringData": {"github_token": "ghp_rotated"}},
                         namespace=namespace)  # fmt: skip
        await eventually(lambda: queued == [listener_of("gh-secret-17")], "the rotated Secret's listener queued")
        await kube.patch(resources.SECRETS, "not-referenced", {"stringData": {"github_token": "ghp_other"}},
                         namespace=namespace)  # fmt: skip
        await kube.create(resources.SECRETS, secret("created-later"), namespace=namespace)
        await eventually(lambda: listener_of("created-later") in queued, "the created Secret's listener queued")
        await kube.delete(resources.SECRETS, "gh-secret-3", namespace=namespace)
        await eventually(lambda: listener_of("gh-secret-3") in queued, "the deleted Secret's listener queued")
        assert queued == [listener_of("gh-secret-17"), listener_of("created-later"), listener_of("gh-secret-3")], (
            "no listener for a Secret no listener references"
        )
        assert since(before, kube, namespace) == (1, 1), (
            f"{SECRETS_REFERENCED + 1} referenced Secrets in one namespace: one list and one watch"
        )
        assert watch.scopes == {("Secret", namespace)}
        assert watch.has_synced
    finally:
        await watch.stop()


async def test_the_watch_has_a_request_budget_of_its_own(cluster: TestCluster, namespace: str) -> None:
    # A client whose own budget is spent for the next 100 seconds: the watch must not wait for it.
    spent = KubeClient.from_kubeconfig(cluster.kubeconfig, qps=0.01, burst=1)
    try:
        await spent.create(resources.SECRETS, secret("gh-secret"), namespace=namespace)
        watch = ReferencedObjectWatch(spent)
        watch.track(listener_of("gh-secret"), {Reference("Secret", namespace, "gh-secret")})
        queued: list[Request] = []
        watch.start(queued.append)
        try:
            # A watch request is sent (and counted) only once a token is granted, after the list's.
            await eventually(lambda: spent.request_counts[("watch", "secrets")], "the watch to start on its own budget")
            assert watch.has_synced
        finally:
            await watch.stop()
    finally:
        await spent.close()


async def test_the_listeners_of_scale_sets_sharing_a_namespace_share_one_secret_watch_and_a_rotation_reaches_its_own(
    start_env: EnvFactory,
) -> None:
    rotated = "ghp_rotated_for_set_b_0123456789"
    async with start_env(scale_set_verify_interval=300.0) as env:
        before = secret_requests(env.kube, env.namespace)
        await env.create_secret("gh-secret-b")
        await env.create_ars("set-a")
        await env.create_ars("set-b", githubConfigSecret="gh-secret-b")
        first = await eventually(lambda: env.running("set-a"), "set-a Running")
        second = await eventually(lambda: env.running("set-b"), "set-b Running")
        listener_a, listener_b = env.listener_name(first), env.listener_name(second)
        referenced = {Reference("Secret", env.namespace, name) for name in ("gh-secret", "gh-secret-b")}
        await eventually(lambda: env.al_reconciler.references.watched == referenced, "both Secrets referenced")
        await eventually(lambda: listener_controller_idle(env, listener_b), "the listener controller to be idle")
        config_a = await _config(env, listener_config_secret_name(listener_a))

        env.sim.credentials.add_token(rotated)
        await env.kube.patch(resources.SECRETS, "gh-secret-b", {"stringData": {"github_token": rotated}},
                             namespace=env.namespace)  # fmt: skip

        async def rotated_in_b() -> bool:
            return (await _config(env, listener_config_secret_name(listener_b))).get("github_token") == rotated

        await eventually(rotated_in_b, "the rotated token in set-b's listener config", timeout=10.0)
        assert await _config(env, listener_config_secret_name(listener_a)) == config_a, "set-a's is untouched"
        assert since(before, env.kube, env.namespace) == (1, 1), "one list and one watch of the namespace's Secrets"
