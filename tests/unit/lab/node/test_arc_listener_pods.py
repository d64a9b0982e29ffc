"""ARC's own listener pods as the node agent plays them: recognised by their command, given in-cluster
credentials and a free metrics port (the process itself runs in bench/bench_vs_arc.py and its test)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from arc_scaleset.kube.credentials import ConnectionConfig
from arc_scaleset_lab.node.arc_listener import (
    ARC_LISTENER_COMMAND,
    ARC_METRICS_ADDR_KEY,
    arc_listener_container,
    prepare_in_cluster,
)
from arc_scaleset_lab.node.listener_kubelet import give_metrics_a_free_port, terminated_status_patch
from arc_scaleset_lab.node.pod_sandbox import Sandbox, SandboxError


def pod_with(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "l", "namespace": "arc-systems"}, "spec": {"containers": list(containers)}}


def test_an_arc_listener_pod_is_recognised_by_its_command_and_names_its_container() -> None:
    arc = pod_with({"name": "autoscaler", "image": "ghcr.io/actions/gha:0.6.1", "command": [ARC_LISTENER_COMMAND]})
    ours = pod_with({"name": "listener", "image": "arc-scaleset:1", "args": ["listener"]})
    assert arc_listener_container(arc) == "autoscaler"
    assert arc_listener_container(ours) is None


def sandbox_in(tmp_path: Path, *, token: bool = True) -> Sandbox:
    sandbox = Sandbox(root=tmp_path, env={}, credentials="service account arc-systems/l")
    if token:
        sandbox.token_file.parent.mkdir()
        sandbox.token_file.write_text("pod-token")
    return sandbox


def test_in_cluster_credentials_are_the_pods_token_the_cluster_ca_and_the_api_address(tmp_path: Path) -> None:
    sandbox = sandbox_in(tmp_path)
    connection = ConnectionConfig(server="https://127.0.0.1:6443", ca_data=b"CA PEM")
    env = prepare_in_cluster(sandbox, connection, "arc-systems")
    assert env == {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}
    account = sandbox.token_file.parent
    assert (account / "ca.crt").read_bytes() == b"CA PEM"
    assert (account / "namespace").read_text() == "arc-systems"
    assert (account / "token").read_text() == "pod-token"


def test_without_a_pod_token_an_arc_listener_is_not_started(tmp_path: Path) -> None:
    connection = ConnectionConfig(server="https://127.0.0.1:6443", ca_data=b"CA PEM")
    with pytest.raises(SandboxError, match="service-account token"):
        prepare_in_cluster(sandbox_in(tmp_path, token=False), connection, "arc-systems")


def test_the_metrics_address_of_arcs_config_moves_to_a_free_loopback_port(tmp_path: Path) -> None:
    config = tmp_path / "volumes" / "listener-config" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_bytes(orjson.dumps({"configureUrl": "https://github.com/o", "metricsAddr": ":8080"}))
    port = give_metrics_a_free_port(str(config), tmp_path, key=ARC_METRICS_ADDR_KEY)
    assert port is not None
    assert orjson.loads(config.read_bytes())["metricsAddr"] == f"127.0.0.1:{port}"
    config.write_bytes(orjson.dumps({"configureUrl": "https://github.com/o", "metricsAddr": ""}))
    assert give_metrics_a_free_port(str(config), tmp_path, key=ARC_METRICS_ADDR_KEY) is None


def test_an_arc_listener_that_fails_marks_its_autoscaler_container_failed() -> None:
    pod = pod_with({"name": "autoscaler", "image": "gha:0.6.1", "command": [ARC_LISTENER_COMMAND]})
    pod["metadata"]["uid"] = "u-1"
    patch = terminated_status_patch(pod, 1, finished_at="2026-03-01T12:00:00Z", listener="autoscaler")
    assert patch["status"]["phase"] == "Failed"
    [autoscaler] = patch["status"]["containerStatuses"]
    assert autoscaler["name"] == "autoscaler"
    assert autoscaler["state"]["terminated"]["exitCode"] == 1
