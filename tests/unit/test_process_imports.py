"""What the long-running processes import: nothing that only some paths need (their memory is the product's)."""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest

# Imported only where they are used: rich and PyJWT by nobody in these processes (the image has no rich; App
# JWTs are signed through the system OpenSSL), cryptography for githubServerTLS and Key Vault, PyYAML for a
# kubeconfig file, the lab for its commands, OpenTelemetry (and its protobuf) for a configured OTLP endpoint.
LAZY = ("rich", "jwt", "cryptography", "yaml", "arc_scaleset_lab", "opentelemetry", "google")

# What each command imports before it serves (its module imports, and those of its run()).
RUNTIME = {
    "controller": (
        "arc_scaleset.kube.client",
        "arc_scaleset.kube.manager",
        "arc_scaleset.kube.leader_election",
        "arc_scaleset.cmd.controller_setup",
        "arc_scaleset.controllers.context",
    ),
    "listener": ("arc_scaleset.listener.app",),
}


@functools.cache
def modules_at_start(command: str) -> frozenset[str]:
    """The modules a fresh interpreter holds once ``command`` is ready to serve: started as the command line
    starts it (main() reads sys.argv, stopped by --help), then the imports of its run()."""
    code = f"""
import contextlib, importlib, sys
sys.argv = ["arc-scaleset", {command!r}, "--help"]
from arc_scaleset import cli
with contextlib.redirect_stdout(None), contextlib.suppress(SystemExit):
    cli.main()
for name in {RUNTIME[command]!r}:
    importlib.import_module(name)
print(" ".join(name for name, module in sys.modules.items() if module is not None))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return frozenset(done.stdout.split())


def package_modules(modules: frozenset[str], *packages: str) -> list[str]:
    return sorted(name for name in modules if name.partition(".")[0] in packages)


@pytest.mark.parametrize("command", sorted(RUNTIME))
def test_the_process_does_not_load_what_only_some_paths_need(command: str) -> None:
    assert package_modules(modules_at_start(command), *LAZY) == []


# The kinds' pydantic models: the controller's, never the listener's, which reads and writes the kinds as plain
# JSON. They would add about 1 MB to every listener (issue 20); what the listener needs from the API lives in
# light modules (arc_scaleset.api.constants, listener_config, listener_metrics, listener_state, keys).
CRD_MODELS = (
    "arc_scaleset.api.common",
    "arc_scaleset.api.autoscalingrunnerset",
    "arc_scaleset.api.autoscalinglistener",
    "arc_scaleset.api.ephemeralrunnerset",
    "arc_scaleset.api.ephemeralrunner",
)


def test_the_listener_process_does_not_build_the_crd_models() -> None:
    modules = modules_at_start("listener")
    assert "arc_scaleset.listener.command" in modules
    assert sorted(modules.intersection(CRD_MODELS)) == []


# pydantic itself: importing it and building the first models' schemas costs a listener about 10 MB (issue 20).
# The GitHub messages and the state annotation are msgspec Structs, the config plain dataclasses (docs/listener.md,
# "Memory").
def test_the_listener_process_does_not_import_pydantic() -> None:
    assert package_modules(modules_at_start("listener"), "pydantic", "pydantic_core") == []


# A shared listener's modules (issue 30): only a group pod loads them, never a listener of one scale set.
def test_a_listener_of_one_scale_set_does_not_load_the_shared_listener() -> None:
    modules = modules_at_start("listener")
    assert sorted(name for name in modules if name.startswith("arc_scaleset.listener.group")) == []
    assert "arc_scaleset.kube.informer" not in modules


# The standby listener's modules (issue 30): only a pod that names a standby Lease loads them.
def test_a_listener_without_a_standby_does_not_load_the_standby_or_leader_election() -> None:
    modules = modules_at_start("listener")
    assert sorted(name for name in modules if name.startswith("arc_scaleset.listener.standby")) == []
    assert "arc_scaleset.kube.leader_election" not in modules
