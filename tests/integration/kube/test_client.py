"""The Kubernetes client against the real local control plane."""

from __future__ import annotations

import asyncio
import base64
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient, ObjectList, PatchType, Preconditions, WatchEvent
from arc_scaleset.kube.conditions import is_condition_true
from arc_scaleset.kube.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    ConnectionFailed,
    Gone,
    Invalid,
    NotFound,
    RequestTimeout,
    Unauthorized,
)
from arc_scaleset.kube.resources import Resource
from arc_scaleset_lab.harness import cluster as test_cluster
from arc_scaleset_lab.harness.waiting import eventually

pytestmark = pytest.mark.cluster

CM = resources.CONFIG_MAPS


def _cm(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app": "client-test"}}, "data": dict(data)}


async def test_configmap_round_trip_create_get_patch_replace_delete(kube: KubeClient, namespace: str) -> None:
    created = await kube.create(CM, _cm("one", a="1"), namespace=namespace)
    assert created["metadata"]["namespace"] == namespace
    assert created["metadata"]["uid"]

    fetched = await kube.get(CM, "one", namespace=namespace)
    assert fetched["data"] == {"a": "1"}

    patched = await kube.patch(CM, "one", {"data": {"b": "2"}}, namespace=namespace)
    assert patched["data"] == {"a": "1", "b": "2"}

    patched["data"]["a"] = "changed"
    replaced = await kube.replace(CM, patched)
    assert replaced["data"] == {"a": "changed", "b": "2"}
    assert replaced["metadata"]["resourceVersion"] != patched["metadata"]["resourceVersion"]

    assert await kube.delete(CM, "one", namespace=namespace) is None
    with pytest.raises(NotFound, match='configmaps "one" not found'):
        await kube.get(CM, "one", namespace=namespace)


async def test_create_takes_the_namespace_from_the_object(kube: KubeClient, namespace: str) -> None:
    body = _cm("from-meta")
    body["metadata"]["namespace"] = namespace
    created = await kube.create(CM, body)
    assert created["metadata"]["namespace"] == namespace


async def test_a_dry_run_create_validates_and_answers_without_storing_anything(
    kube: KubeClient, namespace: str
) -> None:
    pod = {"metadata": {"name": "dry"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    answered = await kube.create(resources.PODS, pod, namespace=namespace, dry_run=True)
    assert answered["metadata"]["name"] == "dry"
    assert answered["spec"]["containers"][0]["terminationMessagePath"], "the server's defaults are applied"
    with pytest.raises(NotFound):
        await kube.get(resources.PODS, "dry", namespace=namespace)

    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "missing", "mountPath": "/x"}]
    with pytest.raises(Invalid, match="volumeMounts"):
        await kube.create(resources.PODS, pod, namespace=namespace, dry_run=True)


async def test_creating_an_existing_name_raises_already_exists(kube: KubeClient, namespace: str) -> None:
    await kube.create(CM, _cm("dup"), namespace=namespace)
    with pytest.raises(AlreadyExists, match='configmaps "dup" already exists'):
        await kube.create(CM, _cm("dup"), namespace=namespace)


async def test_json_patch_and_server_side_apply(kube: KubeClient, namespace: str) -> None:
    await kube.create(CM, _cm("patches", a="1"), namespace=namespace)
    ops = [{"op": "test", "path": "/data/a", "value": "1"}, {"op": "replace", "path": "/data/a", "value": "2"}]
    assert (await kube.patch(CM, "patches", ops, namespace=namespace, patch_type=PatchType.JSON))["data"]["a"] == "2"

    applied = await kube.patch(
        CM,
        "applied",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"k": "v"}},
        namespace=namespace,
        patch_type=PatchType.APPLY,
        field_manager="client-test",
        force=True,
    )
    assert applied["data"] == {"k": "v"}
    managers = [entry["manager"] for entry in applied["metadata"]["managedFields"]]
    assert "client-test" in managers


async def test_failed_json_patch_test_op_is_rejected(kube: KubeClient, namespace: str) -> None:
    await kube.create(CM, _cm("guarded", a="1"), namespace=namespace)
    ops = [{"op": "test", "path": "/data/a", "value": "other"}, {"op": "replace", "path": "/data/a", "value": "2"}]
    with pytest.raises((Invalid, BadRequest, Conflict)):
        await kube.patch(CM, "guarded", ops, namespace=namespace, patch_type=PatchType.JSON)
    assert (await kube.get(CM, "guarded", namespace=namespace))["data"]["a"] == "1"


async def test_list_follows_continue_pages(kube: KubeClient, namespace: str) -> None:
    for i in range(5):
        await kube.create(CM, _cm(f"page-{i}"), namespace=namespace)
    before = kube.request_counts[("list", "configmaps")]
    listed = await kube.list(CM, namespace=namespace, label_selector="app=client-test", limit=2)
    assert isinstance(listed, ObjectList)
    assert sorted(item["metadata"]["name"] for item in listed.items) == [f"page-{i}" for i in range(5)]
    assert kube.request_counts[("list", "configmaps")] - before == 3
    assert listed.resource_version
    assert all(item["kind"] == "ConfigMap" and item["apiVersion"] == "v1" for item in listed.items)


async def test_list_without_namespace_spans_all_namespaces(kube: KubeClient, namespace: str) -> None:
    await kube.create(CM, _cm("everywhere"), namespace=namespace)
    listed = await kube.list(CM, field_selector=f"metadata.namespace={namespace}", label_selector="app=client-test")
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed.items] == [(namespace, "everywhere")]


async def _collect(stream: AsyncIterator[WatchEvent], out: list[WatchEvent], until: int) -> None:
    async for event in stream:
        if event.type == "BOOKMARK":
            continue
        out.append(event)
        if len(out) >= until:
            return


async def test_watch_sees_added_modified_deleted_in_order(kube: KubeClient, namespace: str) -> None:
    start = await kube.list(CM, namespace=namespace)
    events: list[WatchEvent] = []
    stream = kube.watch(
        CM, namespace=namespace, resource_version=start.resource_version, label_selector="app=client-test"
    )
    watcher = asyncio.create_task(_collect(stream, events, until=3))

    await kube.create(CM, _cm("watched", v="1"), namespace=namespace)
    await kube.patch(CM, "watched", {"data": {"v": "2"}}, namespace=namespace)
    await kube.delete(CM, "watched", namespace=namespace)
    await asyncio.wait_for(watcher, timeout=30)

    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("ADDED", "watched"),
        ("MODIFIED", "watched"),
        ("DELETED", "watched"),
    ]
    assert events[1].object["data"] == {"v": "2"}
    versions = [int(e.object["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions)


async def test_watch_ends_normally_when_the_server_closes_the_stream(kube: KubeClient, namespace: str) -> None:
    # The label selector keeps out the kube-root-ca.crt ConfigMap the control plane adds to a new namespace.
    start = await kube.list(CM, namespace=namespace, label_selector="app=client-test")
    seen = []
    async with asyncio.timeout(30):
        async for event in kube.watch(
            CM,
            namespace=namespace,
            resource_version=start.resource_version,
            label_selector="app=client-test",
            timeout_seconds=1,
        ):
            seen.append(event.type)
    assert set(seen) <= {"BOOKMARK"}


async def _throwaway_crd(kube: KubeClient) -> tuple[Resource, str]:
    """A fresh namespaced CRD: its watch cache starts at the current resourceVersion, so "1" is too old.

    (Built-in resources' caches start with the API server, on an empty etcd, and may still hold the whole
    history of a young test cluster; a watch from "1" would then replay it instead of failing.)
    """
    suffix = uuid.uuid4().hex[:8]
    group = "client-test.arc-scaleset.dev"
    plural = f"probes{suffix}"
    crd: dict[str, Any] = {
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": f"probe{suffix}", "kind": f"Probe{suffix}"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }
    await kube.create(resources.CUSTOM_RESOURCE_DEFINITIONS, crd)

    async def established() -> bool:
        current = await kube.get(resources.CUSTOM_RESOURCE_DEFINITIONS, crd["metadata"]["name"])
        return is_condition_true((current.get("status") or {}).get("conditions"), "Established")

    await eventually(established, timeout=30, what=f"CRD {crd['metadata']['name']} Established")
    return Resource(group, "v1", plural, f"Probe{suffix}"), crd["metadata"]["name"]


async def test_watch_from_a_too_old_resource_version_raises_gone(kube: KubeClient, namespace: str) -> None:
    probes, crd_name = await _throwaway_crd(kube)
    try:
        # The resource must be servable before its watch cache answers.
        await eventually(lambda: _listable(kube, probes, namespace), timeout=30, what=f"{probes} listable")
        with pytest.raises(Gone, match="too old resource version") as caught:
            await _drain_watch(kube, probes, namespace, resource_version="1")
        assert caught.value.status == 410
    finally:
        await kube.delete(resources.CUSTOM_RESOURCE_DEFINITIONS, crd_name)


async def _listable(kube: KubeClient, resource: Resource, namespace: str) -> bool:
    try:
        await kube.list(resource, namespace=namespace)
    except NotFound:
        return False
    return True


async def _drain_watch(kube: KubeClient, resource: Resource, namespace: str, *, resource_version: str) -> None:
    async with asyncio.timeout(30):
        async for _ in kube.watch(resource, namespace=namespace, resource_version=resource_version):
            pass


async def test_delete_with_a_stale_uid_precondition_raises_conflict(kube: KubeClient, namespace: str) -> None:
    first = await kube.create(CM, _cm("precond"), namespace=namespace)
    await kube.delete(CM, "precond", namespace=namespace)
    await kube.create(CM, _cm("precond"), namespace=namespace)  # same name, new uid
    with pytest.raises(Conflict, match="the UID in the precondition"):
        await kube.delete(CM, "precond", namespace=namespace, preconditions=Preconditions(uid=first["metadata"]["uid"]))
    assert await kube.get(CM, "precond", namespace=namespace)


async def test_delete_collection_deletes_what_the_selector_names_and_answers_with_metadata_only(
    kube: KubeClient, namespace: str
) -> None:
    secrets = resources.SECRETS
    for name, batch in (("a", "one"), ("b", "two"), ("c", "three"), ("kept", "other")):
        await kube.create(secrets, {
            "metadata": {"name": name, "namespace": namespace, "labels": {"batch": batch}},
            "data": {"token": base64.b64encode(b"do-not-echo").decode()},
        })  # fmt: skip

    gone = await kube.delete_collection(secrets, namespace=namespace, label_selector="batch in (one,two,three)")

    assert sorted(item["metadata"]["name"] for item in gone) == ["a", "b", "c"]
    assert all("data" not in item for item in gone)  # the answer never carries a Secret's data
    left = await kube.list(secrets, namespace=namespace, label_selector="batch")
    assert [item["metadata"]["name"] for item in left.items] == ["kept"]
    with pytest.raises(ValueError, match="needs a label selector"):
        await kube.delete_collection(secrets, namespace=namespace, label_selector=" ")


async def test_replace_with_a_stale_resource_version_raises_conflict(kube: KubeClient, namespace: str) -> None:
    stale = await kube.create(CM, _cm("stale", v="1"), namespace=namespace)
    await kube.patch(CM, "stale", {"data": {"v": "2"}}, namespace=namespace)
    stale["data"]["v"] = "3"
    with pytest.raises(Conflict, match="the object has been modified") as caught:
        await kube.replace(CM, stale)
    assert caught.value.status == 409
    assert (await kube.get(CM, "stale", namespace=namespace))["data"]["v"] == "2"


async def test_merge_patch_carrying_a_stale_resource_version_raises_conflict(kube: KubeClient, namespace: str) -> None:
    stale = await kube.create(CM, _cm("locked", v="1"), namespace=namespace)
    await kube.patch(CM, "locked", {"data": {"v": "2"}}, namespace=namespace)
    lock = {"metadata": {"resourceVersion": stale["metadata"]["resourceVersion"]}, "data": {"v": "3"}}
    with pytest.raises(Conflict):
        await kube.patch(CM, "locked", lock, namespace=namespace)


async def test_request_raw_reads_discovery_endpoints(kube: KubeClient) -> None:
    version = await kube.request_raw("GET", "/version")
    assert version["major"] == "1"
    groups = await kube.request_raw("GET", "/apis")
    assert "coordination.k8s.io" in [g["name"] for g in groups["groups"]]


async def test_many_concurrent_requests_share_one_pool(kube: KubeClient, namespace: str) -> None:
    names = [f"c-{i}" for i in range(40)]
    await asyncio.gather(*(kube.create(CM, _cm(n), namespace=namespace) for n in names))
    got = await asyncio.gather(*(kube.get(CM, n, namespace=namespace) for n in names))
    assert [g["metadata"]["name"] for g in got] == names


# -- credentials and reachability: each failure is one typed error with a one-line message -------------


def _kubeconfig_for(
    cluster: test_cluster.TestCluster, tmp_path: Path, *, user: dict[str, Any], ca: bytes | None = None
) -> Path:
    source = yaml.safe_load(cluster.kubeconfig.read_text())
    context_name = source["current-context"]
    context = next(c["context"] for c in source["contexts"] if c["name"] == context_name)
    cluster_entry = next(c["cluster"] for c in source["clusters"] if c["name"] == context["cluster"])
    cluster_body = dict(cluster_entry)
    # The source's certificate-authority may be a path relative to it: embed it, so tmp_path needs no copy.
    if ca is None and "certificate-authority" in cluster_body:
        ca = (cluster.kubeconfig.parent / cluster_body["certificate-authority"]).read_bytes()
    if ca is not None:
        cluster_body.pop("certificate-authority", None)
        cluster_body["certificate-authority-data"] = base64.b64encode(ca).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "test",
        "clusters": [{"name": "c", "cluster": cluster_body}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "test", "context": {"cluster": "c", "user": "u"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def _other_ca() -> bytes:
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "not-the-cluster-ca")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


async def test_unknown_bearer_token_raises_unauthorized(cluster: test_cluster.TestCluster, tmp_path: Path) -> None:
    token = "arc-scaleset-bogus-token-0123456789"
    path = _kubeconfig_for(cluster, tmp_path, user={"token": token})
    async with KubeClient.from_kubeconfig(path) as client:
        with pytest.raises(Unauthorized) as caught:
            await client.get(resources.NAMESPACES, "default")
    message = str(caught.value)
    assert "\n" not in message
    assert token not in message
    assert message.startswith("GET /api/v1/namespaces/default: 401 Unauthorized")


async def test_wrong_certificate_authority_raises_connection_failed(
    cluster: test_cluster.TestCluster, tmp_path: Path
) -> None:
    path = _kubeconfig_for(cluster, tmp_path, user={"token": "irrelevant"}, ca=_other_ca())
    async with KubeClient.from_kubeconfig(path) as client:
        with pytest.raises(ConnectionFailed) as caught:
            await client.get(resources.NAMESPACES, "default")
    message = str(caught.value)
    assert message.startswith(f"cannot reach {client.server}: TLS certificate verification failed")
    assert "\n" not in message


async def test_unreachable_server_raises_connection_failed(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "x",
        "clusters": [
            {"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}", "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    async with KubeClient.from_kubeconfig(path) as client:
        with pytest.raises(ConnectionFailed, match=rf"^cannot reach https://127\.0\.0\.1:{port}: connection refused$"):
            await client.list(resources.NAMESPACES)


async def test_a_silent_watch_fails_with_request_timeout_after_the_idle_bound(
    cluster: test_cluster.TestCluster, namespace: str
) -> None:
    async with KubeClient.from_kubeconfig(cluster.kubeconfig, watch_idle_timeout=1.0) as client:
        start = await client.list(CM, namespace=namespace, label_selector="app=client-test")
        # No bookmarks and no changes: the server stays silent for longer than the idle bound.
        stream = client.watch(
            CM,
            namespace=namespace,
            resource_version=start.resource_version,
            label_selector="app=client-test",
            timeout_seconds=60,
            allow_bookmarks=False,
        )
        with pytest.raises(RequestTimeout, match="silent for 1s"):
            await asyncio.wait_for(_drain(stream), timeout=30)


async def _drain(stream: AsyncIterator[WatchEvent]) -> None:
    async for _ in stream:
        pass
