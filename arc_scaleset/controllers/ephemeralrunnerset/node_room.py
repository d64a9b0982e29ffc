"""Node room: how many more runners the nodes a runner pod may run on hold now, when those nodes are all there
will be (docs/capacity.md, "Node room when the pool cannot grow"): pure.

Free node room says nothing while a node autoscaler may add nodes: only the autoscaler knows whether it will. So
it counts only where an admin (or the autoscaler's own tooling) says the pool cannot grow, by the label
:data:`LABEL_NODE_POOL_CAPPED` (``"true"``) on its nodes. The rules:

1. **Candidate nodes**: nodes not cordoned (``spec.unschedulable``) whose labels match the runner pod's
   ``nodeSelector`` and required node affinity, and whose ``NoSchedule``/``NoExecute`` taints it tolerates.
2. **Capped only when all are**: no candidate, or one candidate without the label, and growth is not known to be
   capped: no limit (``None``).
3. **Room on a node**: its ``status.allocatable`` minus the requests of the pods bound to it and not finished
   (as the scheduler counts them: the larger of the containers' sum and the largest init container, plus
   overhead), with the room of warm placeholders counted as free (a runner pod preempts them), and one pod slot
   per pod. The runners it holds: the smallest, over the runner's requests (and ``pods``), of room // request.
4. **Node room** = the sum over the candidates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from arc_scaleset.api.warm_capacity import LABEL_WARM_POOL
from arc_scaleset.controllers.ephemeralrunnerset.capacity import pod_cost
from arc_scaleset.kube.quantity import InvalidQuantity, parse_quantity

LABEL_NODE_POOL_CAPPED: Final = "arc-scaleset.dev/node-pool-capped"
"""On a Node, ``"true"``: no more nodes like it will come (a fixed pool, or an autoscaler at its maximum)."""
_FINISHED: Final = frozenset({"Succeeded", "Failed"})
_HARD_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True)
class NodeRoom:
    """Runners the candidate nodes hold room for now, over ``nodes`` candidates."""

    runners: int
    nodes: int


def node_room(
    runner_pod: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
) -> NodeRoom | None:
    """Rules 1-4 of the module docstring; ``pods``: the pods bound to any of ``nodes`` (others are ignored)."""
    spec = runner_pod.get("spec") or {}
    candidates = [node for node in nodes if runs_on(spec, node)]
    if not candidates or not all(_capped(node) for node in candidates):
        return None
    by_node: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name and (pod.get("status") or {}).get("phase") not in _FINISHED:
            by_node.setdefault(str(node_name), []).append(pod)
    need = {**pod_cost(runner_pod).requests, "pods": Fraction(1)}
    total = sum(runners_fitting(need, _free(node, by_node.get(_name(node), []))) for node in candidates)
    return NodeRoom(runners=total, nodes=len(candidates))


def runs_on(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether the scheduler may put a pod of ``pod_spec`` on ``node`` by its labels and taints (rule 1)."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(labels.get(key) != value for key, value in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    if not _affinity_matches(pod_spec, labels, _name(node)):
        return False
    tolerations = pod_spec.get("tolerations") or []
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") in _HARD_EFFECTS]
    return all(any(_tolerates(toleration, taint) for toleration in tolerations) for taint in taints)


def runners_fitting(need: Mapping[str, Fraction], free: Mapping[str, Fraction]) -> int:
    """How many pods needing ``need`` fit in ``free`` (rule 3); a resource not allocatable fits none."""
    counts = [int(free.get(resource, Fraction(0)) // amount) for resource, amount in need.items() if amount > 0]
    return max(min(counts, default=0), 0)


def _free(node: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> dict[str, Fraction]:
    free = {str(k): _amount(v) for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()}
    for pod in pods:
        if LABEL_WARM_POOL in ((pod.get("metadata") or {}).get("labels") or {}):
            continue  # a placeholder's room is a runner's to take
        for resource, amount in {**pod_cost(pod).requests, "pods": Fraction(1)}.items():
            free[resource] = free.get(resource, Fraction(0)) - amount
    return free


def _affinity_matches(pod_spec: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    terms = (affinity or {}).get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(_term_matches(term, labels, name) for term in terms)  # terms are ORed


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    expressions = list(term.get("matchExpressions") or [])
    fields = list(term.get("matchFields") or [])
    if not expressions and not fields:
        return False  # an empty term matches no node
    return all(_requirement(r, labels) for r in expressions) and all(
        _requirement(r, {"metadata.name": name}) for r in fields
    )


def _requirement(requirement: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator = str(requirement.get("key", "")), str(requirement.get("operator", ""))
    values = [str(v) for v in requirement.get("values") or []]
    value = labels.get(key)
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])
        except ValueError:
            return False
    return False


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    key = toleration.get("key")
    if toleration.get("operator") == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def _capped(node: Mapping[str, Any]) -> bool:
    return ((node.get("metadata") or {}).get("labels") or {}).get(LABEL_NODE_POOL_CAPPED) == "true"


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name", ""))


def _amount(raw: Any) -> Fraction:
    try:
        return parse_quantity(raw).value
    except (InvalidQuantity, TypeError):
        return Fraction(0)
