"""Fixtures for the chart tests: ``helm`` (the real binary, built with the control plane) without a cluster,
for rendering; the install tests add the run's cluster (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from arc_scaleset_lab.harness.helm import Helm


@pytest.fixture(scope="session")
def helm() -> Iterator[Helm]:
    renderer = Helm()
    try:
        yield renderer
    finally:
        renderer.close()
