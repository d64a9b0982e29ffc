"""The standby listener on the real control plane, the controller's side (docs/controllers.md, "Standby listener";
issue 30): two pods told their Lease and peer, the Lease and the Role that lets the pair use them and nothing
else, ``Ready`` from the Lease holder, each pod replaced on its own, and one pod again once the standby is given up.
No listener process runs here: the test holds the Lease as a listener would, with the listener's own credentials."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.keys import LABEL_SCALE_SET_NAME
from arc_scaleset.api.listener_standby import ANNOTATION_STANDBY, PEER_POD_ENV, STANDBY_LEASE_ENV
from arc_scaleset.api.listener_state import ListenerPhase
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.errors import Forbidden
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.helm import service_account_kubeconfig
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.node.runner_pods import terminated_status
from arc_scaleset_lab.sim import SimulatedGitHub
from tests.integration.controllers.autoscalinglistener.test_pod import poke_listener
from tests.integration.controllers.autoscalinglistener.test_tenancy import (
    degraded,
    exists,
    listener_controller_only,
)
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    PAT,
    UID_ANNOTATION,
    EnvFactory,
    controller_namespace_fixture,
    listener_by_hand,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

STANDBY = {ANNOTATION_STANDBY: "true"}


async def create_standby_ars(env: ControllerHarness, name: str = "arc-runners") -> str:
    """A scale set asking for a standby; the name of its listener once the set runs."""
    body = env.ars_body(name)
    body["metadata"]["annotations"] = dict(STANDBY)
    await env.kube.create(AUTOSCALING_RUNNER_SETS, body, namespace=env.namespace)
    ars = await eventually(lambda: env.running(name), f"{name} Running")
    return env.listener_name(ars)


def is_running(pod: dict[str, Any] | None) -> bool:
    return (
        pod is not None
        and (pod.get("status") or {}).get("phase") == "Running"
        and not pod["metadata"].get("deletionTimestamp")
    )


async def running_pair(env: ControllerHarness, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    async def both() -> tuple[dict[str, Any], dict[str, Any]] | None:
        first, second = await env.listener_pod(name), await env.listener_pod(f"{name}-standby")
        return (first, second) if is_running(first) and is_running(second) else None

    pair = await eventually(both, "two running listener pods")
    assert pair is not None
    return pair


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {env["name"]: env.get("value", "") for env in pod["spec"]["containers"][0]["env"]}


async def as_listener(
    kube: KubeClient, cluster: TestCluster, env: ControllerHarness, name: str, tmp: Path
) -> KubeClient:
    """A client with the listener's ServiceAccount's credentials, as in its pod."""
    config = await service_account_kubeconfig(kube, cluster.kubeconfig, env.controller_namespace, name, tmp)
    return KubeClient.from_kubeconfig(config)


async def hold_lease(client: KubeClient, env: ControllerHarness, lease_name: str, holder: str) -> dict[str, Any]:
    """What a listener taking over does: ``update`` the Lease with itself as the holder."""
    lease = await client.get(resources.LEASES, lease_name, namespace=env.controller_namespace)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease["spec"].update({"holderIdentity": holder, "acquireTime": now, "renewTime": now})
    return await client.replace(resources.LEASES, lease)


async def ready(env: ControllerHarness, name: str) -> dict[str, Any] | None:
    listener = await env.listener(name)
    found = get_condition(((listener or {}).get("status") or {}).get("conditions"), "Ready") or {}
    return found if found.get("status") == "True" else None


async def test_a_standby_listener_runs_two_pods_with_its_lease_and_is_ready_from_the_holder(
    start_env: EnvFactory, kube: KubeClient, cluster: TestCluster, tmp_path: Path
) -> None:
    async with start_env() as env:
        name = await create_standby_ars(env)
        first, second = await running_pair(env, name)
        assert (env_of(first)[STANDBY_LEASE_ENV], env_of(first)[PEER_POD_ENV]) == (name, f"{name}-standby")
        assert (env_of(second)[STANDBY_LEASE_ENV], env_of(second)[PEER_POD_ENV]) == (name, name)
        lease = await env.get(resources.LEASES, name, env.controller_namespace)
        assert lease is not None
        assert "holderIdentity" not in lease["spec"]
        listener = await env.listener(name)
        assert listener is not None
        assert [ref["uid"] for ref in lease["metadata"]["ownerReferences"]] == [listener["metadata"]["uid"]]

        client = await as_listener(kube, cluster, env, name, tmp_path)
        try:
            await hold_lease(client, env, name, f"{name}-standby")
        finally:
            await client.close()
        await env.report_listener_state(ListenerPhase.POLLING)
        condition = await eventually(lambda: ready(env, name), "Ready from the Lease holder")
        assert condition is not None
        assert f"listener pod {name}-standby" in condition["message"]
        assert f"holds Lease {name}" in condition["message"]
        assert f"standby pod {name} is ready" in condition["message"]


async def test_passes_of_a_listener_with_a_standby_read_its_lease_from_the_watch_not_the_api_server(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        name = await create_standby_ars(env)
        await running_pair(env, name)
        leases = env.al_reconciler.standby_leases if env.al_reconciler is not None else None
        assert leases is not None
        await eventually(lambda: leases.resource_version(name), "the watch to show the pair's Lease")

        def lease_requests() -> tuple[int, int]:
            counts, namespace = env.kube.namespace_request_counts, env.controller_namespace
            plural = resources.LEASES.plural
            return counts[("get", plural, namespace)], counts[("patch", plural, namespace)]

        before = lease_requests()
        await poke_listener(env, name, 5)
        assert lease_requests() == before, "a pass of a listener with a standby read (or wrote) its Lease"


async def test_the_status_follows_a_takeover_and_a_release_of_the_lease_without_a_pod_event(
    start_env: EnvFactory, kube: KubeClient, cluster: TestCluster, tmp_path: Path
) -> None:
    async with start_env() as env:
        name = await create_standby_ars(env)
        await running_pair(env, name)
        client = await as_listener(kube, cluster, env, name, tmp_path)
        try:
            await hold_lease(client, env, name, name)
            await env.report_listener_state(ListenerPhase.POLLING)

            async def ready_with(standby: str) -> dict[str, Any] | None:
                condition = await ready(env, name)
                return condition if condition and f"standby pod {standby} is ready" in condition["message"] else None

            await eventually(lambda: ready_with(f"{name}-standby"), f"Ready naming {name} active")
            # The standby takes the Lease over: the pods, the listener and its state stay as they are.
            await hold_lease(client, env, name, f"{name}-standby")
            condition = await eventually(lambda: ready_with(name), f"Ready naming {name}-standby active")
            assert condition is not None
            assert f"listener pod {name}-standby" in condition["message"]
            # Released (a SIGTERMed holder): nobody holds the session.
            await hold_lease(client, env, name, "")

            async def no_active() -> dict[str, Any] | None:
                listener = await env.listener(name)
                found = get_condition(((listener or {}).get("status") or {}).get("conditions"), "Ready") or {}
                return found if found.get("reason") == "NoActiveListener" else None

            await eventually(no_active, "Ready False: NoActiveListener")
        finally:
            await client.close()


async def test_a_failed_active_pod_is_replaced_while_its_peer_keeps_running(
    start_env: EnvFactory, kube: KubeClient, cluster: TestCluster, tmp_path: Path
) -> None:
    async with start_env() as env:
        name = await create_standby_ars(env)
        active, peer = await running_pair(env, name)
        client = await as_listener(kube, cluster, env, name, tmp_path)
        try:
            await hold_lease(client, env, name, name)
        finally:
            await client.close()
        patch = terminated_status(active, exit_code=137, now=dt.datetime.now(dt.UTC))
        await env.kube.patch(resources.PODS, name, patch, namespace=env.controller_namespace, subresource="status")

        async def replacement() -> dict[str, Any] | None:
            pod = await env.listener_pod(name)
            return pod if is_running(pod) and pod["metadata"]["uid"] != active["metadata"]["uid"] else None

        await eventually(replacement, "a new first pod")
        still = await env.listener_pod(f"{name}-standby")
        assert still is not None
        assert still["metadata"]["uid"] == peer["metadata"]["uid"]
        assert is_running(still)


async def test_the_listener_can_watch_its_peer_and_hold_its_lease_and_nothing_of_another_listener(
    start_env: EnvFactory, kube: KubeClient, cluster: TestCluster, tmp_path: Path
) -> None:
    async with start_env() as env:
        name = await create_standby_ars(env)
        other = await create_standby_ars(env, "other-runners")
        await running_pair(env, name)
        await running_pair(env, other)
        client = await as_listener(kube, cluster, env, name, tmp_path)
        ns = env.controller_namespace
        try:
            for pod in (name, f"{name}-standby"):
                assert (await client.get(resources.PODS, pod, namespace=ns))["metadata"]["name"] == pod
                # What the listener does to see its peer die: a watch of that one pod, by name.
                events = client.watch(resources.PODS, namespace=ns, field_selector=f"metadata.name={pod}",
                                      timeout_seconds=1, allow_bookmarks=False)  # fmt: skip
                seen = [event.object["metadata"]["name"] async for event in events]
                assert seen == [pod]
            await hold_lease(client, env, name, name)
            for forbidden in (
                client.get(resources.PODS, other, namespace=ns),
                client.get(resources.PODS, f"{other}-standby", namespace=ns),
                client.get(resources.LEASES, other, namespace=ns),
                hold_lease(client, env, other, name),
                client.list(resources.PODS, namespace=ns),
                client.delete(resources.PODS, f"{name}-standby", namespace=ns),
            ):
                with pytest.raises(Forbidden):
                    await forbidden
        finally:
            await client.close()


async def test_giving_up_the_standby_goes_back_to_one_pod(start_env: EnvFactory) -> None:
    async with start_env() as env:
        name = await create_standby_ars(env)
        await running_pair(env, name)
        patch = {"metadata": {"annotations": {ANNOTATION_STANDBY: None}}}
        await env.kube.patch(AUTOSCALING_RUNNER_SETS, "arc-runners", patch, namespace=env.namespace)
        ns = env.controller_namespace

        async def one_pod() -> bool:
            listener = await env.listener(name)
            pod = await env.listener_pod(name)
            gone = [
                await env.get(resources.PODS, f"{name}-standby", ns),
                await env.get(resources.LEASES, name, ns),
                await env.get(resources.ROLES, f"{name}-standby", ns),
                await env.get(resources.ROLE_BINDINGS, f"{name}-standby", ns),
            ]
            alone = listener is not None and ANNOTATION_STANDBY not in listener["metadata"].get("annotations", {})
            return alone and is_running(pod) and STANDBY_LEASE_ENV not in env_of(pod or {}) and gone == [None] * 4

        await eventually(one_pod, "one listener pod, no standby objects", timeout=60)


async def test_a_new_config_recreates_the_pair_one_pod_at_a_time(start_env: EnvFactory) -> None:
    """A rotated credential recreates both pods, the standby first, the holder once its peer runs again: at every
    event of the two pods, as the API server ordered them, one of them runs."""
    async with start_env() as env:
        name = await create_standby_ars(env)
        pods = (name, f"{name}-standby")
        first, second = await running_pair(env, name)
        await hold_lease(env.kube, env, name, name)
        ns = env.controller_namespace
        listed = await env.kube.list(resources.PODS, namespace=ns)
        serving = {pod: is_running(pod_obj) for pod, pod_obj in zip(pods, (first, second), strict=True)}
        history: list[dict[str, bool]] = []

        async def follow() -> None:
            async for event in env.kube.watch(resources.PODS, namespace=ns, resource_version=listed.resource_version):
                pod_name = event.object.get("metadata", {}).get("name")
                if pod_name in serving:
                    serving[pod_name] = event.type != "DELETED" and is_running(event.object)
                    history.append(dict(serving))

        watching = asyncio.create_task(follow())
        try:
            rotated = "ghp_rotated_for_standby"
            env.sim.credentials.add_token(rotated)
            await env.kube.patch(resources.SECRETS, "gh-secret", {"stringData": {"github_token": rotated}},
                                 namespace=env.namespace)  # fmt: skip

            async def both_replaced() -> bool:
                now = [await env.listener_pod(pod) for pod in pods]
                new = all(p is not None and p["metadata"]["uid"] not in olds for p in now)
                return new and all(is_running(p) for p in now)

            olds = {first["metadata"]["uid"], second["metadata"]["uid"]}
            await eventually(both_replaced, "both pods recreated and running", timeout=90)
        finally:
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching
        assert history, "no pod event seen"
        assert all(any(state.values()) for state in history), history
        went_down_first = next(pod for state in history for pod in pods if not state[pod])
        assert went_down_first == f"{name}-standby", history


async def test_a_refused_standby_listener_has_both_pods_withdrawn(
    kube: KubeClient, namespace: str, controller_namespace: str, sim: SimulatedGitHub, crds_installed: list[str]
) -> None:
    """A listener its scale set no longer vouches for (another UID) gets no pod: neither of the pair."""
    await kube.create(resources.SECRETS, {"metadata": {"name": "gh-secret"}, "stringData": {"github_token": PAT}},
                      namespace=namespace)  # fmt: skip
    # Labelled as the scale set's controller labels it: its pods carry it, and the controller caches pods by it.
    labels = {LABEL_SCALE_SET_NAME: "arc-runners"}
    async with (
        listener_by_hand(kube, namespace, controller_namespace, sim, annotations=STANDBY, labels=labels) as listener,
        listener_controller_only(kube, namespace, controller_namespace),
    ):
        name = listener["metadata"]["name"]
        pods = (name, f"{name}-standby")

        async def pods_exist() -> list[bool]:
            return [await exists(kube, resources.PODS, pod, controller_namespace) for pod in pods]

        await kube.create(AUTOSCALING_LISTENERS, listener, namespace=controller_namespace)
        await eventually(lambda: all_of(pods_exist()), "both listener pods")
        patch = {"metadata": {"annotations": {UID_ANNOTATION: "00000000-0000-0000-0000-000000000000"}}}
        await kube.patch(AUTOSCALING_LISTENERS, name, patch, namespace=controller_namespace)
        await eventually(lambda: degraded(kube, controller_namespace, name, "NotOwnedByScaleSet"), "the refusal")
        await eventually(lambda: none_of(pods_exist()), "neither pod left")


async def all_of(found: Awaitable[list[bool]]) -> bool:
    return all(await found)


async def none_of(found: Awaitable[list[bool]]) -> bool:
    return not any(await found)
