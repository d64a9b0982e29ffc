"""The benchmarks in ``bench/`` run, at a small size, on the test cluster: they print their figures, and the
scale-up keeps its API cost per runner. (Their speed figures are read by people, not asserted here.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.node.arc_listener import can_run_arc_listener
from tests.paths import REPO_ROOT

BENCH_TIMEOUT = 300
BENCH_VS_ARC_TIMEOUT = 600  # a cold build of ARC included


def run_bench(script: str, *args: str, timeout: float = BENCH_TIMEOUT) -> str:
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
        check=False,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.usefixtures("crds_installed")
def test_scale_up_benchmark_prints_its_ratio_and_costs_four_api_writes_per_runner(cluster: TestCluster) -> None:
    out = run_bench(
        "bench_scale_up.py", "--reuse", str(cluster.workdir),
        "--runners", "20", "--concurrency", "5", "--rounds", "1", "--warmup", "0",
    )  # fmt: skip
    assert re.search(r"^ratio: \d+\.\d\d of the API server's create throughput", out, re.MULTILINE), out
    writes = re.search(r"^API writes per runner, controller client \(until Running\): (\d+\.\d+)", out, re.MULTILINE)
    assert writes, out
    # ER, JIT Secret, Pod and one status write (registration + the pod's first state). A pod that takes
    # longer than the registration delay to start costs a fifth, so allow a few of those, not all.
    assert float(writes.group(1)) <= 4.5, out


@pytest.mark.usefixtures("crds_installed")
def test_scale_up_benchmark_with_a_github_app_measures_the_scale_down_to_zero(cluster: TestCluster) -> None:
    out = run_bench(
        "bench_scale_up.py", "--reuse", str(cluster.workdir), "--credentials", "app", "--no-limit",
        "--runners", "10", "--concurrency", "5", "--rounds", "1", "--warmup", "0",
    )  # fmt: skip
    assert "credentials: app" in out, out
    down = re.search(r"^scale-down to 0: no EphemeralRunner after [\d.]+ s, no runner pod after [\d.]+ s", out, re.M)
    assert down, out
    assert re.search(r"^  CPU seconds, scale-down window: bench \d+\.\d\d", out, re.MULTILINE), out
    assert "ratio:" not in out, out  # no limit runs asked for


def test_many_sets_benchmark_converges_every_set_and_prints_the_per_set_ratios(cluster: TestCluster) -> None:
    out = run_bench(
        "bench_many_sets.py", "--reuse", str(cluster.workdir), "--sets", "1,3", "--jobs", "1", "--rate", "0.5",
        "--idle", "1", "--duration-min", "0.5", "--duration-max", "1",
    )  # fmt: skip
    for sets in (1, 3):
        assert f"sets: {sets}\n  converged: yes;" in out, out
    assert out.count("exactly once: yes") == 2, out
    assert re.search(r"^  controller CPU, idle \(per s\): ", out, re.MULTILINE), out
    assert re.search(r"^  listener RSS: 3 processes, median [\d.]+ MB", out, re.MULTILINE), out


def test_many_sets_benchmark_with_a_shared_listener_serves_every_set_from_one_process(cluster: TestCluster) -> None:
    out = run_bench(
        "bench_many_sets.py", "--reuse", str(cluster.workdir), "--sets", "1,3", "--shared-listener",
        "--total-jobs", "2", "--rate", "0.5", "--idle", "1", "--duration-min", "0.5", "--duration-max", "1",
    )  # fmt: skip
    assert "mode: shared listeners of at most 100 sets; one credentials Secret" in out, out
    for sets in (1, 3):
        assert f"sets: {sets}\n  converged: yes;" in out, out
    assert out.count("jobs: 2 completed after") == 2, out
    assert out.count("exactly once: yes") == 2, out
    assert re.search(r"^  listener RSS: 1 processes, median [\d.]+ MB", out, re.MULTILINE), out
    per_set = re.search(r"^  listener memory per scale set: ([\d.]+) MB \(RSS sum / 3 sets", out, re.MULTILINE)
    assert per_set, out
    total = re.search(r"^  listener RSS: 1 processes, .* total (\d+) MB", out.split("sets: 3\n")[1], re.MULTILINE)
    assert total, out
    assert abs(float(per_set.group(1)) - int(total.group(1)) / 3) < 0.5, out  # the total is rounded to the MB
    assert re.search(r"^  listener RSS per set \(sum / sets, MB\): ", out, re.MULTILINE), out


def test_memory_benchmark_prints_the_controller_and_listener_resident_sizes(cluster: TestCluster) -> None:
    out = run_bench("bench_memory.py", "--reuse", str(cluster.workdir), "--runners", "2,3", "--jobs", "2")
    size = r"steady [\d.]+ MB, peak [\d.]+ MB"
    for entry_point in ("controller", "listener"):
        assert re.search(rf"^import, {entry_point}: \d+ modules, [\d.]+ s cumulative, RSS after import", out, re.M), out
    assert re.search(rf"^controller, idle \(no scale set\): {size}$", out, re.MULTILINE), out
    for runners in (2, 3):
        level = rf"^{runners} idle runners \(.*\):\n  controller: {size}\n  listener \S+: {size}$"
        assert re.search(level, out, re.MULTILINE), out
    assert re.search(rf"^  after 2 jobs at once \(.*\):\n    listener \S+: {size}$", out, re.MULTILINE), out


def test_informer_benchmark_prints_the_ingest_ratio(cluster: TestCluster) -> None:
    out = run_bench("bench_informer.py", str(cluster.kubeconfig), "--objects", "100", "--rounds", "1")
    assert re.search(r"^informer / list:\s+\d+\.\d\d$", out, re.MULTILINE), out


def test_semantic_benchmark_prints_a_ratio_per_case() -> None:
    out = run_bench("bench_semantic.py", "--repeat", "1", "--number", "50")
    assert re.search(r"^runner template, identical\s+[\d.]+ us\s+[\d.]+ us\s+[\d.]+\s", out, re.MULTILINE), out


def test_runner_index_benchmark_prints_the_ratio_of_a_full_pass_to_an_indexed_one() -> None:
    out = run_bench("bench_runner_index.py", "--runners", "40", "--rounds", "1")
    assert re.search(r"^\s+40 runners, 10 passes: full [\d.]+ s .* ratio full/index [\d.]+$", out, re.MULTILINE), out


def test_cold_nodes_benchmark_prints_the_three_variants_and_the_warm_pools_ratios(cluster: TestCluster) -> None:
    out = run_bench(
        "bench_cold_nodes.py", "--reuse", str(cluster.workdir), "--sets", "2", "--bursts", "1", "--burst-size", "1",
        "--node-delay", "2", "--node-idle", "2", "--job-seconds", "1", "--timeout", "120",
    )  # fmt: skip
    for variant in ("(a) cold", "(b) hot pool", "(c) warm capacity"):
        assert re.search(rf"^{re.escape(variant)}.* p95 [\d.]+ s; reserved node-seconds \d+ .*exactly once: yes$", out,
                         re.MULTILINE), out  # fmt: skip
    assert re.search(r"^ratio \(c\)/\(b\): p95 \S+, reserved node-seconds \S+ \(goal: at most 0.40\)$", out, re.M), out


@pytest.mark.skipif(
    not can_run_arc_listener() and not os.environ.get("CI"),
    reason="ARC's listener gets its service account in a mount namespace: root only (in CI it must run)",
)
def test_side_by_side_benchmark_against_arc_prints_the_ratios() -> None:
    # Its own control plane: the benchmark swaps ARC's CRDs in for this project's, which the other tests use.
    # Builds ARC v0.27.6 from its Go module on first use (about 1.5 min cold), seconds when cached.
    out = run_bench(
        "bench_vs_arc.py", "--runners", "5", "--rounds", "1", "--burst", "5", "--job-seconds", "1",
        timeout=BENCH_VS_ARC_TIMEOUT,
    )  # fmt: skip
    for figure in ("seconds to N runner pods", "seconds to 0 (minRunners N -> 0)", "listener peak RSS MiB",
                   "job queue-to-start p95 s (burst)"):  # fmt: skip
        assert re.search(rf"^ratio {re.escape(figure)}: \d+\.\d\d$", out, re.MULTILINE), out
