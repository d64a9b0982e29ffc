"""The README's commands work as written: the two commands a newcomer runs first, and the rest it shows."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import yaml

from tests.paths import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()
ARC_SCALESET = [sys.executable, "-m", "arc_scaleset.cli"]


async def _run(*argv: str, timeout: float = 60) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=REPO_ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, output.decode()


def _code_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README, flags=re.DOTALL)


def test_the_readme_opens_with_the_demo_and_the_test_command_and_ci_runs_the_latter() -> None:
    first = _code_blocks()[0]
    commands = [line.split("#")[0].strip() for line in first.splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, flags=re.MULTILINE)
    assert re.search(r"^test:", makefile, flags=re.MULTILINE)
    assert "make test" in (REPO_ROOT / ".ci" / "run").read_text()


async def test_make_demo_runs_the_whole_system_and_every_job_runs_once() -> None:
    # The README's first command, with a small workload (ARGS is how the README says to pass options).
    args = "--jobs 8 --job-rate 4 --duration-min 1 --duration-max 3 --runners-min 1 --runners-max 6 --seed 3 --no-live"
    code, output = await _run("make", "--no-print-directory", "demo", f"ARGS={args}", timeout=900)

    assert code == 0, output[-4000:]
    assert re.search(r"jobs run:\s+8/8 completed", output), output[-4000:]
    assert re.search(r"every job ran once:\s+yes", output), output[-4000:]
    assert re.search(r"settled at minimum:\s+yes", output), output[-4000:]
    report = re.search(r"^Report: (\S+) \(", output, flags=re.MULTILINE)
    assert report is not None, output[-4000:]
    assert await asyncio.to_thread(Path(report.group(1)).is_file), report.group(1)


async def test_the_cluster_commands_shown_in_the_readme_work(tmp_path: Path) -> None:
    code, output = await _run(*ARC_SCALESET, "cluster", "build")
    assert code == 0, output
    code, output = await _run(*ARC_SCALESET, "cluster", "status", "--dir", str(tmp_path))
    assert code == 0, output
    assert "none recorded" in output


async def test_the_crds_command_prints_what_the_install_section_applies() -> None:
    code, output = await _run(*ARC_SCALESET, "crds")
    assert code == 0
    printed = {doc["metadata"]["name"] for doc in yaml.safe_load_all(output) if doc}
    crds = (REPO_ROOT / "config" / "crd").glob("*.yaml")
    committed = {yaml.safe_load(p.read_text())["metadata"]["name"] for p in crds}
    assert printed == committed
    assert len(printed) == 4
    assert "kubectl apply --server-side -f config/crd/" in README


async def test_the_controller_and_listener_commands_explain_themselves() -> None:
    for command in ("controller", "listener"):
        code, output = await _run(*ARC_SCALESET, command, "--help")
        assert code == 0, output
    code, output = await _run(*ARC_SCALESET, "controller", "--help")
    for flag in ("--enable-leader-election", "--watch-namespace", "--metrics-addr", "--kubeconfig"):
        assert flag in output
        assert flag in README
