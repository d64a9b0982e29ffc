"""The listener pod's liveness probe on the listener's /healthz (issue 15, item 1: nothing restarted a listener
that had stopped working), whether or not listener metrics are on."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.controllers.autoscalinglistener.pod import (
    dedicated_probe_port,
    desired_listener_pod,
    recreation_reason,
)
from tests.unit.controllers.autoscalinglistener.test_listener_pod import server_defaulted
from tests.unit.controllers.listener_factory import listener_object, parsed_listener


def listener_container(*, metrics_addr: str, **spec: Any) -> dict[str, Any]:
    obj = listener_object(**spec)
    enabled = metrics_addr not in ("", "0")
    pod = desired_listener_pod(
        obj,
        parsed_listener(obj),
        command=("arc-scaleset", "listener"),
        metrics_port=int(metrics_addr.rpartition(":")[2]) if enabled else None,
        config_resource_version="1",
        probe_port=dedicated_probe_port(metrics_addr),
    )
    containers = {c["name"]: c for c in pod["spec"]["containers"]}
    return containers["listener"]


def ports(container: dict[str, Any]) -> dict[str, int]:
    return {port["name"]: port["containerPort"] for port in container.get("ports") or []}


def test_with_metrics_on_every_interface_the_probe_uses_the_metrics_port() -> None:
    container = listener_container(metrics_addr=":8080")
    probe = container["livenessProbe"]
    assert probe["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTP"}
    assert probe["failureThreshold"] * probe["periodSeconds"] >= 60, "a passing hiccup never restarts it"
    assert ports(container) == {"metrics": 8080}
    assert "LISTENER_PROBE_ADDR" not in {env["name"] for env in container["env"]}


@pytest.mark.parametrize(
    ("metrics_addr", "port"), [("0", 8081), ("", 8081), ("127.0.0.1:8080", 8081), ("10.0.0.1:8081", 8082)]
)
def test_without_a_metrics_server_the_probes_can_reach_the_listener_serves_them_on_a_port_of_their_own(
    metrics_addr: str, port: int
) -> None:
    container = listener_container(metrics_addr=metrics_addr)
    assert container["livenessProbe"]["httpGet"]["port"] == "probes"
    assert ports(container)["probes"] == port
    assert {"name": "LISTENER_PROBE_ADDR", "value": f":{port}"} in container["env"]


def test_a_template_that_customises_the_listener_container_keeps_the_probe_unless_it_sets_its_own() -> None:
    resources = {"limits": {"memory": "256Mi"}}
    custom = listener_container(
        metrics_addr=":8080", template={"spec": {"containers": [{"name": "listener", "resources": resources}]}}
    )
    assert custom["resources"] == resources
    assert custom["livenessProbe"]["httpGet"]["path"] == "/healthz"

    own = {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 60}
    replaced = listener_container(
        metrics_addr=":8080", template={"spec": {"containers": [{"name": "listener", "livenessProbe": own}]}}
    )
    assert replaced["livenessProbe"] == own


def test_the_probe_causes_no_recreation_once_the_api_server_has_defaulted_it() -> None:
    obj = listener_object()
    desired = desired_listener_pod(
        obj, parsed_listener(obj), command=("arc-scaleset", "listener"), metrics_port=None,
        config_resource_version="1", probe_port=8081,
    )  # fmt: skip
    live = server_defaulted(desired)
    live["spec"]["containers"][0]["livenessProbe"]["successThreshold"] = 1
    assert recreation_reason(live, desired) is None
