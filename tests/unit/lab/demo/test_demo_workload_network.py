"""The demo's workload has a burst, its options parse as documented, and its proxy verdict reads the evidence."""

from __future__ import annotations

import argparse
import dataclasses
from collections import Counter

import pytest

from arc_scaleset_lab.demo import _options, configure
from arc_scaleset_lab.demo.network import ProxyTraffic, proxy_traffic
from arc_scaleset_lab.demo.scenario import DemoOptions
from arc_scaleset_lab.demo.summary import JobAudit, Summary
from arc_scaleset_lab.harness.proxy import PROXY_EGRESS_ADDRESS, Tunnel
from arc_scaleset_lab.sim.workload import WorkloadSpec, plan

SIM = "vm:8443"


def _parse(*argv: str) -> DemoOptions:
    parser = argparse.ArgumentParser()
    configure(parser)
    return _options(parser.parse_args(list(argv)))


def _largest_simultaneous_arrival(spec: WorkloadSpec) -> int:
    return max(Counter(job.at for job in plan(spec)).values())


def test_the_default_demo_workload_has_twenty_jobs_arriving_at_the_same_instant() -> None:
    spec = DemoOptions().workload()
    jobs = plan(spec)
    assert len(jobs) == 60
    assert spec.burst == 20
    assert _largest_simultaneous_arrival(spec) == 20
    # The burst lands early (before half of the jobs: the template change), with the set already serving.
    burst_at = Counter(job.at for job in jobs).most_common(1)[0][0]
    arrived_before = sum(1 for job in jobs if job.at < burst_at)
    assert 0 < arrived_before < 30


@pytest.mark.parametrize(("jobs", "burst", "after"), [(10, 4, 0), (10, 4, 6), (10, 10, 0), (7, 1, 3)])
def test_a_burst_is_that_many_jobs_at_one_instant_after_the_first_ones(jobs: int, burst: int, after: int) -> None:
    spec = WorkloadSpec(jobs=jobs, rate=2.0, duration_min=1, duration_max=2, seed=5, burst=burst, burst_after=after)
    planned = plan(spec)
    assert len(planned) == jobs
    times = [job.at for job in planned]
    assert times == sorted(times)
    assert times[after : after + burst] == [times[after]] * burst
    assert Counter(times)[times[after]] == burst, "the jobs around the burst arrive at other times"


def test_without_a_burst_the_plan_is_what_it_always_was() -> None:
    spec = WorkloadSpec(jobs=30, rate=1.5, duration_min=1, duration_max=4, seed=11)
    assert plan(spec) == plan(WorkloadSpec(jobs=30, rate=1.5, duration_min=1, duration_max=4, seed=11, burst=0))
    assert _largest_simultaneous_arrival(spec) == 1


def test_a_burst_larger_than_the_workload_is_refused() -> None:
    with pytest.raises(ValueError, match="burst"):
        WorkloadSpec(jobs=5, burst=6)
    with pytest.raises(ValueError, match="burst"):
        WorkloadSpec(jobs=5, burst=3, burst_after=3)
    with pytest.raises(ValueError, match="--burst"):
        _parse("--jobs", "5", "--burst", "6")


def test_the_burst_defaults_to_a_third_of_the_jobs_and_can_be_turned_off() -> None:
    assert _parse("--jobs", "8").workload().burst == 2
    assert _parse("--jobs", "8", "--burst", "0").workload().burst == 0
    assert _parse().burst_jobs == 20


def test_proxy_implies_tls_and_tls_alone_has_no_proxy() -> None:
    proxied = _parse("--proxy")
    assert (proxied.proxy, proxied.tls) == (True, True)
    tls_only = _parse("--tls")
    assert (tls_only.proxy, tls_only.tls) == (False, True)
    plain = _parse()
    assert (plain.proxy, plain.tls) == (False, False)


def test_every_request_from_the_proxy_s_address_and_none_direct_means_all_went_through_it() -> None:
    traffic = proxy_traffic(
        requests=[f"CONNECT {SIM}"] * 3,
        tunnels=[Tunnel(SIM)] * 3,
        sim_target=SIM,
        request_peers={PROXY_EGRESS_ADDRESS: 40},
    )
    assert traffic == ProxyTraffic(tunnels=3, refused=0, elsewhere=(), via_proxy=40, direct={})
    assert traffic.all_through_proxy
    assert "none bypassed it" in traffic.lines()[0]


def test_direct_requests_refused_tunnels_and_other_targets_are_reported() -> None:
    traffic = proxy_traffic(
        requests=[f"CONNECT {SIM}", f"CONNECT {SIM}", "CONNECT elsewhere:443", "GET http://x/"],
        tunnels=[Tunnel(SIM), Tunnel("elsewhere:443")],
        sim_target=SIM,
        request_peers={PROXY_EGRESS_ADDRESS: 10, "127.0.0.1": 2},
    )
    assert not traffic.all_through_proxy
    assert traffic.direct == {"127.0.0.1": 2}
    assert traffic.refused == 1
    assert traffic.elsewhere == ("CONNECT elsewhere:443", "GET http://x/")
    text = "\n".join(traffic.lines())
    assert "NOT all" in text
    assert "2 from 127.0.0.1" in text


def test_nothing_through_the_proxy_is_not_all_through_it() -> None:
    assert not proxy_traffic(requests=[], tunnels=[], sim_target=SIM, request_peers={}).all_through_proxy


def test_the_summary_fails_the_demo_when_traffic_bypassed_the_proxy_and_shows_the_burst() -> None:
    audit = JobAudit(total=1, completed=1, succeeded=1)
    base = Summary(
        audit=audit,
        latencies=(0.0, 4.0),
        runners_created=1,
        runners_by_revision={},
        operator_writes=4,
        writes_by_resource={},
        controller_writes=None,
        elapsed=1.0,
        settled=True,
        burst=20,
    )
    assert base.ok
    assert any("p95 4.0s" in line and "burst of 20 jobs" in line for line in base.lines())
    bypassed = ProxyTraffic(tunnels=1, refused=0, elsewhere=(), via_proxy=1, direct={"127.0.0.1": 1})
    failing = dataclasses.replace(base, traffic=bypassed)
    assert not failing.ok
    assert any(line.startswith("proxy:") and "NOT all" in line for line in failing.lines())


def test_a_runner_pod_without_the_proxy_setting_means_not_all_traffic_goes_through_it() -> None:
    proxied = ProxyTraffic(tunnels=1, refused=0, elsewhere=(), via_proxy=5, direct={}, runner_pods=2)
    assert proxied.all_through_proxy
    assert any("2 of 2 live ones" in line for line in proxied.lines())
    unset = dataclasses.replace(proxied, runner_pods_without_proxy=("arc-runners-abc-runner-x",))
    assert not unset.all_through_proxy
    assert any("not: arc-runners-abc-runner-x" in line for line in unset.lines())
