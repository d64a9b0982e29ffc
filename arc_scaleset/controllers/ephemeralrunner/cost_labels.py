"""Cost attribution: a busy runner's pod labelled with the repository, workflow and job it runs (docs/controllers.md).

Cost tools (OpenCost, Kubecost) split a cluster's cost by pod labels. Once the listener has recorded a job on an
EphemeralRunner's status (``jobRepositoryName``, ``jobWorkflowRef``, ``jobDisplayName``), the runner controller
puts them on the runner's pod under :data:`COST_PREFIX`:

- labels, made safe for label values by :func:`label_value` (what cost tools group by);
- annotations with the same keys and the exact values (what a person reads; annotations take any text).

The decision is pure (:func:`cost_metadata`, :func:`cost_patch`); :func:`label_pod_for_cost` is the one call the
reconciler makes with a pod in hand. A patch it sent is not sent again for the same pod while the cache does not
show it yet (the runner's memory keeps the last one: the job's status write and the pod's own events bring
passes that read the pod from before the patch; issue 30). It is off with ``--runner-cost-labels=false`` (the chart's
``flags.runnerCostLabels``) for users who do not want repository names on pods.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from arc_scaleset.api.naming import fnv32a
from arc_scaleset.api.views import EphemeralRunnerView
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunner.memory import RunnerMemory
from arc_scaleset.kube.client import PatchType
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.resources import PODS
from arc_scaleset.kube.views import ObjectView

COST_PREFIX: Final = "cost.arc-scaleset.dev/"
LABEL_REPOSITORY: Final = COST_PREFIX + "repository"
LABEL_OWNER: Final = COST_PREFIX + "owner"
LABEL_WORKFLOW: Final = COST_PREFIX + "workflow"
LABEL_JOB: Final = COST_PREFIX + "job"
COST_KEYS: Final = (LABEL_OWNER, LABEL_REPOSITORY, LABEL_WORKFLOW, LABEL_JOB)

MAX_LABEL_VALUE: Final = 63
MAX_ANNOTATION_VALUE: Final = 1024
"""The exact values are capped too: a job name is whatever a workflow author wrote."""

_ILLEGAL = re.compile(r"[^A-Za-z0-9._-]+")
_EDGES = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")
_HASH_SUFFIX_LEN: Final = 9  # "-" and 8 hex digits


def label_value(text: str) -> str:
    """``text`` as a valid Kubernetes label value (``""`` when nothing usable is left).

    Runs of illegal characters become one ``_``; leading and trailing non-alphanumerics are dropped; a value
    longer than 63 characters is cut and ends with ``-`` and 8 hex digits of a hash of the whole text, so two
    long names that share a prefix keep distinct values. Deterministic: the same name always gives the same value.
    """
    value = _EDGES.sub("", _ILLEGAL.sub("_", text))
    if len(value) <= MAX_LABEL_VALUE:
        return value
    head = _EDGES.sub("", value[: MAX_LABEL_VALUE - _HASH_SUFFIX_LEN])
    return f"{head}-{fnv32a(text.encode('utf-8')):08x}"


def workflow_name(workflow_ref: str, repository: str) -> str:
    """The workflow's file path from a ``jobWorkflowRef`` (``owner/repo/.github/workflows/ci.yml@refs/heads/main``
    gives ``ci.yml``); the ref itself when it has another shape."""
    path = workflow_ref.split("@", 1)[0]
    if repository and path.startswith(repository + "/"):
        path = path[len(repository) + 1 :]
    return path.rsplit("/", 1)[-1] if path.startswith(".github/workflows/") else path


def cost_metadata(status: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The cost labels and annotations for a runner whose status is ``status``; both empty without a job."""
    repository = str(status.get("jobRepositoryName") or "")
    if not repository:
        return {}, {}
    owner, _, _ = repository.partition("/")
    exact = {
        LABEL_OWNER: owner,
        LABEL_REPOSITORY: repository,
        LABEL_WORKFLOW: workflow_name(str(status.get("jobWorkflowRef") or ""), repository),
        LABEL_JOB: str(status.get("jobDisplayName") or ""),
    }
    labels = {key: label_value(value) for key, value in exact.items()}
    annotations = {key: value[:MAX_ANNOTATION_VALUE] for key, value in exact.items() if value}
    return {key: value for key, value in labels.items() if value}, annotations


def cost_patch(er: Mapping[str, Any], pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that puts ``er``'s cost metadata on ``pod``; ``None`` when it is there already or the
    runner has no job. Keys the pod carries that the job does not give are removed (``null``)."""
    labels, annotations = cost_metadata(EphemeralRunnerView(er).status)
    if not annotations:
        return None
    meta = ObjectView(pod)
    metadata: dict[str, Any] = {}
    for field, wanted, current in (
        ("labels", labels, meta.labels),
        ("annotations", annotations, meta.annotations),
    ):
        change = {key: wanted.get(key) for key in COST_KEYS if current.get(key) != wanted.get(key)}
        if change:
            metadata[field] = change
    return {"metadata": metadata} if metadata else None


async def label_pod_for_cost(
    ctx: ControllerContext, er: Mapping[str, Any], pod: Mapping[str, Any], memory: RunnerMemory
) -> None:
    """Patch ``pod`` with ``er``'s cost metadata when it is turned on and missing, unless ``memory`` (the runner's)
    shows this very patch sent to this pod already. A pod already gone is fine (the runner's next pass sees
    why); other errors fail the pass, which is retried."""
    view = ObjectView(pod)
    if not ctx.settings.runner_cost_labels or view.is_deleting:
        return
    patch = cost_patch(er, pod)
    if patch is None or memory.cost_patch == (view.uid, patch):
        return
    try:
        await ctx.kube.patch(PODS, view.name, patch, namespace=view.namespace, patch_type=PatchType.MERGE)
    except NotFound:
        return
    memory.cost_patch = (view.uid, patch)
