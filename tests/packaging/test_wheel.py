"""The package as a user gets it: the wheel built from this checkout, installed with pip into a fresh
virtualenv outside the checkout, run from a directory that is not the checkout.

Without the ``lab`` extra the operator's commands work and the lab's commands say how to get them; with
it the lab's commands work from the installed package alone (the Go modules it builds the control plane
from are package data). Nothing here needs the local control plane; pip fetches the dependencies from
the package index, through pip's cache, so a second run is quick.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from arc_scaleset_lab.cluster import binaries
from tests.paths import REPO_ROOT

VERSION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
INSTALL_TIMEOUT = 600

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(INSTALL_TIMEOUT * 2)]


@dataclass(frozen=True)
class Installed:
    """A fresh virtualenv with the wheel installed, and a working directory outside the checkout."""

    venv: Path
    cwd: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``arc-scaleset *args`` as a user of this venv runs it (its bin/ first on PATH, nothing of ours)."""
        return subprocess.run(
            [str(self.venv / "bin" / "arc-scaleset"), *args],
            cwd=self.cwd,
            env=_user_environment(self.venv),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def _user_environment(venv: Path) -> dict[str, str]:
    # Neither the checkout nor the test run's own venv may leak in: no PYTHONPATH, no VIRTUAL_ENV.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(venv)
    return env


def _check(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # The build backend (hatchling, pinned in [build-system]) comes in an isolated build environment.
    _check([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(REPO_ROOT)], cwd=out)
    (built,) = out.glob("arc_scaleset-*.whl")
    return built


def _install(wheel: Path, tmp_path_factory: pytest.TempPathFactory, *, requirement: str) -> Installed:
    root = tmp_path_factory.mktemp("user")
    venv = root / "venv"
    cwd = root / "work"
    cwd.mkdir()
    _check([sys.executable, "-m", "venv", str(venv)], cwd=root)
    _check(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", requirement],
        cwd=root,
        env=_user_environment(venv),
    )
    return Installed(venv=venv, cwd=cwd)


@pytest.fixture(scope="module")
def operator_only(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return _install(wheel, tmp_path_factory, requirement=str(wheel))


@pytest.fixture(scope="module")
def with_lab(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return _install(wheel, tmp_path_factory, requirement=f"{wheel}[lab]")


def test_the_installed_command_runs_the_installed_package_not_the_checkout(operator_only: Installed) -> None:
    python = operator_only.venv / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", "import arc_scaleset; print(arc_scaleset.__file__)"],
        cwd=operator_only.cwd,
        env=_user_environment(operator_only.venv),
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(done.stdout.strip()).is_relative_to(operator_only.venv), done.stdout


def test_without_the_lab_the_help_lists_the_operators_commands_and_says_how_to_get_the_lab(
    operator_only: Installed,
) -> None:
    done = operator_only.run("--help")

    assert done.returncode == 0, done.stderr
    commands = _listed_commands(done.stdout)
    assert {"controller", "listener", "crds", "force-cleanup", "version"} <= commands, done.stdout
    assert not commands & {"cluster", "sim", "demo"}, done.stdout
    assert "pip install 'arc-scaleset[lab]'" in done.stdout


def test_without_the_lab_crds_prints_the_four_custom_resource_definitions(operator_only: Installed) -> None:
    done = operator_only.run("crds")

    assert done.returncode == 0, done.stderr
    names = {doc["metadata"]["name"] for doc in yaml.safe_load_all(done.stdout) if doc}
    assert names == {
        "autoscalingrunnersets.actions.github.com",
        "ephemeralrunnersets.actions.github.com",
        "ephemeralrunners.actions.github.com",
        "autoscalinglisteners.actions.github.com",
    }


def test_without_the_lab_version_prints_the_packages_version(operator_only: Installed) -> None:
    done = operator_only.run("version")

    assert (done.returncode, done.stdout.strip()) == (0, VERSION)


@pytest.mark.parametrize("command", ["demo", "cluster", "sim"])
def test_without_the_lab_a_lab_command_fails_with_one_line_naming_the_extra(
    operator_only: Installed, command: str
) -> None:
    done = operator_only.run(command)

    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"arc-scaleset: '{command}' comes with the lab, which is not installed: pip install 'arc-scaleset[lab]'"
    ]


def test_with_the_lab_the_help_lists_the_labs_commands_too(with_lab: Installed) -> None:
    done = with_lab.run("--help")

    assert done.returncode == 0, done.stderr
    assert {"controller", "crds", "cluster", "sim", "demo"} <= _listed_commands(done.stdout), done.stdout
    assert "arc-scaleset[lab]" not in done.stdout


@pytest.mark.parametrize("command", ["demo", "cluster"])
def test_with_the_lab_the_labs_commands_answer_help(with_lab: Installed, command: str) -> None:
    done = with_lab.run(command, "--help")

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: arc-scaleset {command}"), done.stdout


def test_with_the_lab_the_installed_lab_keys_its_binaries_as_the_checkout_does(with_lab: Installed) -> None:
    # Same Go modules in the wheel as in the checkout, so the same cache directory: an installed lab
    # reuses binaries built from a checkout and the other way round.
    done = with_lab.run("cluster", "status", "--dir", str(with_lab.cwd / "no-cluster"))

    assert done.returncode == 0, done.stderr
    assert f"binaries: {binaries.bin_dir()} " in done.stdout, done.stdout


def test_the_wheel_carries_the_go_modules_and_the_typing_markers(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())

    for module in ("etcd", "k8s", "kwok", "helm"):
        for file in ("go.mod", "go.sum"):
            assert f"arc_scaleset_lab/cluster/gomodules/{module}/{file}" in names
    assert {"arc_scaleset/py.typed", "arc_scaleset_lab/py.typed"} <= names
    assert not [name for name in names if name.startswith(("tests/", "bench/", "charts/"))]


def _listed_commands(help_text: str) -> set[str]:
    """The sub-command names in ``--help`` (the indented first words under "positional arguments")."""
    section = help_text.split("positional arguments:", 1)[1].split("options:", 1)[0]
    # A command's line is indented by four spaces; its help's continuation lines by more.
    return {line.split()[0] for line in section.splitlines() if line.startswith("    ") and line[4:5] != " "}
