"""Runs last (file order): no process of the e2e system ever wrote a token, a private key or a JIT config
to its log, nor did any reach what the API server shows a user (Events, status conditions, annotations) in
the test namespaces. (The ``system`` fixture checks the logs once more after stopping every process.)"""

from __future__ import annotations

from typing import Any

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.kube import resources
from arc_scaleset_lab.harness.secret_scan import find_leaks, find_leaks_in_objects
from arc_scaleset_lab.harness.system import System
from tests.e2e.conftest import SCALE_SET_NAMESPACE

SHOWN_TO_USERS = (
    resources.EVENTS,
    resources.CORE_EVENTS,
    AUTOSCALING_RUNNER_SETS,
    EPHEMERAL_RUNNER_SETS,
    EPHEMERAL_RUNNERS,
    AUTOSCALING_LISTENERS,
    resources.PODS,
)


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
