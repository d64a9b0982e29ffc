"""The listener pod policy, by allow list: the pod a listenerTemplate makes must meet Pod Security "restricted"
with configMap, secret, emptyDir, projected and downwardAPI volumes only, keep to the cluster's scheduling, and
stay within the controller's resource bound; each refusal names the field as the user wrote it."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from arc_scaleset.cli import build_parser
from arc_scaleset.cmd.controller import settings_from_args
from arc_scaleset.controllers.autoscalinglistener.pod import desired_listener_pod
from arc_scaleset.controllers.autoscalinglistener.pod_security import PodRules, listener_pod_violations
from arc_scaleset.controllers.autoscalinglistener.violation import Violation
from arc_scaleset.controllers.settings import SettingsError, parse_resource_bound
from tests.paths import REPO_ROOT
from tests.unit.controllers.listener_factory import listener_object, parsed_listener

HARDENED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"}}  # fmt: skip
"""A sidecar's securityContext that meets the profile."""


def merged(tmpl: dict[str, Any] | None) -> dict[str, Any]:
    obj = listener_object(template=tmpl) if tmpl is not None else listener_object()
    return desired_listener_pod(obj, parsed_listener(obj), command=["arc-scaleset", "listener"], metrics_port=8080,
                                config_resource_version="1")  # fmt: skip


def violations(tmpl: dict[str, Any] | None, rules: PodRules | None = None) -> list[Violation]:
    return listener_pod_violations(merged(tmpl), tmpl, rules=rules or PodRules())


def fields(tmpl: dict[str, Any] | None, rules: PodRules | None = None) -> list[str]:
    return [v.field for v in violations(tmpl, rules)]


def listener(**container: Any) -> dict[str, Any]:
    return {"name": "listener", **container}


def sidecar(**container: Any) -> dict[str, Any]:
    return {"name": "side", "image": "busybox", "securityContext": dict(HARDENED), **container}


# -- what passes ------------------------------------------------------------------------------------------------


def test_the_projects_own_listener_pod_meets_the_policy() -> None:
    assert violations(None) == []


def test_the_scale_set_charts_example_listener_template_meets_the_policy() -> None:
    lines = (REPO_ROOT / "charts/gha-runner-scale-set/values.yaml").read_text().splitlines()
    start = lines.index("# listenerTemplate:") + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("#   "))
    tmpl = yaml.safe_load("\n".join(line.removeprefix("# ") for line in lines[start:end]))
    assert tmpl["spec"]["containers"][0]["securityContext"] == {"runAsUser": 1000}
    assert violations(tmpl) == []


def test_common_templates_still_pass() -> None:
    tmpl = {
        "metadata": {"labels": {"team": "a"}, "annotations": {"prometheus.io/scrape": "true"}},
        "spec": {
            "nodeSelector": {"pool": "system"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["system"]}]}]}}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}],
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000,
                                "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}]},
            "containers": [listener(
                env=[{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
                resources={"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
                securityContext={"runAsUser": 1000, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                                 "seLinuxOptions": {"type": "container_t"}, "procMount": "Default",
                                 "appArmorProfile": {"type": "RuntimeDefault"}},
            ), sidecar(resources={"limits": {"memory": "256Mi"}})],
            "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "info", "downwardAPI": {"items": []}},
                        {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}],
        },
    }  # fmt: skip
    assert violations(tmpl) == []


# -- what is refused, one field at a time -------------------------------------------------------------------

C0 = "listenerTemplate.spec.containers[0]"

REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("gitRepo volume", {"volumes": [{"name": "g", "gitRepo": {"repository": "https://x/y.git"}}]},
     "listenerTemplate.spec.volumes[0].gitRepo"),
    ("NFS volume", {"volumes": [{"name": "n", "nfs": {"server": "10.0.0.1", "path": "/"}}]},
     "listenerTemplate.spec.volumes[0].nfs"),
    ("foreign PVC", {"volumes": [{"name": "p", "persistentVolumeClaim": {"claimName": "team-b-cache"}}]},
     "listenerTemplate.spec.volumes[0].persistentVolumeClaim"),
    ("ephemeral volume", {"volumes": [{"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]},
     "listenerTemplate.spec.volumes[0].ephemeral"),
    ("csi volume", {"volumes": [{"name": "c", "csi": {"driver": "secrets-store.csi.k8s.io"}}]},
     "listenerTemplate.spec.volumes[0].csi"),
    ("hostPath volume", {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]},
     "listenerTemplate.spec.volumes[0].hostPath"),
    ("SELinux spc_t", {"containers": [listener(securityContext={"seLinuxOptions": {"type": "spc_t"}})]},
     f"{C0}.securityContext.seLinuxOptions.type"),
    ("pod SELinux spc_t", {"securityContext": {"seLinuxOptions": {"type": "spc_t"}}},
     "listenerTemplate.spec.securityContext.seLinuxOptions.type"),
    ("SELinux user", {"securityContext": {"seLinuxOptions": {"user": "system_u"}}},
     "listenerTemplate.spec.securityContext.seLinuxOptions.user"),
    ("procMount Unmasked", {"containers": [listener(securityContext={"procMount": "Unmasked"})]},
     f"{C0}.securityContext.procMount"),
    ("seccomp Unconfined", {"containers": [listener(securityContext={"seccompProfile": {"type": "Unconfined"}})]},
     f"{C0}.securityContext.seccompProfile.type"),
    ("pod seccomp Unconfined", {"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
     "listenerTemplate.spec.securityContext.seccompProfile.type"),
    ("AppArmor Unconfined", {"containers": [listener(securityContext={"appArmorProfile": {"type": "Unconfined"}})]},
     f"{C0}.securityContext.appArmorProfile.type"),
    ("pod AppArmor Unconfined", {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
     "listenerTemplate.spec.securityContext.appArmorProfile.type"),
    ("runAsUser 0", {"containers": [listener(securityContext={"runAsUser": 0})]}, f"{C0}.securityContext.runAsUser"),
    ("pod runAsUser 0", {"securityContext": {"runAsUser": 0}}, "listenerTemplate.spec.securityContext.runAsUser"),
    ("privilege escalation", {"containers": [listener(securityContext={"allowPrivilegeEscalation": True})]},
     f"{C0}.securityContext.allowPrivilegeEscalation"),
    ("runAsNonRoot false", {"containers": [listener(securityContext={"runAsNonRoot": False})]},
     f"{C0}.securityContext.runAsNonRoot"),
    ("privileged", {"containers": [listener(securityContext={"privileged": True})]},
     f"{C0}.securityContext.privileged"),
    ("added capability",
     {"containers": [listener(securityContext={"capabilities": {"add": ["SYS_ADMIN"], "drop": ["ALL"]}})]},
     f"{C0}.securityContext.capabilities.add"),
    ("capabilities not dropped", {"containers": [listener(securityContext={"capabilities": {"drop": ["NET_RAW"]}})]},
     f"{C0}.securityContext.capabilities.drop"),
    ("hostPort", {"containers": [listener(ports=[{"containerPort": 80, "hostPort": 80}])]}, f"{C0}.ports[1].hostPort"),
    ("sysctl", {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}},
     "listenerTemplate.spec.securityContext.sysctls[0].name"),
    ("hostNetwork", {"hostNetwork": True}, "listenerTemplate.spec.hostNetwork"),
    ("hostPID", {"hostPID": True}, "listenerTemplate.spec.hostPID"),
    ("hostIPC", {"hostIPC": True}, "listenerTemplate.spec.hostIPC"),
    ("host process", {"securityContext": {"windowsOptions": {"hostProcess": True}}},
     "listenerTemplate.spec.securityContext.windowsOptions.hostProcess"),
    ("nodeName", {"nodeName": "control-plane-1"}, "listenerTemplate.spec.nodeName"),
    ("control-plane toleration",
     {"tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]},
     "listenerTemplate.spec.tolerations"),
    ("priorityClassName", {"priorityClassName": "system-cluster-critical"}, "listenerTemplate.spec.priorityClassName"),
    ("priority", {"priority": 2000001000}, "listenerTemplate.spec.priority"),
    ("runtimeClassName", {"runtimeClassName": "runc-privileged"}, "listenerTemplate.spec.runtimeClassName"),
    ("schedulerName", {"schedulerName": "my-scheduler"}, "listenerTemplate.spec.schedulerName"),
    ("requests above the bound", {"containers": [listener(resources={"requests": {"memory": "64Gi"}})]},
     f"{C0}.resources.requests.memory"),
    ("limits above the bound", {"containers": [listener(resources={"limits": {"cpu": "16"}})]},
     f"{C0}.resources.limits.cpu"),
    ("a resource not in the bound", {"containers": [listener(resources={"limits": {"nvidia.com/gpu": "1"}})]},
     f"{C0}.resources.limits.nvidia.com/gpu"),
    ("init container requests above the bound",
     {"initContainers": [sidecar(name="init", resources={"requests": {"cpu": "8"}})]},
     "listenerTemplate.spec.initContainers[0].resources.requests.cpu"),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "field"), [(spec, field) for _, spec, field in REFUSED],
                         ids=[name for name, _, _ in REFUSED])  # fmt: skip
def test_each_field_outside_the_policy_is_refused_by_name(spec: dict[str, Any], field: str) -> None:
    found = violations({"spec": spec})
    assert [v.field for v in found] == [field], found
    (violation,) = found
    assert "--" in violation.problem, "the refusal says which controller flag would allow it"


def test_a_sidecar_must_be_hardened_itself_and_is_named_by_its_place_in_the_template() -> None:
    tmpl = {"spec": {"containers": [{"name": "side", "image": "busybox"}, listener(env=[{"name": "A", "value": "b"}])]}}
    assert fields(tmpl) == [
        "listenerTemplate.spec.containers[0].securityContext.allowPrivilegeEscalation",
        "listenerTemplate.spec.containers[0].securityContext.capabilities.drop",
        "listenerTemplate.spec.containers[0].securityContext.runAsNonRoot",
        "listenerTemplate.spec.containers[0].securityContext.seccompProfile.type",
    ]
    # The pod's own runAsNonRoot and seccomp profile stand for every container's.
    tmpl["spec"]["securityContext"] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert fields(tmpl) == [
        "listenerTemplate.spec.containers[0].securityContext.allowPrivilegeEscalation",
        "listenerTemplate.spec.containers[0].securityContext.capabilities.drop",
    ]


def test_a_template_volume_is_named_by_its_place_in_the_template_not_in_the_pod() -> None:
    tmpl = {"spec": {"volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "g", "gitRepo": {"repository": "r"}}]}}
    assert fields(tmpl) == ["listenerTemplate.spec.volumes[1].gitRepo"]


def test_an_apparmor_annotation_other_than_runtime_default_or_localhost_is_refused() -> None:
    prefix = "container.apparmor.security.beta.kubernetes.io/"
    tmpl = {"metadata": {"annotations": {f"{prefix}listener": "unconfined", f"{prefix}side": "localhost/x"}}}
    assert fields(tmpl) == [f'listenerTemplate.metadata.annotations["{prefix}listener"]']


def test_containers_within_the_bound_one_by_one_may_not_exceed_it_together() -> None:
    tmpl = {"spec": {"containers": [listener(resources={"requests": {"memory": "1536Mi"}}),
                                    sidecar(resources={"requests": {"memory": "1Gi"}})]}}  # fmt: skip
    (violation,) = violations(tmpl)
    assert violation.field == "listenerTemplate.spec.containers[*].resources.requests.memory"
    assert "--listener-template-max-resources" in violation.problem


def test_a_device_claimed_through_dynamic_resource_allocation_is_refused_whatever_the_flags() -> None:
    spec = {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-of-another-team"},
                               {"name": "fresh", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [listener(resources={"claims": [{"name": "gpu"}, {"name": "fresh"}]})]}  # fmt: skip
    everything = PodRules(allow_privileged=True, allow_scheduling=True,
                          max_resources=parse_resource_bound("cpu=64,memory=1Ti,nvidia.com/gpu=8"))  # fmt: skip
    for rules in (PodRules(), everything):
        found = violations({"spec": spec}, rules)
        assert [v.field for v in found] == [
            "listenerTemplate.spec.resourceClaims[0]",
            "listenerTemplate.spec.resourceClaims[1]",
        ]
        assert "resourceClaimName 'gpu-of-another-team'" in found[0].problem
        assert "resourceClaimTemplateName 'one-gpu'" in found[1].problem


# -- what the admin allows ----------------------------------------------------------------------------------


def test_the_privileged_flag_lifts_the_profile_but_not_scheduling_or_the_bound() -> None:
    spec = {"hostNetwork": True, "volumes": [{"name": "n", "nfs": {"server": "s", "path": "/"}}], "nodeName": "n1",
            "containers": [listener(resources={"limits": {"memory": "64Gi"}})]}  # fmt: skip
    assert fields({"spec": spec}, PodRules(allow_privileged=True)) == [
        "listenerTemplate.spec.nodeName",
        f"{C0}.resources.limits.memory",
    ]


def test_the_scheduling_flag_allows_node_name_tolerations_priority_and_runtime_class() -> None:
    spec = {"nodeName": "n1", "tolerations": [{"operator": "Exists"}], "priorityClassName": "high",
            "runtimeClassName": "gvisor", "schedulerName": "s"}  # fmt: skip
    assert len(fields({"spec": spec})) == 5
    assert fields({"spec": spec}, PodRules(allow_scheduling=True)) == []


def test_the_resource_bound_is_the_controllers_to_set() -> None:
    tmpl = {"spec": {"containers": [listener(resources={"limits": {"memory": "8Gi", "nvidia.com/gpu": "1"}})]}}
    assert len(fields(tmpl)) == 2
    assert fields(tmpl, PodRules(max_resources=parse_resource_bound("memory=8Gi,nvidia.com/gpu=1"))) == []


def test_the_flags_reach_the_settings() -> None:
    argv = ["controller", "--allow-listener-template-scheduling",
            "--listener-template-max-resources=cpu=500m, memory=1Gi"]  # fmt: skip
    environ = {"CONTROLLER_MANAGER_POD_NAMESPACE": "arc-system", "CONTROLLER_MANAGER_CONTAINER_IMAGE": "img:1"}
    settings = settings_from_args(build_parser(argv).parse_args(argv), environ)
    assert settings.allow_listener_template_scheduling is True
    assert dict(settings.listener_template_max_resources) == parse_resource_bound("cpu=0.5,memory=1073741824")
    defaults = settings_from_args(build_parser(["controller"]).parse_args(["controller"]), environ)
    assert defaults.allow_listener_template_scheduling is False
    assert set(defaults.listener_template_max_resources) == {"cpu", "memory", "ephemeral-storage"}


@pytest.mark.parametrize("text", ["cpu", "cpu=lots", "=1"])
def test_a_malformed_resource_bound_is_a_settings_error_naming_the_flag(text: str) -> None:
    with pytest.raises(SettingsError, match="--listener-template-max-resources"):
        parse_resource_bound(text)
