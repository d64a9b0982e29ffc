"""The image as a user runs it: its entrypoint, as its non-root user, in a runc container with a read-only
root filesystem; the listener against the simulated GitHub and the real control plane, with in-cluster
credentials mounted where a pod gets them."""

from __future__ import annotations

import base64
import json
import stat
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

import arc_scaleset
from arc_scaleset.api.crd.generate import custom_resource_definitions
from arc_scaleset.api.listener_config import CONFIG_PATH_ENV
from arc_scaleset.controllers.autoscalinglistener.children import role_rules
from arc_scaleset.controllers.autoscalinglistener.pod import CONFIG_MOUNT_PATH
from arc_scaleset.controllers.settings import DEFAULT_LISTENER_COMMAND
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset_lab.harness.cluster import TestCluster
from image import spec
from image.build import BuiltImage
from tests.image.conftest import UnpackedImage
from tests.image.containers import Mount, run_to_completion, running
from tests.integration.listener.conftest import PAT, SCALE_SET_NAME, ListenerSim, wait_for_replicas

# The first test to ask for the image pays for building it (about two minutes cold on 2 cores).
pytestmark = pytest.mark.timeout(900)

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# What an intruder would look for first: a shell, a package manager, tools to fetch or unpack.
TOOLS = ("sh", "bash", "dash", "busybox", "dpkg", "apt", "apt-get", "tar", "awk", "mawk", "curl", "wget")


async def test_the_entrypoint_prints_the_version_of_the_package(image_root: UnpackedImage, tmp_path: Path) -> None:
    code, stdout = await run_to_completion(image_root.root, image_root.image.config, tmp_path, args=["version"])
    assert (code, stdout.strip()) == (0, arc_scaleset.__version__)


async def test_controller_help_lists_arcs_flags(image_root: UnpackedImage, tmp_path: Path) -> None:
    code, stdout = await run_to_completion(
        image_root.root, image_root.image.config, tmp_path, args=["controller", "--help"]
    )
    assert code == 0
    for flag in ("--watch-single-namespace", "--enable-leader-election", "--auto-scaler-image-pull-secrets"):
        assert flag in stdout


async def test_the_image_generates_the_same_crds_from_the_schema_it_keeps(
    image_root: UnpackedImage, tmp_path: Path
) -> None:
    # The image drops every Kubernetes schema release but the one the operator reads: this proves it kept it.
    code, stdout = await run_to_completion(image_root.root, image_root.image.config, tmp_path, args=["crds"])
    assert code == 0
    assert [doc for doc in yaml.safe_load_all(stdout) if doc] == custom_resource_definitions()


async def test_python_in_the_image_trusts_the_public_certificate_authorities(
    image_root: UnpackedImage, tmp_path: Path
) -> None:
    # github.com and api.github.com chain to one of these; the image's Python finds them through SSL_CERT_FILE.
    count_trusted = "import ssl; print(len(ssl.create_default_context().get_ca_certs()))"
    code, stdout = await run_to_completion(
        image_root.root, image_root.image.config, tmp_path, command=["python", "-c", count_trusted]
    )
    assert code == 0
    assert int(stdout) > 100


async def test_schedule_windows_in_any_iana_time_zone_can_be_read_in_the_image(
    image_root: UnpackedImage, tmp_path: Path
) -> None:
    # minRunnersSchedule and warmCapacity windows name IANA zones; the image has no system time zone database,
    # so zoneinfo must find the tzdata package's.
    offsets = (
        "import datetime as d, zoneinfo as z;"
        "print(d.datetime(2026, 7, 1, 12, tzinfo=z.ZoneInfo('Europe/Berlin')).utcoffset().total_seconds())"
    )
    code, stdout = await run_to_completion(
        image_root.root, image_root.image.config, tmp_path, command=["python", "-c", offsets]
    )
    assert code == 0
    assert float(stdout) == 7200.0


async def test_the_listener_in_the_image_holds_a_session_and_scales_as_a_non_root_user(
    image_root: UnpackedImage,
    tmp_path: Path,
    cluster: TestCluster,
    kube: KubeClient,
    namespace: str,
    ers: str,
    listener_sim: ListenerSim,
) -> None:
    sim = listener_sim.sim
    token = await service_account_token(kube, namespace)
    config = listener_config(listener_sim, namespace)
    write_volumes(tmp_path, token=token, cluster=cluster, namespace=namespace, config=config)
    api = urlsplit(cluster.server)
    env = {
        "KUBERNETES_SERVICE_HOST": api.hostname or "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(api.port or 443),
        CONFIG_PATH_ENV: f"{CONFIG_MOUNT_PATH}/config.json",
    }
    mounts = [
        Mount(tmp_path / "serviceaccount", SERVICE_ACCOUNT_DIR),
        Mount(tmp_path / "listener-config", CONFIG_MOUNT_PATH),
    ]

    async with running(
        image_root.root,
        image_root.image.config,
        tmp_path,
        command=DEFAULT_LISTENER_COMMAND,  # what the controller puts in the listener pod
        env=env,
        mounts=mounts,
    ) as listener:
        await listener.read_json_until("message session created")
        assert list(sim.state.sessions) == [listener_sim.scale_set_id]
        # min_runners is 1: the patch proves the in-cluster token, the Role and the API's TLS work.
        await wait_for_replicas(kube, namespace, 1, within=60)
        real, effective, _, _ = await listener.uids()
        assert (real, effective) == (spec.UID, spec.UID)
        assert real != 0
        code = await listener.stop()

    assert code == 0, "SIGTERM to the container's first process is a clean shutdown"
    assert not sim.state.sessions, "the session was deleted on the way out"


def test_the_image_has_no_shell_nor_package_manager_and_its_code_is_not_writable_by_its_user(
    image_root: UnpackedImage,
) -> None:
    root = image_root.root
    directories = ("bin", "sbin", "usr/bin", "usr/sbin", "usr/local/bin")
    found = [
        f"{d}/{tool}"
        for d in directories
        for tool in TOOLS
        if (root / d / tool).is_symlink() or (root / d / tool).exists()
    ]
    assert found == []
    entrypoint = root / spec.PREFIX.lstrip("/") / "bin" / "arc-scaleset"
    for path in (entrypoint, entrypoint.parent, root / "usr/lib/python3.11"):
        mode = path.stat()
        assert mode.st_uid == 0
        assert not mode.st_mode & (stat.S_IWGRP | stat.S_IWOTH), path


def test_the_archive_is_read_and_copied_by_skopeo_as_users_push_it(built_image: BuiltImage, tmp_path: Path) -> None:
    # skopeo copy checks every blob against its digest: what it copies to a layout here, it pushes to a registry.
    source = f"oci-archive:{built_image.archive}"
    subprocess.run(["skopeo", "copy", "--quiet", source, f"oci:{tmp_path / 'copy'}:{built_image.version}"], check=True)
    index = json.loads((tmp_path / "copy" / "index.json").read_text())
    assert [m["digest"] for m in index["manifests"]] == [built_image.manifest_digest]
    config = json.loads(
        subprocess.run(["skopeo", "inspect", "--config", source], check=True, capture_output=True).stdout
    )["config"]
    assert config["User"] == spec.USER
    assert config["Entrypoint"] == list(spec.ENTRYPOINT)
    assert config["Labels"]["org.opencontainers.image.version"] == arc_scaleset.__version__
    assert config["Labels"]["org.opencontainers.image.licenses"] == "Apache-2.0"


def listener_config(env: ListenerSim, namespace: str) -> dict[str, Any]:
    return {
        "configure_url": env.config_url,
        "github_token": PAT,
        "ephemeral_runner_set_namespace": namespace,
        "ephemeral_runner_set_name": SCALE_SET_NAME,
        "min_runners": 1,
        "max_runners": 5,
        "runner_scale_set_id": env.scale_set_id,
        "runner_scale_set_name": SCALE_SET_NAME,
        "log_level": "info",
        "log_format": "json",
        "metrics_addr": "",
        "metrics_endpoint": "",
    }


async def service_account_token(kube: KubeClient, namespace: str) -> str:
    """A token of a ServiceAccount bound to a Role with the listener's rules (the controller's own)."""
    name = "image-listener"
    await kube.create(resources.SERVICE_ACCOUNTS, {"metadata": {"name": name, "namespace": namespace}})
    await kube.create(
        resources.ROLES, {"metadata": {"name": name, "namespace": namespace}, "rules": role_rules(SCALE_SET_NAME)}
    )
    await kube.create(
        resources.ROLE_BINDINGS,
        {
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    )
    answer = await kube.request_raw(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )
    token: str = answer["status"]["token"]
    return token


def write_volumes(directory: Path, *, token: str, cluster: TestCluster, namespace: str, config: dict[str, Any]) -> None:
    """What the kubelet mounts into a listener pod: the projected service-account token with the cluster CA
    and the namespace, and the listener's config Secret."""
    credentials = directory / "serviceaccount"
    credentials.mkdir()
    (credentials / "token").write_text(token)
    (credentials / "ca.crt").write_bytes(cluster_ca(cluster))
    (credentials / "namespace").write_text(namespace)
    readable_by_all(credentials)
    config_dir = directory / "listener-config"
    config_dir.mkdir()
    (config_dir / "config.json").write_text(json.dumps(config))
    readable_by_all(config_dir)


def cluster_ca(cluster: TestCluster) -> bytes:
    kubeconfig = yaml.safe_load(cluster.kubeconfig.read_text())
    entry = kubeconfig["clusters"][0]["cluster"]
    if "certificate-authority-data" in entry:
        return base64.b64decode(entry["certificate-authority-data"])
    return Path(entry["certificate-authority"]).read_bytes()


def readable_by_all(directory: Path) -> None:
    # pytest's directories are private to root; the container's user must read what is mounted for it.
    directory.chmod(0o755)
    for path in directory.iterdir():
        path.chmod(0o644)
