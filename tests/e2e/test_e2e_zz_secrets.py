"""Runs last (file order): no process of the e2e system ever wrote a token, a private key, a JIT config, a
proxy password or a URL with a password to its log, nor did any reach what the API server shows a user
(Events, status conditions, annotations) in the test namespaces. (The ``system`` fixture checks the logs once
more after stopping every process.)"""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import quote

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.kube import resources
from arc_scaleset_lab.harness.secret_scan import find_leaks, find_leaks_in_objects
from arc_scaleset_lab.harness.system import System
from tests.e2e.conftest import SCALE_SET_NAMESPACE
from tests.e2e.harness import ScaleSetFactory

SHOWN_TO_USERS = (
    resources.EVENTS,
    resources.CORE_EVENTS,
    AUTOSCALING_RUNNER_SETS,
    EPHEMERAL_RUNNER_SETS,
    EPHEMERAL_RUNNERS,
    AUTOSCALING_LISTENERS,
    resources.PODS,
)


async def test_a_proxy_password_from_a_secret_reaches_the_listener_and_runners_but_no_log(
    system: System, scale_set: ScaleSetFactory
) -> None:
    """Runs before the scans below (file order): a scale set whose https proxy takes its credentials from a
    Kubernetes Secret. The password goes into the controller's proxy settings, the listener's proxy Secret and
    environment, and the runners'; the scans below then look for it, and for any URL with a password, in every
    log and in what users see. (The sim is on loopback, which is never proxied: the proxy is never dialled.)"""
    password = "pr0xy-" + secrets.token_hex(12)  # shaped like no credential: only the registries can mask it
    system.ledger.add(password, "a proxy password from a Kubernetes Secret")
    system.ledger.add(quote(password, safe=""), "a proxy password, percent-encoded")
    credentials = f"{scale_set.stem}-proxy-credentials"
    await system.kube.create(
        resources.SECRETS,
        {"metadata": {"name": credentials}, "stringData": {"username": "ops", "password": password}},
        namespace=SCALE_SET_NAMESPACE,
    )
    proxy = {"https": {"url": "http://proxy.invalid:3128", "credentialSecretRef": credentials}}
    handle = await scale_set.create(min_runners=1, max_runners=1, proxy=proxy)
    await handle.wait_ready(timeout=120)
    env = {e["name"]: e for pod in await _pods(system, SCALE_SET_NAMESPACE) for e in _env(pod)}
    assert "https_proxy" in env, "the runners got the proxy, credentials and all"


async def _pods(system: System, namespace: str) -> list[dict[str, Any]]:
    return (await system.kube.list(resources.PODS, namespace=namespace)).items


def _env(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for container in pod["spec"].get("containers", []) for e in container.get("env") or []]


async def test_no_process_logged_a_token_private_key_or_jit_config(system: System) -> None:
    described = set(system.ledger.values.values())
    assert "PAT" in described
    assert any(d.startswith("JIT config of") for d in described), "the run's JIT configs were recorded"
    logs = system.log_files()
    assert any(p.parent.name == "listeners" for p in logs), "listener logs are among those searched"

    leaks = find_leaks(logs, system.ledger)

    assert not leaks, "secrets found in logs:\n" + "\n".join(map(str, leaks[:20]))


async def test_no_event_condition_or_annotation_in_the_test_namespaces_carries_a_secret(system: System) -> None:
    objects: list[dict[str, Any]] = []
    for namespace in (SCALE_SET_NAMESPACE, system.controller_namespace):
        for resource in SHOWN_TO_USERS:
            listed = await system.kube.list(resource, namespace=namespace)
            objects.extend({"kind": resource.kind, **item} for item in listed.items)
    assert any(obj["kind"] == "Event" for obj in objects), "the run's Events are among those searched"

    leaks = find_leaks_in_objects(objects, system.ledger)

    assert not leaks, "secrets found in what users see:\n" + "\n".join(map(str, leaks[:20]))
