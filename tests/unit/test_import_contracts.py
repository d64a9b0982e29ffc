"""The import contracts of pyproject.toml ([tool.importlinter]) hold: the operator never imports the lab,
the controller packages stay independent, the operator's layers depend one way, nothing imports in a
circle (docs/architecture.md). ``make lint`` runs ``lint-imports`` too; here each contract is a test of its
own, named after it, so a broken one shows in the test results with import-linter's explanation.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

CONTRACTS: list[str] = [
    contract["name"]
    for contract in tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
]


@pytest.fixture(scope="module")
def lint_imports_report() -> str:
    """What ``lint-imports`` prints for the repository's configuration (one run for every contract)."""
    lint_imports = Path(sys.executable).with_name("lint-imports")
    # No cache: `make lint` may be writing its own at the same time.
    done = subprocess.run(
        [str(lint_imports), "--config", str(REPO_ROOT / "pyproject.toml"), "--no-cache", "--no-logo"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Contracts:" in done.stdout, f"lint-imports did not run:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_every_contract_of_the_configuration_is_checked(lint_imports_report: str) -> None:
    assert CONTRACTS, "no [[tool.importlinter.contracts]] in pyproject.toml"
    summary = re.search(r"^Contracts: (\d+) kept(?:, (\d+) broken)?\.$", lint_imports_report, re.MULTILINE)
    assert summary, lint_imports_report
    assert int(summary.group(1)) + int(summary.group(2) or 0) == len(CONTRACTS), lint_imports_report


@pytest.mark.parametrize("contract", CONTRACTS)
def test_the_import_contract_holds(lint_imports_report: str, contract: str) -> None:
    verdict = re.search(rf"^{re.escape(contract)} (KEPT|BROKEN)$", lint_imports_report, re.MULTILINE)

    assert verdict, f"lint-imports reported nothing on {contract!r}:\n{lint_imports_report}"
    assert verdict.group(1) == "KEPT", _explanation(lint_imports_report, contract)


def _explanation(report: str, contract: str) -> str:
    """The part of the report under "Broken contracts" that explains ``contract``."""
    broken = report.split("Broken contracts", 1)[-1]
    sections = re.split(r"^(.+)\n-+\n", broken, flags=re.MULTILINE)
    # re.split with one group alternates: text, title, text, title, text...
    for title, body in zip(sections[1::2], sections[2::2], strict=True):
        if title.strip() == contract:
            return f"{contract}:\n{body.strip()}"
    return report
