"""Runs last (file order): no process of the e2e system ever wrote a token, a private key or a JIT config
to its log. (The ``system`` fixture checks once more after stopping every process.)"""

from __future__ import annotations

from arc_scaleset_lab.harness.secret_scan import find_leaks
from arc_scaleset_lab.harness.system import System


async def test_no_process_logged_a_token_private_key_or_jit_config(system: System) -> None:
    described = set(system.ledger.values.values())
    assert "PAT" in described
    assert any(d.startswith("JIT config of") for d in described), "the run's JIT configs were recorded"
    logs = system.log_files()
    assert any(p.parent.name == "listeners" for p in logs), "listener logs are among those searched"

    leaks = find_leaks(logs, system.ledger)

    assert not leaks, "secrets found in logs:\n" + "\n".join(map(str, leaks[:20]))
