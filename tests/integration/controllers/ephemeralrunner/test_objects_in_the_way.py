"""A pod or Secret under a runner's name that the runner does not control (anyone who may create pods or Secrets
in the namespace can take the name first): the runner never follows the pod's state, never takes the Secret's
JIT config or runner ID, and deletes neither, also not when it is deleted itself. It names the object
(``ObjectInTheWay``: its status's reason and message, and a Warning Event) and tries again with backoff, and
gets its own once the object is gone (controllers/ephemeralrunner/ownership.py)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.cmd.controller_setup import CHILD_LABEL
from arc_scaleset.kube.resources import PODS, SECRETS
from arc_scaleset_lab.cluster.stages import EXIT_CODE_ANNOTATION, FINISH_ANNOTATION
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import SECRET_NAME, harness_fixture, runner_template  # noqa: F401

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

FOREIGN_RUNNER_ID = 777777


def runner_body(h: ControllerHarness, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        # The scale set's label, which its pod inherits: the controller caches only pods that carry it.
        "metadata": {"name": name, "labels": {CHILD_LABEL: "arc-runners"}},
        "spec": {
            "githubConfigUrl": h.config_url,
            "githubConfigSecret": SECRET_NAME,
            "runnerScaleSetId": h.scale_set_id,
            **runner_template(),
        },
    }


async def in_the_way(h: ControllerHarness, name: str, kind: str) -> dict[str, Any]:
    """Until runner ``name`` names the ``kind`` in its way in its status and in a Warning Event; its status."""

    async def named() -> dict[str, Any] | None:
        runner = await h.get(EPHEMERAL_RUNNERS, name)
        status = (runner or {}).get("status") or {}
        if status.get("reason") == "ObjectInTheWay" and f"{kind} {h.namespace}/{name}" in status.get("message", ""):
            return status
        return None

    status: dict[str, Any] = await eventually(named, f"the runner to name the {kind} in its way")

    async def warned() -> dict[str, Any] | None:
        found = [e for e in await h.events(regarding=name) if e.get("reason") == "ObjectInTheWay"]
        return found[0] if found else None

    event = await eventually(warned, "an ObjectInTheWay Event about the runner")
    assert event["type"] == "Warning"
    assert f"{kind} {h.namespace}/{name}" in event["note"]
    return status


async def runner_gone(h: ControllerHarness, name: str) -> None:
    await h.kube.delete(EPHEMERAL_RUNNERS, name, namespace=h.namespace)

    async def gone() -> bool:
        return await h.get(EPHEMERAL_RUNNERS, name) is None

    await eventually(gone, "the deleted runner to be gone (its finalizers dropped)")


async def test_a_finished_pod_someone_else_made_under_the_runners_name_is_neither_its_outcome_nor_deleted(
    h: ControllerHarness,
) -> None:
    name = "taken-pod"
    # Somebody's pod, with the scale set's label (so the controller's cache holds it), ends with exit code 0:
    # were it taken for the runner's pod, the runner would be Succeeded and deleted.
    theirs = await h.kube.create(
        PODS,
        {
            "metadata": {
                "name": name,
                "labels": {CHILD_LABEL: "someone"},
                "annotations": {FINISH_ANNOTATION: "succeeded", EXIT_CODE_ANNOTATION: "0"},
            },
            "spec": runner_template()["spec"],
        },
        namespace=h.namespace,
    )

    async def finished() -> bool:
        pod = await h.get(PODS, name)
        return ((pod or {}).get("status") or {}).get("phase") == "Succeeded"

    await eventually(finished, "their pod to finish")
    await h.start("EphemeralRunner")
    await h.kube.create(EPHEMERAL_RUNNERS, runner_body(h, name), namespace=h.namespace)

    status = await in_the_way(h, name, "Pod")
    assert status.get("phase") not in ("Succeeded", "Failed")
    assert name not in h.registered(), "a runner whose pod cannot be made is registered on GitHub"
    runner = await h.get(EPHEMERAL_RUNNERS, name)
    assert runner is not None
    assert not runner["metadata"].get("deletionTimestamp")

    # Deleting the runner leaves their pod alone.
    await runner_gone(h, name)
    pod = await h.get(PODS, name)
    assert pod is not None
    assert pod["metadata"]["uid"] == theirs["metadata"]["uid"]
    assert not pod["metadata"].get("deletionTimestamp")


def foreign_jit_secret(name: str) -> dict[str, Any]:
    data = {"jitToken": "somebody-elses-jit-config", "runnerName": name, "runnerId": str(FOREIGN_RUNNER_ID)}
    return {
        "metadata": {"name": name},
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()},
    }


async def test_a_secret_someone_else_made_under_the_runners_name_is_never_its_jit_config_and_never_deleted(
    h: ControllerHarness,
) -> None:
    name = "taken-secret"
    theirs = await h.kube.create(SECRETS, foreign_jit_secret(name), namespace=h.namespace)
    await h.start("EphemeralRunner")
    await h.kube.create(EPHEMERAL_RUNNERS, runner_body(h, name), namespace=h.namespace)

    status = await in_the_way(h, name, "Secret")
    assert status.get("runnerId") != FOREIGN_RUNNER_ID
    # The pod sent with the runner's own Secret is taken back: it would have started with their JIT config.
    await eventually(lambda: no_pod(h, name), "no pod that names their Secret")
    secret = await h.get(SECRETS, name)
    assert secret is not None
    assert secret["metadata"]["uid"] == theirs["metadata"]["uid"]

    # Their Secret goes: the runner registers and runs with a Secret of its own.
    await h.kube.delete(SECRETS, name, namespace=h.namespace)

    async def running() -> dict[str, Any] | None:
        runner = await h.get(EPHEMERAL_RUNNERS, name)
        status = (runner or {}).get("status") or {}
        return runner if status.get("phase") == "Running" and status.get("runnerId") else None

    runner = await eventually(running, "the runner to run once their Secret is gone", timeout=90)
    assert runner["status"]["runnerId"] != FOREIGN_RUNNER_ID
    assert runner["status"].get("reason") != "ObjectInTheWay"
    own = await h.get(SECRETS, name)
    assert own is not None
    assert own["metadata"]["ownerReferences"][0]["uid"] == runner["metadata"]["uid"]


async def no_pod(h: ControllerHarness, name: str) -> bool:
    return await h.get(PODS, name) is None


async def test_deleting_a_runner_leaves_a_secret_someone_else_made_under_its_name(h: ControllerHarness) -> None:
    name = "taken-secret-deleted"
    theirs = await h.kube.create(SECRETS, foreign_jit_secret(name), namespace=h.namespace)
    await h.start("EphemeralRunner")
    await h.kube.create(EPHEMERAL_RUNNERS, runner_body(h, name), namespace=h.namespace)

    async def finalized() -> bool:
        runner = await h.get(EPHEMERAL_RUNNERS, name)
        return len((runner or {}).get("metadata", {}).get("finalizers") or []) == 2

    # Deleted as soon as the controller has taken it on (its finalizers), whatever it has found meanwhile.
    await eventually(finalized, "the runner's finalizers")
    await runner_gone(h, name)
    secret = await h.get(SECRETS, name)
    assert secret is not None
    assert secret["metadata"]["uid"] == theirs["metadata"]["uid"]
    assert not secret["metadata"].get("deletionTimestamp")
