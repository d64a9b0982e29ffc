"""The listener pod: its shape, the listenerTemplate merge, and when a live pod must be recreated
(ARC #4635: derivation, the config-version annotation, removed ports)."""

from __future__ import annotations

import copy
from typing import Any

from arc_scaleset.controllers.autoscalinglistener.pod import (
    desired_listener_pod,
    merge_listener_template,
    recreation_reason,
)
from tests.unit.controllers.listener_factory import listener_object, parsed_listener

ANNOTATION = "actions.github.com/listener-config-resource-version"


def pod(*, rv: str = "100", metrics_port: int | None = 8080, command: tuple[str, ...] = ("arc-scaleset", "listener"),
        **spec: Any) -> dict[str, Any]:  # fmt: skip
    obj = listener_object(**spec)
    return desired_listener_pod(obj, parsed_listener(obj), command=command, metrics_port=metrics_port,
                                config_resource_version=rv)  # fmt: skip


def server_defaulted(desired: dict[str, Any]) -> dict[str, Any]:
    """What the API server and admission make of the desired pod."""
    live = copy.deepcopy(desired)
    live["metadata"].update({"uid": "pod-uid", "resourceVersion": "5", "creationTimestamp": "2026-01-01T00:00:00Z"})
    spec = live["spec"]
    spec.update({
        "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler", "nodeName": "kwok-node-0",
        "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0, "serviceAccount": spec["serviceAccountName"],
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
        ],
    })  # fmt: skip
    spec.setdefault("securityContext", {})
    spec["volumes"][0]["secret"].setdefault("defaultMode", 420)
    spec["volumes"].append({"name": "kube-api-access-abcde", "projected": {"sources": [], "defaultMode": 420}})
    container = spec["containers"][0]
    container.update({"imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
                      "terminationMessagePolicy": "File", "resources": {}})  # fmt: skip
    container["volumeMounts"].append(
        {
            "name": "kube-api-access-abcde",
            "readOnly": True,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        }
    )
    live["status"] = {"phase": "Running"}
    return live


def test_the_pod_runs_the_projects_listener_with_its_config_mounted_and_a_metrics_port() -> None:
    desired = pod()
    assert desired["metadata"]["name"] == "arc-runners-abc12345-listener"
    assert desired["metadata"]["annotations"] == {ANNOTATION: "100"}
    assert desired["metadata"]["ownerReferences"][0]["kind"] == "AutoscalingListener"
    spec = desired["spec"]
    assert spec["serviceAccountName"] == "arc-runners-abc12345-listener"
    assert spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["volumes"] == [
        {
            "name": "listener-config",
            "secret": {"secretName": "arc-runners-abc12345-listener-config", "defaultMode": 0o440},
        }
    ]
    (container,) = spec["containers"]
    assert container["command"] == ["arc-scaleset", "listener"]
    assert container["image"] == "ghcr.io/example/arc-scaleset:0.1.0"
    assert container["env"] == [{"name": "LISTENER_CONFIG_PATH", "value": "/etc/gha-listener/config.json"}]
    assert container["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert container["volumeMounts"] == [
        {"name": "listener-config", "mountPath": "/etc/gha-listener", "readOnly": True}
    ]


def test_disabled_metrics_give_no_port_and_the_entrypoint_is_the_configured_command() -> None:
    container = pod(metrics_port=None, command=("/x",))["spec"]["containers"][0]
    assert "ports" not in container
    assert container["command"] == ["/x"]


def test_proxy_env_comes_from_the_proxy_secret_for_configured_parts_only() -> None:
    env = pod(proxy={"https": {"url": "http://p:3128"}, "noProxy": ["a"]})["spec"]["containers"][0]["env"]
    secret = "arc-runners-abc12345-listener-proxy"
    assert env[1:] == [
        {"name": "https_proxy", "valueFrom": {"secretKeyRef": {"name": secret, "key": "https_proxy"}}},
        {"name": "no_proxy", "valueFrom": {"secretKeyRef": {"name": secret, "key": "no_proxy"}}},
    ]


def test_the_template_merges_into_the_listener_container_and_replaces_pod_fields_by_arcs_rules() -> None:
    template = {
        "metadata": {"labels": {"app.kubernetes.io/component": "forged", "extra": "1"}, "annotations": {"a": "1"}},
        "spec": {
            "serviceAccountName": "ignored",
            "containers": [
                {"name": "listener", "env": [{"name": "X", "value": "1"}], "resources": {"limits": {"cpu": "1"}},
                 "ports": [{"name": "debug", "containerPort": 9000}]},
                {"name": "sidecar", "image": "busybox"},
            ],
            "nodeSelector": {},
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "volumes": [{"name": "extra", "emptyDir": {}}],
        },
    }  # fmt: skip
    merged = pod(template=template)
    meta = merged["metadata"]
    assert meta["labels"]["app.kubernetes.io/component"] == "runner-scale-set-listener"  # existing keys win
    assert meta["labels"]["extra"] == "1"
    assert meta["annotations"]["a"] == "1"
    spec = merged["spec"]
    assert spec["serviceAccountName"] == "arc-runners-abc12345-listener"
    listener, sidecar = spec["containers"]
    assert [e["name"] for e in listener["env"]] == ["LISTENER_CONFIG_PATH", "X"]
    assert [p["name"] for p in listener["ports"]] == ["metrics", "debug"]
    assert listener["resources"] == {"limits": {"cpu": "1"}}
    assert sidecar == {"name": "sidecar", "image": "busybox"}
    assert spec["nodeSelector"] == {}  # an explicitly empty selector clears the linux default
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert [v["name"] for v in spec["volumes"]] == ["listener-config", "extra"]
    assert "terminationGracePeriodSeconds" not in spec  # replaced unconditionally, as ARC does


def test_the_template_merge_does_not_modify_its_inputs() -> None:
    base = pod()
    template = {"spec": {"containers": [{"name": "listener", "args": ["-v"]}]}}
    before = (copy.deepcopy(base), copy.deepcopy(template))
    merge_listener_template(base, template)
    assert (base, template) == before


def test_server_defaults_and_admission_injections_never_cause_a_recreation() -> None:
    desired = pod()
    assert recreation_reason(server_defaulted(desired), desired) is None


def test_a_new_config_secret_version_recreates_the_pod() -> None:
    live = server_defaulted(pod(rv="100"))
    assert "resourceVersion 100 -> 101" in (recreation_reason(live, pod(rv="101")) or "")


def test_a_live_pod_without_the_config_annotation_is_recreated_once() -> None:
    desired = pod(rv="100")
    live = server_defaulted(desired)
    del live["metadata"]["annotations"][ANNOTATION]
    assert recreation_reason(live, desired) is not None
    assert recreation_reason(server_defaulted(desired), desired) is None


def test_a_removed_container_port_recreates_the_pod() -> None:
    live = server_defaulted(pod(metrics_port=8080))
    assert "ports" in (recreation_reason(live, pod(metrics_port=None)) or "")


def test_a_changed_image_or_command_recreates_the_pod() -> None:
    live = server_defaulted(pod())
    assert recreation_reason(live, pod(image="other:2")) == "the pod spec changed"
    assert recreation_reason(live, pod(command=("/x",))) == "the pod spec changed"
