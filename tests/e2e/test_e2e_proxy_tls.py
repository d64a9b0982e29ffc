"""Enterprise networking, end to end (issue 17): a scale set behind a real forward proxy (Debian's tinyproxy,
requiring credentials) talking to a GitHub served over TLS by a CA that only a ConfigMap holds.

The system here is a module of its own: its sim serves HTTPS under this machine's host name (a name, not a
loopback address, so clients do proxy it: loopback is never proxied, docs/github.md). tinyproxy binds its
outgoing side to 127.0.0.2, so the sim's record of TCP peers tells proxied requests from direct ones.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import socket
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from arc_scaleset.api.constants import AUTOSCALING_LISTENERS, AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.naming import listener_config_secret_name, listener_pod_name, listener_proxy_secret_name
from arc_scaleset.kube import resources
from arc_scaleset.kube.errors import NotFound
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.proxy import PROXY_EGRESS_ADDRESS, TinyProxy
from arc_scaleset_lab.harness.system import System, SystemOptions
from tests.e2e.harness import ScaleSetHandle, describe, listener_recreations, started_system

RUN_ID = uuid.uuid4().hex[:6]
NAMESPACE = f"e2e-proxy-{RUN_ID}"
NO_PROXY = ["internal.example", ".corp.example"]


def _sim_host() -> str:
    """This machine's host name: it resolves to one of its own addresses, and is not ``localhost``."""
    name = socket.gethostname()
    try:
        socket.getaddrinfo(name, None)
    except OSError:
        pytest.fail(f"this machine's host name {name!r} does not resolve: add it to /etc/hosts")
    return name


@pytest.fixture(scope="module")
def proxy() -> Iterator[TinyProxy]:
    workdir = Path(tempfile.mkdtemp(prefix="arc-scaleset-proxy-"))
    with TinyProxy(workdir) as running:
        yield running
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
async def tls_system(cluster: TestCluster) -> AsyncIterator[System]:
    workdir = Path(tempfile.mkdtemp(prefix="arc-scaleset-e2e-tls-"))
    options = SystemOptions(
        controller_namespace=f"arc-e2e-tls-{RUN_ID}",
        watch_namespace=NAMESPACE,
        long_poll_seconds=2.0,
        session_timeout=10.0,
        sim_host=_sim_host(),
        sim_tls=True,
    )
    async with started_system(workdir, kubeconfig=cluster.kubeconfig, namespace=NAMESPACE, options=options) as running:
        yield running
    shutil.rmtree(workdir, ignore_errors=True)


async def _create(
    system: System,
    name: str,
    *,
    proxy: TinyProxy | None,
    ca: bool,
    min_runners: int = 1,
    no_proxy: list[str] | None = None,
) -> ScaleSetHandle:
    secret = await system.create_pat_secret(NAMESPACE, name=f"{name}-github-token")
    manifest = scale_sets.autoscaling_runner_set(
        name=name,
        namespace=NAMESPACE,
        config_url=system.config_url(),
        secret=secret,
        min_runners=min_runners,
        max_runners=4,
        template=scale_sets.runner_template(env={scale_sets.TEMPLATE_REVISION_ENV: "1"}),
    )
    spec: dict[str, Any] = manifest["spec"]
    if proxy is not None:
        await system.kube.create(
            resources.SECRETS,
            {
                "metadata": {"name": f"{name}-proxy-credentials"},
                "stringData": {"username": proxy.user, "password": proxy.password},
            },
            namespace=NAMESPACE,
        )
        spec["proxy"] = {
            "https": {"url": proxy.url, "credentialSecretRef": f"{name}-proxy-credentials"},
            "noProxy": NO_PROXY if no_proxy is None else no_proxy,
        }
    if ca:
        assert system.sim_ca_pem
        await system.kube.create(
            resources.CONFIG_MAPS,
            {"metadata": {"name": f"{name}-ca"}, "data": {"ca.crt": system.sim_ca_pem}},
            namespace=NAMESPACE,
        )
        spec["githubServerTLS"] = {"certificateFrom": {"configMapKeyRef": {"name": f"{name}-ca", "key": "ca.crt"}}}
    handle = ScaleSetHandle.tracked(system, namespace=NAMESPACE, name=name, min_runners=min_runners)
    await system.kube.create(AUTOSCALING_RUNNER_SETS, manifest, namespace=NAMESPACE)
    return handle


@contextlib.asynccontextmanager
async def _scale_set(
    system: System, name: str, *, proxy: TinyProxy | None, ca: bool, no_proxy: list[str] | None = None
) -> AsyncIterator[ScaleSetHandle]:
    handle = await _create(system, name, proxy=proxy, ca=ca, no_proxy=no_proxy)
    try:
        yield handle
    finally:
        await handle.stop_tracking()
        with contextlib.suppress(Exception, pytest.fail.Exception):
            await handle.delete(timeout=60.0)


async def test_behind_a_proxy_with_a_private_ca_every_github_call_goes_through_the_proxy_with_its_credentials(
    tls_system: System, proxy: TinyProxy
) -> None:
    sim_target = urlsplit(tls_system.sim_url).netloc
    async with _scale_set(tls_system, "proxied", proxy=proxy, ca=True) as runners:
        ready = await runners.wait_ready(timeout=90)
        await runners.enqueue(2, duration=1.0)
        await runners.assert_every_job_ran_once(timeout=90)

        # The proxy opened tunnels to the sim, only to it, and only for requests carrying its credentials
        # (tinyproxy answers 407 without them and opens nothing).
        tunnels = proxy.tunnels()
        assert tunnels, f"no CONNECT went through the proxy; it saw {proxy.requests()}"
        assert {t.target for t in tunnels} == {sim_target}
        assert {r for r in proxy.requests()} == {f"CONNECT {sim_target}"}, "only CONNECTs, only to the sim"
        # Nothing bypassed it: every GitHub and Actions-service request the sim served came from the
        # proxy's outgoing address (a direct one would come from 127.0.0.1).
        peers = (await tls_system.sim.stats())["requestPeers"]
        assert set(peers) == {PROXY_EGRESS_ADDRESS}, peers

        # The listener's config carries the CA from the ConfigMap; its pod and the runners get the proxy.
        assert ready.listener_name
        config_secret = await tls_system.kube.get(
            resources.SECRETS,
            listener_config_secret_name(ready.listener_name),
            namespace=tls_system.controller_namespace,
        )
        config = json.loads(base64.b64decode(config_secret["data"]["config.json"]))
        assert config["server_root_ca"] == tls_system.sim_ca_pem

        expected_https_proxy = f"http://{proxy.user}:{proxy.password}@{proxy.address}"
        runner_secrets = [
            s
            for s in (await tls_system.kube.list(resources.SECRETS, namespace=NAMESPACE)).items
            if s["metadata"]["name"].endswith("-runner-proxy")
        ]
        assert len(runner_secrets) == 1
        data = {k: base64.b64decode(v).decode() for k, v in runner_secrets[0]["data"].items()}
        assert data == {"http_proxy": "", "https_proxy": expected_https_proxy, "no_proxy": ",".join(NO_PROXY)}

        # One list, not a get per runner: a runner that finished its job may be gone by the time it is read.
        listed = await tls_system.kube.list(resources.PODS, namespace=NAMESPACE)
        runner_pods = [p for p in listed.items if any(c["name"] == "runner" for c in p["spec"]["containers"])]
        assert runner_pods, "the scale set's runner pods"
        for pod in runner_pods:
            runner = next(c for c in pod["spec"]["containers"] if c["name"] == "runner")
            env = {e["name"]: e for e in runner.get("env", [])}
            # As ARC: only the configured parts (https and noProxy here, no http), from the runner proxy Secret.
            assert "http_proxy" not in env
            for key in ("https_proxy", "no_proxy"):
                ref = env[key]["valueFrom"]["secretKeyRef"]
                assert (ref["name"], ref["key"]) == (runner_secrets[0]["metadata"]["name"], key)


async def test_without_the_private_ca_the_scale_set_reports_an_untrusted_certificate(tls_system: System) -> None:
    """Without the CA the controller cannot register the scale set (its first GitHub call fails the TLS
    handshake), and a listener is only ever started for a registered scale set (as ARC: the listener needs the
    scale set's ID): so no AutoscalingListener or listener pod exists, and the scale set's condition is where a
    user learns that the certificate is not trusted."""
    async with _scale_set(tls_system, "untrusted", proxy=None, ca=False) as runners:

        async def untrusted() -> str | None:
            ars = (await runners.snapshot()).ars or {}
            for condition in ars.get("status", {}).get("conditions", []):
                if "certificate" in condition.get("message", "").lower():
                    return str(condition["message"])
            return None

        message = await runners.wait_until(untrusted, timeout=60, what="a condition naming the certificate")
        assert "not trusted" in message or "verification failed" in message, message
        snapshot = await runners.snapshot()
        assert snapshot.scale_set_id is None, describe(snapshot)
        assert snapshot.listener_name is None, describe(snapshot)
        listeners = (await tls_system.kube.list(AUTOSCALING_LISTENERS, namespace=tls_system.controller_namespace)).items
        assert not [item for item in listeners if item["metadata"]["name"].startswith("untrusted-")], listeners


async def _listener_config(system: System, listener_name: str) -> dict[str, Any]:
    secret = await system.kube.get(
        resources.SECRETS, listener_config_secret_name(listener_name), namespace=system.controller_namespace
    )
    return dict(json.loads(base64.b64decode(secret["data"]["config.json"])))


async def _runner_https_proxy(system: System) -> str:
    secrets_ = [
        s
        for s in (await system.kube.list(resources.SECRETS, namespace=NAMESPACE)).items
        if s["metadata"]["name"].endswith("-runner-proxy")
    ]
    assert len(secrets_) == 1, [s["metadata"]["name"] for s in secrets_]
    return base64.b64decode(secrets_[0]["data"]["https_proxy"]).decode()


async def test_a_changed_ca_or_proxy_secret_recreates_the_listener_once_and_reaches_the_next_runners(
    tls_system: System, proxy: TinyProxy
) -> None:
    async with _scale_set(tls_system, "rotated", proxy=proxy, ca=True) as runners:
        ready = await runners.wait_ready(timeout=90)
        listener = ready.listener_name
        assert listener
        pods = tls_system.kube
        pod_name = listener_pod_name(listener)

        async def pod_uid() -> str:
            """The listener pod's UID; empty while it is being recreated."""
            try:
                pod = await pods.get(resources.PODS, pod_name, namespace=tls_system.controller_namespace)
            except NotFound:
                return ""
            return str(pod["metadata"]["uid"])

        # 1. The proxy credentials rotate (the proxy accepts both passwords): the listener's pod is recreated
        # once, with the new credentials, and the next runners get them through the runner proxy Secret.
        first_uid, recreated_before = await pod_uid(), await listener_recreations(tls_system, listener)
        await tls_system.kube.patch(
            resources.SECRETS,
            "rotated-proxy-credentials",
            {"stringData": {"password": proxy.rotated_password}},
            namespace=NAMESPACE,
        )

        async def listener_proxy_rotated() -> bool:
            secret = await tls_system.kube.get(
                resources.SECRETS, listener_proxy_secret_name(listener), namespace=tls_system.controller_namespace
            )
            https = base64.b64decode(secret["data"]["https_proxy"]).decode()
            return proxy.rotated_password in https and (await pod_uid()) not in ("", first_uid)

        await runners.wait_until(listener_proxy_rotated, timeout=60, what="a new listener pod with the rotated proxy")
        await runners.wait(lambda s: s.session_owner is not None, timeout=60, what="the new listener's session")
        await runners.enqueue(1, duration=0.5)
        await runners.assert_every_job_ran_once(timeout=90)
        assert proxy.rotated_password in await _runner_https_proxy(tls_system)
        assert await listener_recreations(tls_system, listener) == recreated_before + 1

        # 2. The CA ConfigMap changes (a bundle: the CA twice): the config Secret's server_root_ca follows, the
        # pod is recreated once more, and the listener still connects with it.
        second_uid, recreated_before = await pod_uid(), await listener_recreations(tls_system, listener)
        assert tls_system.sim_ca_pem
        bundle = tls_system.sim_ca_pem + tls_system.sim_ca_pem
        await tls_system.kube.patch(
            resources.CONFIG_MAPS, "rotated-ca", {"data": {"ca.crt": bundle}}, namespace=NAMESPACE
        )

        async def ca_rotated() -> bool:
            config = await _listener_config(tls_system, listener)
            return config["server_root_ca"] == bundle and (await pod_uid()) not in ("", second_uid)

        await runners.wait_until(ca_rotated, timeout=60, what="a new listener pod with the new CA bundle")
        await runners.wait(lambda s: s.session_owner is not None, timeout=60, what="the new listener's session")
        await runners.enqueue(1, duration=0.5)
        await runners.assert_every_job_ran_once(timeout=90)
        assert await listener_recreations(tls_system, listener) == recreated_before + 1


async def test_a_no_proxy_host_bypasses_the_proxy_through_the_whole_system(
    tls_system: System, proxy: TinyProxy
) -> None:
    sim_host = urlsplit(tls_system.sim_url).hostname
    assert sim_host
    tunnels_before = len(proxy.tunnels())
    direct_before = (await tls_system.sim.stats())["requestPeers"].get("127.0.0.1", 0)
    async with _scale_set(tls_system, "bypass", proxy=proxy, ca=True, no_proxy=[sim_host]) as runners:
        await runners.wait_ready(timeout=90)
        await runners.enqueue(1, duration=0.5)
        await runners.assert_every_job_ran_once(timeout=90)
        # The controller's and the listener's requests went straight to the sim; the proxy opened nothing.
        direct_after = (await tls_system.sim.stats())["requestPeers"].get("127.0.0.1", 0)
        assert direct_after > direct_before
        assert len(proxy.tunnels()) == tunnels_before, proxy.tunnels()[tunnels_before:]
