"""The listener's health as its controllers show it, and the convergences that used to wait for a 5-minute timer
(issue 15, items 8 and 9), on the real control plane with the two controllers running in-process.

No listener process runs here: each test writes on the EphemeralRunnerSet what a listener writes about itself
(``ControllerHarness.report_listener_state``), the one input the controllers have. Real listener processes, with
faults injected at the simulated GitHub, are in tests/e2e/test_e2e_listener_health.py.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from arc_scaleset.api.listener_state import SCALE_SET_NOT_FOUND, ListenerPhase
from arc_scaleset.api.naming import listener_config_secret_name
from arc_scaleset.kube import resources
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.node.runner_pods import terminated_status
from tests.integration.controllers.autoscalingrunnerset.test_revisions import more_reconciles
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

WITHIN = 10.0
"""Seconds within which the controllers must show what the listener reported (issue 15)."""


async def running_listener(env: ControllerHarness, **spec: Any) -> tuple[str, dict[str, Any]]:
    """A Running scale set's listener name and its running pod."""
    await env.create_ars(**spec)
    ars = await eventually(env.running, "Running")
    name = env.listener_name(ars)

    async def running_pod() -> dict[str, Any] | None:
        pod = await env.listener_pod(name)
        return pod if pod is not None and (pod.get("status") or {}).get("phase") == "Running" else None

    return name, await eventually(running_pod, "a running listener pod")


async def condition(env: ControllerHarness, name: str, type_: str) -> dict[str, Any]:
    listener = await env.listener(name)
    assert listener is not None, f"AutoscalingListener {name} is gone"
    return get_condition((listener.get("status") or {}).get("conditions"), type_) or {}


async def scale_set_condition(env: ControllerHarness, type_: str) -> dict[str, Any]:
    return get_condition(((await env.ars()).get("status") or {}).get("conditions"), type_) or {}


def with_status(status: str, reason: str | None = None) -> Any:
    def matches(found: dict[str, Any]) -> dict[str, Any] | None:
        ok = found.get("status") == status and (reason is None or found.get("reason") == reason)
        return found if ok else None

    return matches


async def events(env: ControllerHarness, name: str, reason: str) -> list[dict[str, Any]]:
    found = await env.events(regarding=name, namespace=env.controller_namespace)
    return [event for event in found if event.get("reason") == reason]


async def test_a_listener_that_reports_failing_polls_is_not_ready_within_seconds_and_events_mark_the_outage(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        name, _ = await running_listener(env)
        await env.report_listener_state(ListenerPhase.POLLING)
        ready = await eventually(lambda: _ready(env, name, "True"), "Ready=True once the listener polls")
        assert ready["reason"] == "ListenerRunning"
        await eventually(lambda: _scale_set_ready(env, "True"), "the scale set Ready")

        await env.report_listener_state(ListenerPhase.FAILING, error="TransientError")
        failing = await eventually(lambda: _ready(env, name, "False"), "Ready=False", timeout=WITHIN)
        assert failing["reason"] == "Failing"
        assert "GitHub failed or gave an unusable answer (TransientError)" in failing["message"]
        degraded = await condition(env, name, "Degraded")
        assert (degraded["status"], degraded["reason"]) == ("True", "ListenerOffline")
        offline = await eventually(lambda: events(env, name, "ListenerOffline"), "an Event marking the outage")
        assert offline[0]["type"] == "Warning"
        # The scale set says so too, where users look first.
        scale_set_ready = await eventually(lambda: _scale_set_ready(env, "False"), "the scale set not Ready")
        assert scale_set_ready["reason"] == "Failing"
        assert (await scale_set_condition(env, "Degraded"))["reason"] == "ListenerOffline"
        await env.wait_for_event("ListenerOffline", regarding="arc-runners")

        await env.report_listener_state(ListenerPhase.POLLING, session="5e5510e0-0000-4000-8000-000000000001")
        await eventually(lambda: _ready(env, name, "True"), "Ready=True again", timeout=WITHIN)
        online = await eventually(lambda: events(env, name, "ListenerOnline"), "an Event marking the outage's end")
        assert online[0]["type"] == "Normal"
        assert "the listener is online again after" in online[0]["note"]
        assert len(await events(env, name, "ListenerOffline")) == 1, "one Event per outage"
        await eventually(lambda: _scale_set_ready(env, "True"), "the scale set Ready again")
        assert (await condition(env, name, "Degraded"))["status"] == "False"


async def test_a_listener_without_a_session_is_not_ready_and_says_who_holds_it(start_env: EnvFactory) -> None:
    async with start_env() as env:
        name, _ = await running_listener(env)
        await env.report_listener_state(ListenerPhase.WAITING_FOR_SESSION, error="SessionConflict", session=None)
        waiting = await eventually(lambda: _ready(env, name, "False", "WaitingForSession"), "WaitingForSession")
        assert "another message session holds the scale set (SessionConflict)" in waiting["message"]
        # Never ready before: a listener that starts is not in an outage.
        assert (await condition(env, name, "Degraded"))["status"] == "False"


async def test_a_killed_listeners_last_word_does_not_make_its_replacement_ready(start_env: EnvFactory) -> None:
    async with start_env() as env:
        name, pod = await running_listener(env)
        await env.report_listener_state(ListenerPhase.POLLING, session="5e5510e0-0000-4000-8000-00000000000b")
        await eventually(lambda: _ready(env, name, "True"), "Ready=True")

        # SIGKILL: the container ends with 137, and the listener never writes that it stopped.
        patch = terminated_status(pod, exit_code=137, now=dt.datetime.now(dt.UTC))
        await env.kube.patch(resources.PODS, name, patch, namespace=env.controller_namespace, subresource="status")
        await eventually(lambda: _ready(env, name, "False"), "Ready=False after the kill", timeout=WITHIN)

        async def replacement_starting() -> dict[str, Any] | None:
            new = await env.listener_pod(name)
            if new is None or new["metadata"]["uid"] == pod["metadata"]["uid"]:
                return None
            return await _ready(env, name, "False", "ListenerStarting")

        starting = await eventually(replacement_starting, "the replacement to wait for its listener's word")
        assert "waiting for the listener to report its state" in starting["message"]
        assert (await condition(env, name, "Degraded"))["reason"] == "ListenerOffline", "still the same outage"

        await env.report_listener_state(ListenerPhase.POLLING, session="5e5510e0-0000-4000-8000-00000000000a")
        await eventually(lambda: _ready(env, name, "True"), "Ready=True once the replacement polls", timeout=WITHIN)
        online = await eventually(lambda: events(env, name, "ListenerOnline"), "the outage's end")
        assert "after" in online[0]["note"]


async def test_a_scale_set_its_listener_finds_gone_on_github_is_registered_again_at_once(
    start_env: EnvFactory,
) -> None:
    # The periodic verification is 5 minutes away: only the listener's report can make this fast.
    async with start_env(scale_set_verify_interval=300.0) as env:
        await env.create_ars()
        ars = await eventually(env.running, "Running")
        old_id = int(ars["metadata"]["annotations"]["runner-scale-set-id"])
        env.sim.state.delete_scale_set(None, old_id)
        await env.report_listener_state(ListenerPhase.STOPPED, error=SCALE_SET_NOT_FOUND)

        async def registered_again() -> int | None:
            annotations = (await env.ars())["metadata"]["annotations"]
            new_id = int(annotations.get("runner-scale-set-id") or 0)
            return new_id if new_id and new_id != old_id else None

        new_id = await eventually(registered_again, "a new scale set ID", timeout=WITHIN)
        assert [s.id for s in env.sim.state.scale_sets.values()] == [new_id]
        await env.wait_for_event("ScaleSetReRegistered", regarding="arc-runners")


async def test_a_report_about_a_scale_set_that_still_exists_is_verified_once_and_never_re_registers_it(
    start_env: EnvFactory,
) -> None:
    async with start_env(scale_set_verify_interval=300.0) as env:
        await env.create_ars()
        ars = await eventually(env.running, "Running")
        scale_set_id = ars["metadata"]["annotations"]["runner-scale-set-id"]

        def verifications() -> int:
            return sum(1 for record in env.sim.requests if record.route == "get_scale_set")

        await eventually(lambda: env.listener(env.listener_name(ars)), "the listener")
        await more_reconciles(env, 2)
        before = verifications()
        await env.report_listener_state(ListenerPhase.STOPPED, error=SCALE_SET_NOT_FOUND)
        await eventually(lambda: verifications() > before, "the scale set verified", timeout=WITHIN)
        verified = verifications()
        # Every listener patch of the set brings the scale set back to its controller; one report, one check.
        await more_reconciles(env, 3)
        assert verifications() == verified
        assert (await env.ars())["metadata"]["annotations"]["runner-scale-set-id"] == scale_set_id
        assert [str(s.id) for s in env.sim.state.scale_sets.values()] == [scale_set_id]


async def test_a_rotated_credentials_secret_is_in_the_listeners_config_within_seconds(start_env: EnvFactory) -> None:
    async with start_env(scale_set_verify_interval=300.0) as env:
        name, _ = await running_listener(env)
        config_secret = listener_config_secret_name(name)
        await eventually(lambda: listener_controller_idle(env, name), "the listener controller to have nothing to do")
        env.sim.credentials.add_token("ghp_rotated_token_0123456789")
        await env.kube.patch(
            resources.SECRETS,
            "gh-secret",
            {"stringData": {"github_token": "ghp_rotated_token_0123456789"}},
            namespace=env.namespace,
        )

        async def rotated() -> bool:
            return (await _config(env, config_secret)).get("github_token") == "ghp_rotated_token_0123456789"

        await eventually(rotated, "the rotated token in the listener's config", timeout=WITHIN)

        async def pod_restarted_on_it() -> bool:
            pod = await env.listener_pod(name)
            secret = await env.get(resources.SECRETS, config_secret, env.controller_namespace)
            annotation = "actions.github.com/listener-config-resource-version"
            return bool(pod and secret and pod["metadata"]["annotations"].get(annotation) == secret["metadata"][
                "resourceVersion"])  # fmt: skip

        # The pod's replacement takes a deletion and a creation more than the config: a looser bound.
        await eventually(pod_restarted_on_it, "the listener pod to run on the new config", timeout=3 * WITHIN)


async def test_a_rotated_ca_config_map_is_in_the_listeners_config_within_seconds(start_env: EnvFactory) -> None:
    async with start_env(scale_set_verify_interval=300.0) as env:
        first, second = _certificate("first-ca"), _certificate("second-ca")
        await env.kube.create(
            resources.CONFIG_MAPS,
            {"metadata": {"name": "github-ca"}, "data": {"ca.crt": first}},
            namespace=env.namespace,
        )
        tls = {"certificateFrom": {"configMapKeyRef": {"name": "github-ca", "key": "ca.crt"}}}
        name, _ = await running_listener(env, githubServerTLS=tls)
        config_secret = listener_config_secret_name(name)
        assert (await _config(env, config_secret)).get("server_root_ca") == first
        await eventually(lambda: listener_controller_idle(env, name), "the listener controller to have nothing to do")

        await env.kube.patch(resources.CONFIG_MAPS, "github-ca", {"data": {"ca.crt": second}}, namespace=env.namespace)

        async def rotated() -> bool:
            return (await _config(env, config_secret)).get("server_root_ca") == second

        await eventually(rotated, "the new CA in the listener's config", timeout=WITHIN)


# -- helpers ----------------------------------------------------------------------------------------------------


async def listener_controller_idle(env: ControllerHarness, name: str) -> bool:
    """The listener's controller has seen the listener as the API has it, and no reconcile is queued or running: a
    later change is reacted to only if something watched reports it (not thanks to a pass that happened anyway)."""
    live = await env.listener(name)
    cached = env.al_reconciler.listeners.get(env.controller_namespace, name)
    controller = next(c for c in env.manager.controllers if c.name == "autoscalinglistener")
    return (
        live is not None
        and cached is not None
        and cached["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
        and controller.queue.processing == 0
        and len(controller.queue) == 0
    )


async def _ready(env: ControllerHarness, name: str, status: str, reason: str | None = None) -> dict[str, Any] | None:
    found: dict[str, Any] | None = with_status(status, reason)(await condition(env, name, "Ready"))
    return found


async def _scale_set_ready(env: ControllerHarness, status: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = with_status(status)(await scale_set_condition(env, "Ready"))
    return found


async def _config(env: ControllerHarness, secret_name: str) -> dict[str, Any]:
    secret = await env.get(resources.SECRETS, secret_name, env.controller_namespace)
    if secret is None:
        return {}
    config: dict[str, Any] = json.loads(base64.b64decode(secret["data"]["config.json"]))
    return config


def _certificate(common_name: str) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM).decode()
