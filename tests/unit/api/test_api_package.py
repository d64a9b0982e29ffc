"""``arc_scaleset.api`` exports every name it always has, loading each defining module on first use only."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import arc_scaleset.api as api

DEFINING_MODULES = (
    "arc_scaleset.api.constants",
    "arc_scaleset.api.metrics_config",
    "arc_scaleset.api.common",
    "arc_scaleset.api.autoscalingrunnerset",
    "arc_scaleset.api.autoscalinglistener",
    "arc_scaleset.api.ephemeralrunnerset",
    "arc_scaleset.api.ephemeralrunner",
)


@pytest.mark.parametrize("name", api.__all__)
def test_every_exported_name_is_the_object_its_module_defines(name: str) -> None:
    value = getattr(api, name)

    defined_in = [module for module in DEFINING_MODULES if hasattr(importlib.import_module(module), name)]
    assert defined_in, f"{name} is defined in none of {DEFINING_MODULES}"
    assert all(getattr(importlib.import_module(module), name) is value for module in defined_in)


def test_the_exported_names_are_listed_by_dir_and_star_import() -> None:
    namespace: dict[str, object] = {}
    exec("from arc_scaleset.api import *", namespace)

    assert set(api.__all__) <= set(dir(api))
    assert set(api.__all__) <= set(namespace)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        getattr(api, "no_such_name")  # noqa: B009


def test_importing_the_package_or_its_constants_does_not_build_the_models() -> None:
    code = """
import sys
import arc_scaleset.api
from arc_scaleset.api import EPHEMERAL_RUNNERS, MAX_RUNNERS_UNBOUNDED, MetricsConfig
import arc_scaleset.api.listener_config
print(" ".join(sorted(name for name in sys.modules if name.startswith("arc_scaleset.api."))))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)

    loaded = set(done.stdout.split())
    assert loaded.isdisjoint({"arc_scaleset.api.common", *DEFINING_MODULES[2:]}), loaded
    assert "arc_scaleset.api.constants" in loaded
