"""Fixtures for tests against the real local control plane (``cluster`` itself is in tests/conftest.py).

- ``kube`` (session): an :class:`arc_scaleset.kube.client.KubeClient` for that cluster, as admin.
- ``namespace`` (function): a fresh namespace per test, deleted afterwards; yielded once its ``default``
  ServiceAccount exists, so pods can be created at once.
- ``crds_installed`` (session): the project's CRDs from ``config/crd/`` applied server-side and Established.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest

from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import NotFound
from arc_scaleset_lab.harness.cluster import TestCluster, install_crds
from arc_scaleset_lab.harness.waiting import eventually


@pytest.fixture(scope="session")
async def kube(cluster: TestCluster) -> AsyncIterator[KubeClient]:
    client = KubeClient.from_kubeconfig(cluster.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def namespace(kube: KubeClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    # A readable prefix from the test name helps when reading the apiserver's or the operator's logs.
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"t-{stem}-{uuid.uuid4().hex[:6]}"
    await kube.create(resources.NAMESPACES, {"metadata": {"name": name, "labels": {"arc-scaleset.dev/test": "true"}}})

    async def default_service_account() -> bool:
        try:
            await kube.get(resources.SERVICE_ACCOUNTS, "default", namespace=name)
        except NotFound:
            return False
        return True

    await eventually(default_service_account, timeout=30, what=f"ServiceAccount default in {name}")
    try:
        yield name
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(resources.NAMESPACES, name)


@pytest.fixture(scope="session")
async def crds_installed(kube: KubeClient) -> list[str]:
    """Names of the installed CRDs (applied from config/crd/*.yaml)."""
    return await install_crds(kube)
