"""The listener kubelet's pure parts: the status it writes, paths it rewrites, the kubeconfig it mints."""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from arc_scaleset.kube.credentials import ConnectionConfig
from arc_scaleset.kube.kubeconfig import load_kubeconfig
from arc_scaleset_lab.node.listener_kubelet import (
    exit_code_of,
    give_metrics_a_free_port,
    give_probes_a_free_port,
    grace_seconds,
    ready_to_start,
    terminated_status_patch,
)
from arc_scaleset_lab.node.pod_sandbox import pod_kubeconfig, refresh_delay, rewrite_path

NOW = "2026-03-01T12:00:00Z"


def listener_pod(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "l", "namespace": "arc-systems", "uid": "u-1"},
        "spec": {
            "nodeName": "kwok-node-0",
            "containers": [{"name": "listener", "image": "img:1"}, {"name": "sidecar", "image": "side:1"}],
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "listener", "state": {"running": {"startedAt": "2026-03-01T11:00:00Z"}}},
                {"name": "sidecar", "state": {"running": {"startedAt": "2026-03-01T11:00:01Z"}}},
            ],
            **status,
        },
    }


def test_a_listener_exiting_1_fails_the_pod_with_that_exit_code() -> None:
    patch = terminated_status_patch(listener_pod(), 1, finished_at=NOW)
    assert patch["status"]["phase"] == "Failed"
    listener, sidecar = patch["status"]["containerStatuses"]
    assert listener["name"] == "listener"
    assert listener["state"]["terminated"] == {
        "exitCode": 1,
        "reason": "Error",
        "startedAt": "2026-03-01T11:00:00Z",
        "finishedAt": NOW,
    }
    assert sidecar["state"]["terminated"]["exitCode"] == 0
    assert {c["type"]: c["status"] for c in patch["status"]["conditions"]} == {
        "Ready": "False",
        "ContainersReady": "False",
    }


def test_a_listener_exiting_0_completes_the_pod() -> None:
    patch = terminated_status_patch(listener_pod(), 0, finished_at=NOW)
    assert patch["status"]["phase"] == "Succeeded"
    assert patch["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"


def test_the_status_patch_carries_the_pod_uid_so_a_recreated_pod_is_not_written() -> None:
    assert terminated_status_patch(listener_pod(), 1, finished_at=NOW)["metadata"] == {"uid": "u-1"}


@pytest.mark.parametrize(("returncode", "exit_code"), [(0, 0), (1, 1), (-9, 137), (-15, 143)])
def test_a_signal_becomes_128_plus_its_number(returncode: int, exit_code: int) -> None:
    assert exit_code_of(returncode) == exit_code


def test_a_listener_starts_only_once_bound_and_running() -> None:
    assert ready_to_start(listener_pod())
    assert not ready_to_start(listener_pod(phase="Pending"))
    unbound = listener_pod()
    del unbound["spec"]["nodeName"]
    assert not ready_to_start(unbound)


def test_the_grace_period_is_the_deletions_then_the_specs_then_30s() -> None:
    pod = listener_pod()
    assert grace_seconds(pod) == 30.0
    pod["spec"]["terminationGracePeriodSeconds"] = 60
    assert grace_seconds(pod) == 60.0
    pod["metadata"]["deletionGracePeriodSeconds"] = 0
    assert grace_seconds(pod) == 0.0


def test_paths_under_a_mount_point_to_the_local_copy_and_others_are_kept() -> None:
    mounts = {"/etc/gha-listener": Path("/tmp/s/volumes/listener-config"), "/etc": Path("/tmp/s/volumes/etc")}
    assert rewrite_path("/etc/gha-listener/config.json", mounts) == "/tmp/s/volumes/listener-config/config.json"
    assert rewrite_path("/etc/hosts", mounts) == "/tmp/s/volumes/etc/hosts"
    assert rewrite_path("/etc-other/x", mounts) == "/etc-other/x"
    assert rewrite_path("debug", mounts) == "debug"


def test_the_minted_kubeconfig_loads_with_the_servers_ca_and_the_token_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("sa-token-value")
    ca = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    connection = ConnectionConfig(server="https://127.0.0.1:6443", ca_data=ca)
    path = tmp_path / "kubeconfig"
    path.write_bytes(pod_kubeconfig(connection, token_file=token, namespace="arc-systems"))
    document = yaml.safe_load(path.read_text())
    assert base64.b64decode(document["clusters"][0]["cluster"]["certificate-authority-data"]) == ca
    assert "sa-token-value" not in path.read_text()  # a file reference: the token can rotate
    loaded = load_kubeconfig(path)
    assert loaded.server == "https://127.0.0.1:6443"
    assert loaded.namespace == "arc-systems"
    assert loaded.token_source.authorization() == "Bearer sa-token-value"


def test_tokens_are_refreshed_at_80_percent_of_their_lifetime() -> None:
    now = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    assert refresh_delay(now + dt.timedelta(seconds=3600), now=now, lifetime=3600) == pytest.approx(2880)
    assert refresh_delay(now - dt.timedelta(seconds=5), now=now, lifetime=3600) == 1.0


def test_a_materialised_config_gets_a_free_loopback_metrics_port(tmp_path: Path) -> None:
    config = tmp_path / "volumes" / "listener-config" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_bytes(orjson.dumps({"metrics_addr": ":8080", "github_token": "t"}))
    port = give_metrics_a_free_port(str(config), tmp_path)
    assert port is not None
    assert orjson.loads(config.read_bytes()) == {"metrics_addr": f"127.0.0.1:{port}", "github_token": "t"}


@pytest.mark.parametrize("addr", ["", "0"])
def test_disabled_metrics_stay_disabled(tmp_path: Path, addr: str) -> None:
    config = tmp_path / "config.json"
    config.write_bytes(orjson.dumps({"metrics_addr": addr}))
    assert give_metrics_a_free_port(str(config), tmp_path) is None
    assert orjson.loads(config.read_bytes()) == {"metrics_addr": addr}


def test_a_probe_address_in_the_pods_env_gets_a_free_loopback_port_so_listeners_never_collide() -> None:
    first, second = {"LISTENER_PROBE_ADDR": ":8081"}, {"LISTENER_PROBE_ADDR": ":8081"}
    ports = give_probes_a_free_port(first), give_probes_a_free_port(second)
    assert None not in ports
    assert (first, second) == (
        {"LISTENER_PROBE_ADDR": f"127.0.0.1:{ports[0]}"},
        {"LISTENER_PROBE_ADDR": f"127.0.0.1:{ports[1]}"},
    )


@pytest.mark.parametrize("env", [{}, {"LISTENER_PROBE_ADDR": ""}, {"LISTENER_PROBE_ADDR": "0"}])
def test_no_probe_address_asks_for_no_port(env: dict[str, str]) -> None:
    before = dict(env)
    assert give_probes_a_free_port(env) is None
    assert env == before


def test_a_config_outside_the_sandbox_is_never_rewritten(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_bytes(orjson.dumps({"metrics_addr": ":8080"}))
    assert give_metrics_a_free_port(str(config), tmp_path / "sandbox") is None
