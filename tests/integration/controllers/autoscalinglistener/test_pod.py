"""The listener pod on the real control plane (ARC #4635 and beyond): server defaults never recreate it,
a changed config Secret and a removed port do, and a failing listener is recreated with growing backoff. Its config
Secret is read once per change, and put back at once when someone else changes or deletes it (child_secrets.py)."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import pytest

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.listener_state import ListenerPhase
from arc_scaleset.api.naming import listener_proxy_secret_name
from arc_scaleset.kube import resources
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.node.runner_pods import terminated_status
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster


def al_reconciles(env: ControllerHarness) -> float:
    return sum(
        env.manager.metrics.reconcile_total.labels(controller="autoscalinglistener", result=r)._value.get()
        for r in ("success", "requeue_after", "error")
    )


async def poke_listener(env: ControllerHarness, name: str, times: int) -> None:
    """Make the listener controller reconcile ``times`` more (an annotation on the listener) and wait."""
    for i in range(times):
        before = al_reconciles(env)
        await env.kube.patch(AUTOSCALING_LISTENERS, name, {"metadata": {"annotations": {"test/poke": str(i)}}},
                             namespace=env.controller_namespace)  # fmt: skip

        async def advanced(before: float = before) -> bool:
            return al_reconciles(env) > before

        await eventually(advanced, "another listener reconcile")


async def started(env: ControllerHarness, **spec: Any) -> tuple[str, dict[str, Any]]:
    await env.create_ars(**spec)
    ars = await eventually(env.running, "Running")
    name = env.listener_name(ars)

    async def running_pod() -> dict[str, Any] | None:
        pod = await env.listener_pod(name)
        return pod if pod is not None and (pod.get("status") or {}).get("phase") == "Running" else None

    return name, await eventually(running_pod, "a running listener pod")


async def replaced(env: ControllerHarness, name: str, old_uid: str) -> dict[str, Any] | None:
    pod = await env.listener_pod(name)
    return pod if pod is not None and pod["metadata"]["uid"] != old_uid else None


async def running_replacement(env: ControllerHarness, name: str, old_uid: str) -> dict[str, Any] | None:
    pod = await replaced(env, name, old_uid)
    return pod if pod is not None and (pod.get("status") or {}).get("phase") == "Running" else None


async def test_server_defaults_never_recreate_the_listener_pod(start_env: EnvFactory) -> None:
    async with start_env() as env:
        name, pod = await started(env)
        assert pod["spec"].get("dnsPolicy")
        assert pod["spec"].get("schedulerName")
        await poke_listener(env, name, 5)
        current = await env.listener_pod(name)
        events = await env.events(regarding=name, namespace=env.controller_namespace)
        events += await env.events(regarding="arc-runners")
        notes = [(e.get("reason"), e.get("note")) for e in events]
        assert current is not None, notes
        assert current["metadata"]["uid"] == pod["metadata"]["uid"], notes


async def test_a_changed_github_secret_updates_the_config_and_restarts_the_listener(start_env: EnvFactory) -> None:
    async with start_env() as env:
        name, pod = await started(env)
        rotated = "ghp_rotated_token"
        env.sim.credentials.add_token(rotated)
        await env.kube.patch(resources.SECRETS, "gh-secret", {"stringData": {"github_token": rotated}},
                             namespace=env.namespace)  # fmt: skip
        await poke_listener(env, name, 1)
        new_pod = await eventually(lambda: replaced(env, name, pod["metadata"]["uid"]), "a new listener pod")
        config = await env.get(resources.SECRETS, f"{name}-config", env.controller_namespace)
        assert config is not None
        assert (
            new_pod["metadata"]["annotations"]["actions.github.com/listener-config-resource-version"]
            == (config["metadata"]["resourceVersion"])
        )
        await env.wait_for_event("ListenerPodRecreating", regarding=name, namespace=env.controller_namespace)


def config_secret_gets(env: ControllerHarness) -> int:
    """GETs of Secrets in the controller namespace (where the listener's config Secret is)."""
    return env.kube.namespace_request_counts[("get", resources.SECRETS.plural, env.controller_namespace)]


async def test_passes_of_a_listener_read_its_config_secret_once_per_change(start_env: EnvFactory) -> None:
    async with start_env() as env:
        name, pod = await started(env)
        assert env.al_reconciler is not None
        secrets = env.al_reconciler.children.secrets
        await eventually(lambda: secrets.reuses > 0, "a pass that finds its config Secret as it left it")

        gets, reuses = config_secret_gets(env), secrets.reuses
        await poke_listener(env, name, 5)
        assert secrets.reuses >= reuses + 5
        assert config_secret_gets(env) == gets, "a pass of an unchanged listener read its config Secret"
        current = await env.listener_pod(name)
        assert current is not None
        assert current["metadata"]["uid"] == pod["metadata"]["uid"]


async def test_passes_of_a_listener_behind_a_proxy_read_neither_its_secrets_nor_the_proxys_credentials(
    start_env: EnvFactory,
) -> None:
    # The proxy's credentials are read once per change the referenced-object watch sees, as the GitHub
    # credentials are (controllers/referenced_data.py), and the listener's proxy Secret is checked, not read.
    proxy = {"https": {"url": "http://proxy.example:3128", "credentialSecretRef": "proxy-credentials"}}
    async with start_env() as env:
        await env.create_secret("proxy-credentials", {"username": "proxy-user", "password": "proxy-pass"})
        name, _ = await started(env, proxy=proxy)
        assert env.al_reconciler is not None
        secrets = env.al_reconciler.children.secrets
        await eventually(lambda: secrets.reuses > 0, "a pass that finds its Secrets as it left them")

        def secret_gets() -> tuple[int, int]:
            counts = env.kube.namespace_request_counts
            return config_secret_gets(env), counts[("get", resources.SECRETS.plural, env.namespace)]

        gets, reuses = secret_gets(), secrets.reuses
        await poke_listener(env, name, 5)
        assert secrets.reuses >= reuses + 10, "each pass checks the config and the proxy Secret"
        assert secret_gets() == gets, "a pass of an unchanged listener behind a proxy read a Secret"
        proxy_secret = await env.get(resources.SECRETS, listener_proxy_secret_name(name), env.controller_namespace)
        assert proxy_secret is not None
        assert "proxy-user" in base64.b64decode(proxy_secret["data"]["https_proxy"]).decode()


async def test_a_config_secret_changed_or_deleted_by_hand_is_put_back_at_once(start_env: EnvFactory) -> None:
    # The listener's periodic pass is an hour away: only the watch of its Secret can bring it back in time.
    async with start_env(scale_set_verify_interval=3600) as env:
        name, pod = await started(env)
        secret_name, namespace = f"{name}-config", env.controller_namespace
        original = await env.get(resources.SECRETS, secret_name, namespace)
        assert original is not None
        assert env.al_reconciler is not None
        secrets = env.al_reconciler.children.secrets
        queued = secrets.changes_queued
        await env.kube.patch(resources.SECRETS, secret_name, {"data": {"config.json": "e30="}}, namespace=namespace)

        async def put_back() -> dict[str, Any] | None:
            secret = await env.get(resources.SECRETS, secret_name, namespace)
            return secret if secret is not None and secret["data"] == original["data"] else None

        # The change queued the listener (a pass of the listener's own settling may have got there first).
        await eventually(lambda: secrets.changes_queued > queued, "the change to queue the listener")
        await eventually(put_back, "the config Secret's data put back")
        # The config the old pod was started with is not what it reads now: the listener restarts.
        new_pod = await eventually(lambda: replaced(env, name, pod["metadata"]["uid"]), "a new listener pod")

        queued = secrets.changes_queued
        await env.kube.delete(resources.SECRETS, secret_name, namespace=namespace)
        await eventually(lambda: secrets.changes_queued > queued, "the deletion to queue the listener")
        recreated = await eventually(put_back, "the deleted config Secret made again")
        assert recreated["metadata"]["uid"] != original["metadata"]["uid"]
        await eventually(lambda: replaced(env, name, new_pod["metadata"]["uid"]), "the listener restarted again")


async def test_a_removed_metrics_port_recreates_the_listener_pod(start_env: EnvFactory) -> None:
    async with start_env(cleanup=False) as env:
        name, pod = await started(env)
        assert pod["spec"]["containers"][0]["ports"][0]["name"] == "metrics"
    # The controller restarts with listener metrics turned off: the port must go, so must the pod.
    async with start_env(secret=False, listener_metrics_addr="0") as env:
        new_pod = await eventually(lambda: replaced(env, name, pod["metadata"]["uid"]), "a pod without the port")
        # Only the liveness probe's own port remains (the listener serves /healthz without metrics too).
        assert [port["name"] for port in new_pod["spec"]["containers"][0].get("ports") or []] == ["probes"]


async def listener_condition(env: ControllerHarness, name: str, type: str) -> dict[str, Any]:
    listener = await env.listener(name)
    assert listener is not None, f"AutoscalingListener {name} is gone"
    return get_condition((listener.get("status") or {}).get("conditions"), type) or {}


async def test_a_failing_listener_is_recreated_with_growing_backoff(start_env: EnvFactory) -> None:
    async with start_env() as env:
        name, pod = await started(env)

        async def ready_and_healthy() -> bool:
            ready = await listener_condition(env, name, "Ready")
            degraded = await listener_condition(env, name, "Degraded")
            return ready.get("status") == "True" and degraded.get("status") == "False"

        # No listener process runs here: report for it that it polls (what makes a running listener Ready).
        await env.report_listener_state(ListenerPhase.POLLING, session="5e5510e0-0000-4000-8000-0000000000f1")
        await eventually(ready_and_healthy, "Ready=True and Degraded=False on the running listener")
        for failures in ("failed once;", "failed 2 times in a row;", "failed 3 times in a row;"):
            patch = terminated_status(pod, exit_code=1, now=dt.datetime.now(dt.UTC))
            await env.kube.patch(resources.PODS, name, patch, namespace=env.controller_namespace, subresource="status")

            async def degraded(failures: str = failures) -> dict[str, Any] | None:
                found = await listener_condition(env, name, "Degraded")
                counted = found.get("status") == "True" and failures in found.get("message", "")
                return found if counted else None

            # The condition stays True from the failure until a replacement runs (at least the backoff delay).
            condition = await eventually(degraded, f"Degraded=True counting {failures}")
            assert condition["reason"] == "ListenerFailing"
            assert "(backoff up to 8s)" in condition["message"], condition
            # Failed only once kwok ran it: kwok's own "Running" patch, landing after ours, would undo the failure.
            pod = await eventually(
                lambda uid=pod["metadata"]["uid"]: running_replacement(env, name, uid), "a running replacement pod"
            )
        # The third failure waits 4s; its restart is announced in the message.
        assert "restarted after 4s" in condition["message"] or "next restart in 4s" in condition["message"], condition
        await env.report_listener_state(ListenerPhase.POLLING, session="5e5510e0-0000-4000-8000-0000000000f2")
        await eventually(ready_and_healthy, "Degraded to clear once the replacement runs")
        recovered = await listener_condition(env, name, "Degraded")
        assert recovered["reason"] == "ListenerHealthy"
        assert "it had failed 3 times in a row" in recovered["message"]

        events = await env.events(regarding=name, namespace=env.controller_namespace)
        notes = sorted(e["note"] for e in events if e.get("reason") == "ListenerFailed")
        assert any("recreating it in 1s (failure 1 in a row)" in n for n in notes), notes
        assert any("recreating it in 2s (failure 2 in a row)" in n for n in notes), notes
        assert any("recreating it in 4s (failure 3 in a row)" in n for n in notes), notes
        ars_reasons = await env.event_reasons(regarding="arc-runners")
        assert "ListenerFailed" in ars_reasons


async def test_a_listener_that_ended_after_a_healthy_run_is_replaced_at_once_and_the_count_starts_over(
    start_env: EnvFactory,
) -> None:
    """Issue 30: a listener killed after it worked for a while is not crash-looping (restart.py, HEALTHY_RUN)."""
    async with start_env() as env:
        name, pod = await started(env)
        running = pod["status"]["containerStatuses"][0]["state"]["running"]
        # Ended a minute after it started (a kill): the failure is counted without a backoff.
        ended = dt.datetime.fromisoformat(running["startedAt"].replace("Z", "+00:00")) + dt.timedelta(seconds=60)
        patch = terminated_status(pod, exit_code=1, now=ended)
        await env.kube.patch(resources.PODS, name, patch, namespace=env.controller_namespace, subresource="status")
        replacement = await eventually(
            lambda: running_replacement(env, name, pod["metadata"]["uid"]), "a running replacement pod"
        )
        # A replacement that fails at once is a crash: the backoff counts it from its base (1 s here).
        patch = terminated_status(replacement, exit_code=1, now=dt.datetime.now(dt.UTC))
        await env.kube.patch(resources.PODS, name, patch, namespace=env.controller_namespace, subresource="status")
        await eventually(
            lambda: running_replacement(env, name, replacement["metadata"]["uid"]), "a second running replacement"
        )

        events = await env.events(regarding=name, namespace=env.controller_namespace)
        notes = [e["note"] for e in events if e.get("reason") == "ListenerFailed"]
        assert any(n.endswith("recreating it now (it ran 60s: not a crash loop)") for n in notes), notes
        assert any(n.endswith("recreating it in 1s (failure 1 in a row)") for n in notes), notes
