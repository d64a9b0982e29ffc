"""Capacity truth as a pure function (docs/capacity.md): what a scale set can take, from its quotas and nodes."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from arc_scaleset.api.keys import CONDITION_CAPACITY_LIMITED
from arc_scaleset.api.warm_capacity import LABEL_WARM_POOL
from arc_scaleset.controllers.ephemeralrunnerset.capacity import (
    REASON_AS_EXPECTED,
    REASON_QUOTA,
    REASON_UNSCHEDULABLE,
    CapacityInputs,
    assess_capacity,
    quota_applies,
)
from arc_scaleset.controllers.ephemeralrunnerset.capacity_status import (
    INDEX_PLACEHOLDER_NAMESPACE,
    capacity_changes,
    placeholder_namespace_index,
    runner_pods,
)
from arc_scaleset.kube.informer import Store

NOW = dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.UTC)


def pod(
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    *,
    init: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    body: dict[str, Any] = {"containers": [{"name": "runner", "resources": resources}], **spec}
    if init:
        body["initContainers"] = [{"name": "init", "resources": {"requests": init}}]
    return {"spec": body}


def quota(
    hard: dict[str, str], used: dict[str, str] | None = None, *, name: str = "runners", **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"hard": hard, **spec},
        "status": {"hard": hard, "used": used or dict.fromkeys(hard, "0")},
    }


def capacity(**kwargs: Any) -> Any:
    kwargs.setdefault("max_runners", 20)
    kwargs.setdefault("runner_pod", pod({"cpu": "1", "memory": "1Gi"}))
    return assess_capacity(CapacityInputs(**kwargs))


def test_without_a_quota_the_set_advertises_max_runners() -> None:
    result = capacity()
    assert (result.advertised, result.reason, result.limited) == (20, REASON_AS_EXPECTED, False)


def test_a_cpu_quota_admits_hard_minus_used_divided_by_one_runners_request() -> None:
    result = capacity(quotas=[quota({"requests.cpu": "5"}, {"requests.cpu": "500m"})])
    assert (result.advertised, result.reason, result.limited) == (4, REASON_QUOTA, True)
    assert "ResourceQuota runners (requests.cpu)" in result.message


def test_runners_that_already_hold_quota_are_still_the_sets() -> None:
    # 3 runners of 1 CPU hold 3 of 5: the set still has 5.
    result = capacity(quotas=[quota({"cpu": "5"}, {"cpu": "3"})], runners_holding_quota=3)
    assert result.advertised == 5


def test_the_tightest_key_of_the_tightest_quota_decides() -> None:
    result = capacity(
        quotas=[
            quota({"requests.memory": "10Gi", "requests.cpu": "8"}, name="wide"),
            quota({"limits.memory": "6Gi"}, name="narrow"),
        ],
        runner_pod=pod({"cpu": "1", "memory": "1Gi"}, {"memory": "2Gi"}),
    )
    assert result.advertised == 3
    assert "narrow (limits.memory)" in result.message


def test_a_pod_count_quota_counts_one_per_runner() -> None:
    assert capacity(quotas=[quota({"pods": "7"}, {"pods": "2"})]).advertised == 5
    assert capacity(quotas=[quota({"count/pods": "4"})]).advertised == 4


def test_each_runner_also_holds_a_jit_secret_and_an_ephemeral_runner() -> None:
    assert capacity(quotas=[quota({"count/secrets": "10"}, {"count/secrets": "4"})]).advertised == 6
    assert capacity(quotas=[quota({"count/ephemeralrunners.actions.github.com": "2"})]).advertised == 2


def test_a_missing_request_counts_as_the_containers_limit() -> None:
    result = capacity(quotas=[quota({"requests.cpu": "4"})], runner_pod=pod(None, {"cpu": "2"}))
    assert result.advertised == 2


def test_limits_quotas_charge_the_limits_and_requests_quotas_the_requests() -> None:
    runner = pod({"cpu": "500m"}, {"cpu": "2"})
    assert capacity(quotas=[quota({"requests.cpu": "4"})], runner_pod=runner).advertised == 8
    assert capacity(quotas=[quota({"limits.cpu": "4"})], runner_pod=runner).advertised == 2


def test_a_larger_init_container_sets_the_pods_request() -> None:
    runner = pod({"memory": "1Gi"}, init={"memory": "3Gi"})
    assert capacity(quotas=[quota({"requests.memory": "9Gi"})], runner_pod=runner).advertised == 3


def test_a_quota_on_a_resource_the_runner_does_not_use_does_not_limit_it() -> None:
    result = capacity(quotas=[quota({"services": "0", "requests.nvidia.com/gpu": "0"})])
    assert (result.advertised, result.limited) == (20, False)


def test_a_quota_already_exceeded_leaves_only_the_runners_the_set_has() -> None:
    result = capacity(quotas=[quota({"cpu": "4"}, {"cpu": "6"})], runners_holding_quota=2)
    assert (result.advertised, result.reason) == (2, REASON_QUOTA)


def test_a_quota_admitting_more_than_max_runners_does_not_limit() -> None:
    result = capacity(quotas=[quota({"pods": "100"})], max_runners=20)
    assert (result.advertised, result.limited) == (20, False)


def test_a_quota_scoped_to_another_priority_class_does_not_apply() -> None:
    scoped = quota(
        {"pods": "1"},
        scopeSelector={"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["batch"]}]},
    )
    assert capacity(quotas=[scoped]).advertised == 20
    assert capacity(quotas=[scoped], runner_pod=pod({"cpu": "1"}, priorityClassName="batch")).advertised == 1


@pytest.mark.parametrize(
    ("scope", "runner", "applies"),
    [
        ("BestEffort", pod(), True),
        ("BestEffort", pod({"cpu": "1"}), False),
        ("NotBestEffort", pod({"cpu": "1"}), True),
        ("Terminating", pod({"cpu": "1"}), False),
        ("NotTerminating", pod({"cpu": "1"}), True),
        ("Terminating", pod({"cpu": "1"}, activeDeadlineSeconds=600), True),
    ],
)
def test_quota_scopes_match_the_runner_pod(scope: str, runner: dict[str, Any], applies: bool) -> None:
    assert quota_applies(quota({"pods": "1"}, scopes=[scope]), runner) is applies


def test_the_room_placeholder_pods_hold_counts_as_available() -> None:
    placeholders = [pod({"cpu": "1", "memory": "1Gi"}) for _ in range(3)]
    full = quota({"requests.cpu": "5", "pods": "5"}, {"requests.cpu": "5", "pods": "5"})
    result = capacity(quotas=[full], runners_holding_quota=2, placeholder_pods=placeholders)
    assert result.advertised == 5


def test_a_runner_unschedulable_past_the_bound_limits_the_set_to_its_placed_runners() -> None:
    result = capacity(unschedulable_past_bound=1, scheduled_runners=3)
    assert (result.advertised, result.reason, result.limited) == (3, REASON_UNSCHEDULABLE, True)


def test_the_lower_of_quota_and_node_limits_wins_and_never_below_zero() -> None:
    both = capacity(quotas=[quota({"pods": "2"})], unschedulable_past_bound=1, scheduled_runners=4)
    assert (both.advertised, both.reason) == (2, REASON_QUOTA)
    assert capacity(max_runners=-1).advertised == 0


def _pending(since: dt.datetime, *, node: str | None = None, phase: str = "Pending") -> dict[str, Any]:
    conditions = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "lastTransitionTime": since.isoformat().replace("+00:00", "Z")}
    ]  # fmt: skip
    spec = {"nodeName": node} if node else {}
    return {
        "metadata": {"name": "p"},
        "spec": spec,
        "status": {"phase": phase, "conditions": [] if node else conditions},
    }


def test_runner_pods_count_those_unschedulable_past_the_bound_and_when_the_next_one_will_be() -> None:
    pods = [
        _pending(NOW - dt.timedelta(seconds=150)),
        _pending(NOW - dt.timedelta(seconds=100)),
        _pending(NOW, node="node-1", phase="Running"),
        _pending(NOW, node="node-2", phase="Succeeded"),
    ]
    counted = runner_pods(pods, now=NOW, bound=120)
    assert (counted.holding_quota, counted.scheduled, counted.unschedulable_past_bound) == (3, 1, 1)
    assert counted.next_bound_in == pytest.approx(20)


def test_the_condition_is_written_once_per_change_and_says_why() -> None:
    ers: dict[str, Any] = {"metadata": {"name": "s", "namespace": "n", "generation": 1}, "status": {}}
    limited = capacity(quotas=[quota({"pods": "5"})])
    changes = capacity_changes(ers, limited, now=NOW)
    assert changes is not None
    advertised, conditions = changes
    assert advertised == 5
    assert [(c["type"], c["status"], c["reason"]) for c in conditions] == [
        (CONDITION_CAPACITY_LIMITED, "True", REASON_QUOTA)
    ]
    ers["status"] = {"advertisedCapacity": 5, "conditions": conditions}
    assert capacity_changes(ers, limited, now=NOW) is None


def test_a_pass_reads_its_namespaces_placeholder_pods_from_an_index_not_from_every_runner_pod() -> None:
    store = Store()
    store.add_index(INDEX_PLACEHOLDER_NAMESPACE, placeholder_namespace_index)
    for namespace in ("team-a", "team-b"):
        for i in range(20):
            store.upsert({"metadata": {"name": f"runner-{i}", "namespace": namespace, "labels": {"app": "runner"}}})
        held = {"name": "warm-0", "namespace": namespace, "labels": {LABEL_WARM_POOL: "pool-1"}}
        store.upsert({"metadata": held})
    found = store.by_index(INDEX_PLACEHOLDER_NAMESPACE, "team-a")
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in found] == [("team-a", "warm-0")]
