"""The controller's and the listener's small TLS read buffer (arc_scaleset.tls_buffers) against the real API server."""

from __future__ import annotations

import asyncio
from asyncio import sslproto
from pathlib import Path

import pytest

from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.resources import CONFIG_MAPS
from arc_scaleset.tls_buffers import TLS_READ_BUFFER, shrink_tls_read_buffers
from arc_scaleset_lab.harness.cluster import TestCluster

pytestmark = pytest.mark.cluster

OBJECTS = 60
VALUE = "v" * 16_000  # each ConfigMap is about 16 KB: one page of the list is about 1 MB, many buffers' worth


@pytest.fixture
def small_tls_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sslproto.SSLProtocol, "max_size", sslproto.SSLProtocol.max_size)  # restored after
    shrink_tls_read_buffers()
    assert sslproto.SSLProtocol.max_size == TLS_READ_BUFFER


@pytest.mark.usefixtures("small_tls_buffers")
async def test_a_list_far_larger_than_the_read_buffer_arrives_whole(cluster: TestCluster, namespace: str) -> None:
    # A client of its own: its connections are opened after the buffer was made small.
    kube = KubeClient.from_kubeconfig(Path(cluster.kubeconfig))
    try:
        await asyncio.gather(*(
            kube.create(CONFIG_MAPS, {"metadata": {"name": f"cm-{i}"}, "data": {"value": VALUE}}, namespace=namespace)
            for i in range(OBJECTS)
        ))  # fmt: skip

        listed = await kube.list(CONFIG_MAPS, namespace=namespace, label_selector=None)

        ours = [cm for cm in listed.items if cm["metadata"]["name"].startswith("cm-")]
        assert len(ours) == OBJECTS
        assert all(cm["data"]["value"] == VALUE for cm in ours)
    finally:
        await kube.close()
