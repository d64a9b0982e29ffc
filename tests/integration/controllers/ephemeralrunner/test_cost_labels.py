"""Cost labels on the real control plane: a busy runner's pod carries its job's repository, workflow and job,
as label values the API server accepts even for hostile names, and nothing of it when they are turned off."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.controllers.ephemeralrunner.cost_labels import (
    COST_KEYS,
    LABEL_JOB,
    LABEL_OWNER,
    LABEL_REPOSITORY,
    LABEL_WORKFLOW,
)
from arc_scaleset.controllers.ephemeralrunner.reconciler import EphemeralRunnerReconciler
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.resources import PODS
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import harness_fixture  # noqa: F401 - fixture
from tests.unit.controllers.ephemeralrunner.test_er_cost_labels import VALID_LABEL_VALUE

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

HOSTILE_OWNER = "-Ünïcode.org-"
HOSTILE_REPOSITORY = f"{HOSTILE_OWNER}/{'very-long-repository-name-' * 4}"
HOSTILE_JOB = "--build (matrix: ubuntu-latest, 3.12) 🚀 / deploy -- " + "x" * 80


def job_status(repository: str) -> dict[str, Any]:
    """The status fields the listener writes when its runner starts a job (listener/scaler.py)."""
    return {
        "jobRequestId": 41,
        "jobRepositoryName": repository,
        "jobId": "job-41",
        "workflowRunId": 7,
        "jobWorkflowRef": f"{repository}/.github/workflows/ci (nightly).yml@refs/heads/main",
        "jobDisplayName": HOSTILE_JOB,
    }


async def start_job(h: ControllerHarness) -> str:
    (er,) = await h.wait_running(1)
    name = str(er["metadata"]["name"])
    await h.kube.patch(EPHEMERAL_RUNNERS, name, {"status": job_status(HOSTILE_REPOSITORY)},
                       namespace=h.namespace, subresource="status")  # fmt: skip
    return name


async def test_a_busy_runners_pod_is_labelled_with_valid_values_for_hostile_names(h: ControllerHarness) -> None:
    await h.start()
    await h.create_ers(replicas=1, patch_id=0)
    name = await start_job(h)

    async def labelled() -> dict[str, Any] | None:
        pod = await h.kube.get(PODS, name, namespace=h.namespace)
        return pod if LABEL_REPOSITORY in (pod["metadata"].get("labels") or {}) else None

    pod = await eventually(labelled, timeout=30, what="the runner pod's cost labels")
    labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
    for key in (LABEL_OWNER, LABEL_REPOSITORY, LABEL_WORKFLOW, LABEL_JOB):
        assert VALID_LABEL_VALUE.match(labels[key]), (key, labels[key])
        assert 0 < len(labels[key]) <= 63, (key, labels[key])
    assert labels[LABEL_OWNER] == "n_code.org"
    assert labels[LABEL_WORKFLOW] == "ci_nightly_.yml"
    # The exact names, for people, in the annotations.
    assert annotations[LABEL_REPOSITORY] == HOSTILE_REPOSITORY
    assert annotations[LABEL_JOB] == HOSTILE_JOB
    assert annotations[LABEL_WORKFLOW] == "ci (nightly).yml"


async def test_no_cost_labels_when_they_are_turned_off(h: ControllerHarness) -> None:
    await h.start(runner_cost_labels=False)
    await h.create_ers(replicas=1, patch_id=0)
    name = await start_job(h)
    assert h.ctx is not None
    runners = h.ctx.cache(EPHEMERAL_RUNNERS)

    def job_in_cache() -> bool:
        er = runners.get(h.namespace, name)
        return er is not None and bool((er.get("status") or {}).get("jobRepositoryName"))

    await eventually(job_in_cache, timeout=30, what="the job in the controller's cache")
    # A pass that certainly sees the job (the running controller's own passes are not observable from here).
    await EphemeralRunnerReconciler(h.ctx).reconcile(Request(h.namespace, name))
    pod = await h.kube.get(PODS, name, namespace=h.namespace)
    metadata = pod["metadata"]
    assert not set(COST_KEYS) & {*(metadata.get("labels") or {}), *(metadata.get("annotations") or {})}
