"""Capacity truth: how many runners the cluster can give a scale set now, as a pure function (docs/capacity.md).

The listener sends this figure to the Actions service with every poll (``X-ScaleSetMaxCapacity``); the
service offers a job only to a scale set with capacity left, so a job this cluster cannot run goes to a set
with the same labels that can (ARC always sends ``maxRunners``: a job then waits for hours behind a full
quota, ARC #3953). :func:`assess_capacity` decides it from plain data; the EphemeralRunnerSet controller
gathers the inputs from its caches and publishes the answer on the set (:mod:`.capacity_status`). The rules,
in order:

1. **Start from ``maxRunners``.** Nothing below ever raises the figure above it, and it is never negative.
2. **One runner's cost.** A runner is one pod (its requests: the larger of the sum over its containers and the
   largest init container, plus its overhead; a container's missing request defaults to its limit, as the API
   server defaults it) and one JIT Secret. A ResourceQuota key charges it: ``pods``/``count/pods`` and
   ``secrets``/``count/secrets`` 1, ``count/ephemeralrunners.actions.github.com`` 1, ``cpu``/``requests.cpu``
   (and memory, ephemeral-storage, extended ``requests.*``) its requests, ``limits.*`` its limits. Any other
   key does not charge a runner and never limits it.
3. **Only quotas that apply.** A quota with scopes charges the runner pod only when every scope matches it
   (``Terminating``/``NotTerminating``: ``activeDeadlineSeconds``; ``BestEffort``/``NotBestEffort``: requests or
   limits; ``PriorityClass`` selector: the pod's ``priorityClassName``). A scope this module does not know is
   taken to apply: a quota that limits too much is safer than one ignored.
4. **Room a quota leaves.** Per key: ``(hard - used + held by placeholders) // cost``, at least 0 (a quota
   already exceeded leaves none). Placeholder pods (warm capacity) are never runners, but the room they
   hold is a runner's to take: a runner pod preempts them (docs/capacity.md). A quota's room is its
   tightest key's; the namespace's room is its tightest quota's. No quota, or no key that charges a
   runner: no limit.
5. **Quota capacity** = the set's runner pods that already hold quota (not finished) + the namespace's room:
   capacity already spent on this set's runners is still this set's.
6. **Unschedulable past the bound.** When a runner pod of the set has been unschedulable for longer than the
   bound (no node is coming: the node autoscaler is at its maximum, or there is none), the cluster gives
   this set no more than the runner pods it has already placed on nodes.
7. **Node room when the pool cannot grow.** When every node the runner pod may run on says no more will come
   (:mod:`.node_room`), the cluster gives this set no more than the runner pods it has placed plus the runners
   those nodes still hold room for.
8. **Advertised** = the smallest of these; the reason names what lowered it below ``maxRunners``
   (:data:`REASON_QUOTA`, :data:`REASON_UNSCHEDULABLE`, :data:`REASON_NODES`), in that order when equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from arc_scaleset.kube.quantity import InvalidQuantity, parse_quantity

REASON_QUOTA: Final = "ResourceQuotaExhausted"
REASON_UNSCHEDULABLE: Final = "RunnersUnschedulable"
REASON_NODES: Final = "NodePoolCapped"
REASON_AS_EXPECTED: Final = "AsExpected"

RUNNER_COUNT_KEYS: Final = frozenset(
    {"pods", "count/pods", "secrets", "count/secrets", "count/ephemeralrunners.actions.github.com"}
)
"""Quota keys that count objects: a runner is one pod, one JIT Secret and one EphemeralRunner."""
PLACEHOLDER_COUNT_KEYS: Final = frozenset({"pods", "count/pods"})
"""What a placeholder pod holds of the count keys: a pod, no Secret, no runner."""
_STANDARD_REQUESTS: Final = frozenset({"cpu", "memory", "ephemeral-storage"})


@dataclass(frozen=True)
class CapacityInputs:
    """What :func:`assess_capacity` decides from.

    ``runner_pod``: one runner pod (its ``spec`` is what counts); ``quotas``: the ResourceQuota objects of the
    runner namespace (``status.hard``/``status.used``; ``spec.hard`` while the quota controller has not
    filled the status); ``runners_holding_quota``: the set's runner pods that exist and are not finished;
    ``placeholder_pods``: the namespace's warm-capacity placeholder pods; ``unschedulable_past_bound``: the
    set's runner pods unschedulable for longer than the bound; ``scheduled_runners``: its runner pods bound to
    a node and not finished; ``node_room``: runners the candidate nodes of a pool that cannot grow still hold
    room for, and ``capped_nodes`` how many nodes those are (``None``: growth not known to be capped).
    """

    max_runners: int
    runner_pod: Mapping[str, Any]
    quotas: Sequence[Mapping[str, Any]] = ()
    runners_holding_quota: int = 0
    placeholder_pods: Sequence[Mapping[str, Any]] = ()
    unschedulable_past_bound: int = 0
    scheduled_runners: int = 0
    node_room: int | None = None
    capped_nodes: int = 0


@dataclass(frozen=True)
class Capacity:
    """The capacity to advertise, and why it is below ``maxRunners`` (``reason`` :data:`REASON_AS_EXPECTED`
    and ``limited`` false when it is not)."""

    advertised: int
    reason: str = REASON_AS_EXPECTED
    message: str = ""
    limited: bool = False


@dataclass(frozen=True)
class QuotaRoom:
    """How many more runners a quota admits, and the quota and key that decide it."""

    runners: int
    quota: str
    key: str


@dataclass
class PodCost:
    """A pod's effective requests and limits, by resource name."""

    requests: dict[str, Fraction] = field(default_factory=dict)
    limits: dict[str, Fraction] = field(default_factory=dict)


def assess_capacity(inputs: CapacityInputs) -> Capacity:
    """The capacity to advertise for ``inputs`` (rules 1-8 of the module docstring)."""
    ceiling = max(inputs.max_runners, 0)
    candidates: list[Capacity] = [Capacity(advertised=ceiling)]
    room = namespace_room(inputs.runner_pod, inputs.quotas, inputs.placeholder_pods)
    if room is not None:
        by_quota = inputs.runners_holding_quota + room.runners
        candidates.append(
            Capacity(
                advertised=by_quota,
                reason=REASON_QUOTA,
                message=f"ResourceQuota {room.quota} ({room.key}) admits {by_quota} runner(s) of this set",
                limited=True,
            )
        )
    if inputs.unschedulable_past_bound > 0:
        candidates.append(
            Capacity(
                advertised=inputs.scheduled_runners,
                reason=REASON_UNSCHEDULABLE,
                message=(
                    "runner pods found no node for longer than the bound (no node is coming); the set advertises"
                    f" the {inputs.scheduled_runners} runner(s) the cluster has placed"
                ),
                limited=True,
            )
        )
    if inputs.node_room is not None:
        by_nodes = inputs.scheduled_runners + inputs.node_room
        candidates.append(
            Capacity(
                advertised=by_nodes,
                reason=REASON_NODES,
                message=(
                    f"the {inputs.capped_nodes} node(s) this set's runners may run on will not grow (label"
                    f" arc-scaleset.dev/node-pool-capped) and hold room for {inputs.node_room} more runner(s) beside"
                    f" the {inputs.scheduled_runners} placed"
                ),
                limited=True,
            )
        )
    # min() keeps the first of equals: maxRunners wins a tie (not limited), then the quota.
    best = min(candidates, key=lambda c: c.advertised)
    if best.advertised >= ceiling:
        return Capacity(advertised=ceiling)
    return Capacity(advertised=max(best.advertised, 0), reason=best.reason, message=best.message, limited=True)


def namespace_room(
    runner_pod: Mapping[str, Any],
    quotas: Iterable[Mapping[str, Any]],
    placeholder_pods: Iterable[Mapping[str, Any]] = (),
) -> QuotaRoom | None:
    """How many more runners the namespace's quotas admit (rule 4); ``None`` when none limits a runner."""
    cost = runner_charges(runner_pod)
    placeholders = list(placeholder_pods)
    tightest: QuotaRoom | None = None
    for quota in quotas:
        if not quota_applies(quota, runner_pod):
            continue
        held = _held_by(placeholders, quota)
        room = quota_room(quota, cost, held)
        if room is not None and (tightest is None or room.runners < tightest.runners):
            tightest = room
    return tightest


def quota_room(
    quota: Mapping[str, Any], cost: Mapping[str, Fraction], held: Mapping[str, Fraction]
) -> QuotaRoom | None:
    """The runners one quota still admits, and its tightest key; ``None`` when it charges a runner nothing."""
    status = quota.get("status") or {}
    hard = status.get("hard") or (quota.get("spec") or {}).get("hard") or {}
    used = status.get("used") or {}
    name = str((quota.get("metadata") or {}).get("name", ""))
    tightest: QuotaRoom | None = None
    for key, limit in hard.items():
        need = cost.get(key, Fraction(0))
        if need <= 0:
            continue
        free = _amount(limit) - _amount(used.get(key, 0)) + held.get(key, Fraction(0))
        runners = max(int(free // need), 0)
        if tightest is None or runners < tightest.runners:
            tightest = QuotaRoom(runners=runners, quota=name, key=str(key))
    return tightest


def runner_charges(pod: Mapping[str, Any]) -> dict[str, Fraction]:
    """What one runner costs under each quota key it can be charged under (rule 2)."""
    charges = {key: Fraction(1) for key in RUNNER_COUNT_KEYS}
    charges.update(_resource_charges(pod))
    return charges


def placeholder_charges(pod: Mapping[str, Any]) -> dict[str, Fraction]:
    """What one placeholder pod holds under each quota key (a pod, its requests and limits; no Secret)."""
    charges = {key: Fraction(1) for key in PLACEHOLDER_COUNT_KEYS}
    charges.update(_resource_charges(pod))
    return charges


def _resource_charges(pod: Mapping[str, Any]) -> dict[str, Fraction]:
    cost = pod_cost(pod)
    charges: dict[str, Fraction] = {}
    for resource, amount in cost.requests.items():
        charges[f"requests.{resource}"] = amount
        if resource in _STANDARD_REQUESTS:
            charges[resource] = amount
    for resource, amount in cost.limits.items():
        charges[f"limits.{resource}"] = amount
    return charges


def pod_cost(pod: Mapping[str, Any]) -> PodCost:
    """A pod's effective requests and limits, as the quota admission plugin charges them (rule 2)."""
    spec = pod.get("spec") or {}
    cost = PodCost()
    for kind in ("requests", "limits"):
        totals: dict[str, Fraction] = {}
        for container in spec.get("containers") or []:
            for resource, amount in _container_amounts(container, kind).items():
                totals[resource] = totals.get(resource, Fraction(0)) + amount
        for container in spec.get("initContainers") or []:
            for resource, amount in _container_amounts(container, kind).items():
                totals[resource] = max(totals.get(resource, Fraction(0)), amount)
        for resource, amount in (spec.get("overhead") or {}).items():
            totals[resource] = totals.get(resource, Fraction(0)) + _amount(amount)
        setattr(cost, kind, totals)
    return cost


def _container_amounts(container: Mapping[str, Any], kind: str) -> dict[str, Fraction]:
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    amounts = {str(k): _amount(v) for k, v in limits.items()}
    if kind == "limits":
        return amounts
    # A request left out defaults to the limit (the API server's defaulting).
    amounts.update({str(k): _amount(v) for k, v in (resources.get("requests") or {}).items()})
    return amounts


def quota_applies(quota: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether ``quota``'s scopes all match ``pod`` (rule 3)."""
    spec = quota.get("spec") or {}
    pod_spec = pod.get("spec") or {}
    for scope in spec.get("scopes") or []:
        if not _scope_matches(str(scope), pod_spec, operator="Exists", values=()):
            return False
    for requirement in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        scope = str(requirement.get("scopeName", ""))
        operator = str(requirement.get("operator", "Exists"))
        if not _scope_matches(scope, pod_spec, operator=operator, values=requirement.get("values") or ()):
            return False
    return True


def _scope_matches(scope: str, pod_spec: Mapping[str, Any], *, operator: str, values: Iterable[Any]) -> bool:
    terminating = pod_spec.get("activeDeadlineSeconds") is not None
    cost = pod_cost({"spec": pod_spec})
    best_effort = not cost.requests and not cost.limits
    if scope == "Terminating":
        return terminating
    if scope == "NotTerminating":
        return not terminating
    if scope == "BestEffort":
        return best_effort
    if scope == "NotBestEffort":
        return not best_effort
    if scope == "PriorityClass":
        priority_class = pod_spec.get("priorityClassName")
        wanted = {str(v) for v in values}
        return {
            "In": priority_class in wanted,
            "NotIn": priority_class not in wanted,
            "Exists": priority_class is not None,
            "DoesNotExist": priority_class is None,
        }.get(operator, True)
    return True  # unknown scope: taken to apply (rule 3)


def _held_by(placeholders: Sequence[Mapping[str, Any]], quota: Mapping[str, Any]) -> dict[str, Fraction]:
    held: dict[str, Fraction] = {}
    for pod in placeholders:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or not quota_applies(quota, pod):
            continue
        for key, amount in placeholder_charges(pod).items():
            held[key] = held.get(key, Fraction(0)) + amount
    return held


def _amount(raw: Any) -> Fraction:
    try:
        return parse_quantity(raw).value
    except (InvalidQuantity, TypeError):
        return Fraction(0)
