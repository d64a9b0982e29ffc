"""The benchmarks in ``bench/`` run, at a small size, on the test cluster: they print their figures, and the
scale-up keeps its API cost per runner. (Their speed figures are read by people, not asserted here.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from arc_scaleset_lab.harness.cluster import TestCluster

REPO = Path(__file__).resolve().parents[2]
BENCH_TIMEOUT = 300


def run_bench(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args],
        capture_output=True,
        text=True,
        timeout=BENCH_TIMEOUT,
        cwd=REPO,
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


def test_informer_benchmark_prints_the_ingest_ratio(cluster: TestCluster) -> None:
    out = run_bench("bench_informer.py", str(cluster.kubeconfig), "--objects", "100", "--rounds", "1")
    assert re.search(r"^informer / list:\s+\d+\.\d\d$", out, re.MULTILINE), out


def test_semantic_benchmark_prints_a_ratio_per_case() -> None:
    out = run_bench("bench_semantic.py", "--repeat", "1", "--number", "50")
    assert re.search(r"^runner template, identical\s+[\d.]+ us\s+[\d.]+ us\s+[\d.]+\s", out, re.MULTILINE), out
