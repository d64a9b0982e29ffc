"""The demo's closing numbers: percentiles, the exactly-once audit, and which API writes count."""

from __future__ import annotations

import math

from arc_scaleset_lab.demo.api_writes import WriteKey, apiserver_writes, client_writes, operator_writes
from arc_scaleset_lab.demo.summary import audit_jobs, percentile, queue_latencies


def test_percentile_is_nearest_rank_and_nan_without_values() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert percentile(values, 0.5) == 3.0
    assert percentile(values, 0.95) == 5.0
    assert percentile(values, 0.0) == 1.0
    assert math.isnan(percentile([], 0.5))


def test_queue_latency_is_start_minus_enqueue_for_started_jobs_only() -> None:
    jobs = [
        {"enqueuedAt": "2026-01-01T00:00:00Z", "startedAt": "2026-01-01T00:00:02.5Z"},
        {"enqueuedAt": "2026-01-01T00:00:00Z", "startedAt": None},
    ]
    assert queue_latencies(jobs) == [2.5]


def test_audit_flags_jobs_never_run_run_twice_or_unfinished() -> None:
    good = {"displayName": "a", "state": "completed", "runCount": 1, "result": "succeeded"}
    assert audit_jobs([good]).exactly_once
    twice = {**good, "displayName": "b", "runCount": 2}
    never = {"displayName": "c", "state": "available", "runCount": 0}
    audit = audit_jobs([good, twice, never])
    assert not audit.exactly_once
    assert audit.ran_more_than_once == ("b",)
    assert audit.never_ran == ("c",)
    assert audit.not_completed == ("c",)
    assert not audit_jobs([]).exactly_once


def _series(group: str, resource: str, subresource: str, verb: str, value: int, code: str = "200") -> str:
    labels = (
        f'code="{code}",component="apiserver",group="{group}",resource="{resource}",scope="resource",'
        f'subresource="{subresource}",verb="{verb}",version="v1"'
    )
    return f"apiserver_request_total{{{labels}}} {value}\n"


METRICS_BEFORE = (
    "# HELP apiserver_request_total x\n"
    + _series("", "pods", "", "POST", 10, "201")
    + _series("", "pods", "status", "PATCH", 40)
    + _series("", "pods", "", "GET", 99)
)
METRICS_AFTER = (
    _series("", "pods", "", "POST", 14, "201")
    + _series("", "pods", "", "POST", 1, "409")
    + _series("", "pods", "status", "PATCH", 80)
    + _series("coordination.k8s.io", "leases", "", "PUT", 7)
    + _series("actions.github.com", "ephemeralrunners", "status", "PATCH", 3)
)


def test_operator_writes_count_new_writes_but_not_kubelet_lease_or_read_traffic() -> None:
    delta = operator_writes(apiserver_writes(METRICS_BEFORE), apiserver_writes(METRICS_AFTER))
    assert delta == {
        WriteKey("", "pods", "", "POST"): 5,
        WriteKey("actions.github.com", "ephemeralrunners", "status", "PATCH"): 3,
    }


def test_client_writes_sum_write_methods_of_rest_client_requests_total() -> None:
    text = (
        'rest_client_requests_total{code="200",host="h",method="GET"} 50.0\n'
        'rest_client_requests_total{code="201",host="h",method="POST"} 4.0\n'
        'rest_client_requests_total{code="200",host="h",method="PATCH"} 6.0\n'
    )
    assert client_writes(text) == 10
