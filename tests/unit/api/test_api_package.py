"""``arc_scaleset.api`` is a plain package: it exports nothing, and importing it or its light modules builds none
of the kinds' pydantic models (the listener imports those modules and needs no model, issue 20)."""

from __future__ import annotations

import subprocess
import sys
import types

import arc_scaleset.api as api

# The modules that define the kinds' pydantic models, and the CRD tooling built on them.
MODEL_MODULES = (
    "arc_scaleset.api.common",
    "arc_scaleset.api.autoscalingrunnerset",
    "arc_scaleset.api.autoscalinglistener",
    "arc_scaleset.api.ephemeralrunnerset",
    "arc_scaleset.api.ephemeralrunner",
    "arc_scaleset.api.crd",
)


def test_the_package_exports_nothing_but_its_submodules() -> None:
    public = {name for name in vars(api) if not name.startswith("_")}

    assert all(isinstance(getattr(api, name), types.ModuleType) for name in public), public


def test_importing_the_package_or_its_light_modules_does_not_build_the_models() -> None:
    code = """
import sys
import arc_scaleset.api
from arc_scaleset.api.constants import EPHEMERAL_RUNNERS, MAX_RUNNERS_UNBOUNDED
from arc_scaleset.api.metrics_config import MetricsConfig
import arc_scaleset.api.listener_config
print(" ".join(sorted(name for name in sys.modules if name.startswith("arc_scaleset.api."))))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)

    loaded = set(done.stdout.split())
    assert loaded.isdisjoint(MODEL_MODULES), loaded
    assert "arc_scaleset.api.constants" in loaded
