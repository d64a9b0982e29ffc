"""Shared pytest configuration for every test tier.

``cluster`` (session): one control plane per test run (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok with one Ready node), shared by the integration and end-to-end suites, each test in a
namespace of its own. It starts only when a test asks for it. Set ``ARC_SCALESET_TEST_CLUSTER_DIR`` to the
work directory of a cluster started with ``arc-scaleset cluster up --dir DIR`` to reuse that one instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from arc_scaleset_lab.harness.cluster import TestCluster, start_test_cluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[TestCluster]:
    reuse = os.environ.get("ARC_SCALESET_TEST_CLUSTER_DIR")
    with start_test_cluster(reuse=Path(reuse) if reuse else None) as running:
        yield running
