"""The placeholder pod of a warm pool, and the bound on what one may reserve: pure.

A placeholder is inert: it sleeps in the runner image (so a real node pulls the image before the runner needs
it), asks for the runner's requests where the runner's pods may run, at a priority below every runner's (the
PriorityClass the controller chart creates: negative, ``preemptionPolicy: Never``), so the scheduler gives its
room to a runner pod at once. It runs with the Pod Security "restricted" settings, a fixed non-root user (the
image's own user may be root), no service-account token, no volumes, no service links, limits equal to its
requests, and a zero grace period (a preempted placeholder frees its room at once).

Placeholders live in the controller's namespace, outside every team's ResourceQuota: what one may reserve is
therefore bounded by the controller's flags (:func:`bound_violations`, as the listener pod's resources are).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from arc_scaleset.api.warm_capacity import ANNOTATION_WARM_SHAPE, LABEL_WARM_POOL
from arc_scaleset.controllers.warmcapacity.shape import RunnerShape
from arc_scaleset.kube.quantity import Quantity, parse_quantity

CONTAINER_NAME: Final = "placeholder"
PLACEHOLDER_USER: Final = 65532
SLEEP_COMMAND: Final = ("sleep", "infinity")
COMPONENT: Final = "warm-placeholder"


def placeholder_pod(
    *, name: str, namespace: str, shape: RunnerShape, priority_class: str, avoid_node: str | None = None
) -> dict[str, Any]:
    """The placeholder pod ``name`` of ``shape``'s pool; nothing in it comes from a runner template but the
    shape (requests, image, node selection). ``avoid_node``: the node a preempted predecessor held room on, which
    this one must not take back from the runner that preempted it (:func:`node_affinity`)."""
    spec: dict[str, Any] = {
        "priorityClassName": priority_class,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 0,
        "restartPolicy": "Always",
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": PLACEHOLDER_USER,
            "runAsGroup": PLACEHOLDER_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [_container(shape)],
    }
    if shape.node_selector:
        spec["nodeSelector"] = dict(shape.node_selector)
    if (affinity := node_affinity(shape.node_affinity_object(), avoid_node)) is not None:
        spec["affinity"] = {"nodeAffinity": affinity}
    if (tolerations := shape.toleration_list()) is not None:
        spec["tolerations"] = tolerations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                LABEL_WARM_POOL: shape.pool_id,
                "app.kubernetes.io/component": COMPONENT,
                "app.kubernetes.io/managed-by": "arc-scaleset",
            },
            "annotations": {ANNOTATION_WARM_SHAPE: shape.describe()},
        },
        "spec": spec,
    }


def _container(shape: RunnerShape) -> dict[str, Any]:
    """The one container: it sleeps in the runner image with the runner's requests, and may do nothing else."""
    requests = shape.requests_map()
    # Limits equal to the requests: what extended resources require anyway, and what keeps a LimitRange's default
    # limits (below a runner's requests, in a namespace sized for listeners) from making the pod invalid.
    resources: dict[str, Any] = {"requests": requests, "limits": dict(requests)} if requests else {}
    return {
        "name": CONTAINER_NAME,
        "image": shape.image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(SLEEP_COMMAND),
        "resources": resources,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def node_affinity(runner: Mapping[str, Any] | None, avoid_node: str | None) -> dict[str, Any] | None:
    """The runner's node affinity, and, for a placeholder made again after a preemption, "not on ``avoid_node``":
    the room its predecessor gave up is the preempting runner's, and a new placeholder there (the scheduler may try
    it while the runner waits out its backoff) would leave the runner waiting for a job to end. Elsewhere, or
    Pending, it asks for the next node, which is its purpose."""
    if not avoid_node:
        return dict(runner) if runner is not None else None
    elsewhere = {"key": "metadata.name", "operator": "NotIn", "values": [avoid_node]}
    affinity = dict(runner or {})
    required = dict(affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = [dict(term) for term in required.get("nodeSelectorTerms") or []] or [{}]
    for term in terms:  # terms are ORed: each of them must exclude the node
        term["matchFields"] = [*(term.get("matchFields") or []), elsewhere]
    required["nodeSelectorTerms"] = terms
    affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    return affinity


def bound_violations(shape: RunnerShape, bound: Mapping[str, Quantity], *, flag: str) -> list[str]:
    """Why a placeholder of ``shape`` may not be made: each request above its bound, or of a resource the bound
    does not name (placeholders are outside every quota, so what is not allowed is refused)."""
    found = []
    for resource, raw in shape.requests:
        limit = bound.get(resource)
        if limit is None:
            found.append(f"requests {resource} (not allowed by {flag})")
        elif parse_quantity(raw) > limit:
            found.append(f"requests {resource}={raw} (above {limit} allowed by {flag})")
    return found
