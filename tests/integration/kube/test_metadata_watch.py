"""Metadata-only lists and watches against the real API server: a Secret's change is seen without its data ever
being received or kept (what the listener controller's watch of referenced Secrets relies on, issue 15)."""

from __future__ import annotations

import base64
from typing import Any

from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.informer import Informer, Object, identity_only
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.harness.waiting import eventually

TOKEN = "ghp_metadata_watch_token_never_received"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def secret(name: str, token: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": {LAST_APPLIED: f'{{"stringData":{{"github_token":"{token}"}}}}'}},
        "data": {"github_token": base64.b64encode(token.encode()).decode()},
    }


async def test_a_metadata_only_list_carries_no_secret_data(kube: KubeClient, namespace: str) -> None:
    await kube.create(resources.SECRETS, secret("gh-secret", TOKEN), namespace=namespace)
    listed = await kube.list(resources.SECRETS, namespace=namespace, metadata_only=True)
    mine = [item for item in listed.items if item["metadata"]["name"] == "gh-secret"]
    assert len(mine) == 1
    assert "data" not in mine[0]
    assert mine[0]["metadata"]["resourceVersion"]


async def test_a_name_selected_metadata_informer_sees_a_change_and_keeps_only_the_objects_identity(
    kube: KubeClient, namespace: str
) -> None:
    await kube.create(resources.SECRETS, secret("gh-secret", TOKEN), namespace=namespace)
    await kube.create(resources.SECRETS, secret("other", TOKEN), namespace=namespace)
    informer = Informer(
        kube,
        resources.SECRETS,
        namespace=namespace,
        field_selector="metadata.name=gh-secret",
        metadata_only=True,
        transform=identity_only,
    )
    updates: list[tuple[str, str]] = []

    def updated(old: Object, new: Object) -> None:
        updates.append((old["metadata"]["resourceVersion"], new["metadata"]["resourceVersion"]))

    informer.add_handler(on_update=updated)
    informer.start()
    try:
        await eventually(lambda: informer.has_synced, "the informer to sync")
        assert [ObjectView(obj).name for obj in informer.store.list()] == ["gh-secret"], "only the named object"
        rotated = await kube.patch(
            resources.SECRETS, "gh-secret", {"stringData": {"github_token": "ghp_rotated"}}, namespace=namespace
        )
        await eventually(lambda: len(updates) == 1, "the rotation to be seen")
        assert updates[0][1] == rotated["metadata"]["resourceVersion"]
        kept = informer.store.get(namespace, "gh-secret")
        assert kept is not None
        assert set(kept["metadata"]) == {"namespace", "name", "uid", "resourceVersion"}
        assert TOKEN not in repr(informer.store.list()), "neither the data nor an annotation holding it is kept"
    finally:
        await informer.stop()
